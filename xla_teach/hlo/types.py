"""Element types (XLA's ``PrimitiveType``) and their NumPy equivalents.

Every array in HLO has one element type, spelled in the text format exactly as
below (``f32``, ``bf16``, ``pred`` ...). ``bf16`` comes from ``ml_dtypes``
because NumPy has no native bfloat16.

    >>> PrimitiveType.from_name("f32").dtype
    dtype('float32')
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class PrimitiveType(enum.Enum):
    """The element types xla_teach understands, valued by their HLO spelling."""

    PRED = "pred"
    S8 = "s8"
    S16 = "s16"
    S32 = "s32"
    S64 = "s64"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"
    TUPLE = "tuple"
    TOKEN = "token"

    # ---- classification -------------------------------------------------------------
    @property
    def is_array_type(self) -> bool:
        return self not in (PrimitiveType.TUPLE, PrimitiveType.TOKEN)

    @property
    def is_pred(self) -> bool:
        return self is PrimitiveType.PRED

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_signed_int(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_int(self) -> bool:
        return self in _UNSIGNED

    @property
    def is_integral(self) -> bool:
        """Signed or unsigned integer (not pred)."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def bit_width(self) -> int:
        """Bits per element; pred counts as 8 (one byte in memory)."""
        return _BITS[self]

    @property
    def byte_size(self) -> int:
        return _BITS[self] // 8

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype holding values of this type."""
        if not self.is_array_type:
            raise TypeError(f"{self.value} has no NumPy dtype")
        return _DTYPES[self]

    # ---- conversions ----------------------------------------------------------------
    @staticmethod
    def from_name(name: str) -> PrimitiveType:
        try:
            return PrimitiveType(name)
        except ValueError:
            known = ", ".join(t.value for t in PrimitiveType)
            raise ValueError(f"unknown element type '{name}' (known: {known})") from None

    @staticmethod
    def from_dtype(dtype: np.dtype | type) -> PrimitiveType:
        dt = np.dtype(dtype)
        for ptype, candidate in _DTYPES.items():
            if candidate == dt:
                return ptype
        raise TypeError(f"NumPy dtype {dt} has no HLO element type")

    def __repr__(self) -> str:
        return self.value


_FLOATS = frozenset({PrimitiveType.F16, PrimitiveType.BF16, PrimitiveType.F32, PrimitiveType.F64})
_SIGNED = frozenset({PrimitiveType.S8, PrimitiveType.S16, PrimitiveType.S32, PrimitiveType.S64})
_UNSIGNED = frozenset({PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32, PrimitiveType.U64})

_BITS = {
    PrimitiveType.PRED: 8,
    PrimitiveType.S8: 8,
    PrimitiveType.S16: 16,
    PrimitiveType.S32: 32,
    PrimitiveType.S64: 64,
    PrimitiveType.U8: 8,
    PrimitiveType.U16: 16,
    PrimitiveType.U32: 32,
    PrimitiveType.U64: 64,
    PrimitiveType.F16: 16,
    PrimitiveType.BF16: 16,
    PrimitiveType.F32: 32,
    PrimitiveType.F64: 64,
    PrimitiveType.TUPLE: 64,  # a tuple is a table of pointers
    PrimitiveType.TOKEN: 0,
}

_DTYPES: dict[PrimitiveType, np.dtype] = {
    PrimitiveType.PRED: np.dtype(np.bool_),
    PrimitiveType.S8: np.dtype(np.int8),
    PrimitiveType.S16: np.dtype(np.int16),
    PrimitiveType.S32: np.dtype(np.int32),
    PrimitiveType.S64: np.dtype(np.int64),
    PrimitiveType.U8: np.dtype(np.uint8),
    PrimitiveType.U16: np.dtype(np.uint16),
    PrimitiveType.U32: np.dtype(np.uint32),
    PrimitiveType.U64: np.dtype(np.uint64),
    PrimitiveType.F16: np.dtype(np.float16),
    PrimitiveType.BF16: np.dtype(ml_dtypes.bfloat16),
    PrimitiveType.F32: np.dtype(np.float32),
    PrimitiveType.F64: np.dtype(np.float64),
}

ARRAY_TYPES: tuple[PrimitiveType, ...] = tuple(t for t in PrimitiveType if t.is_array_type)
FLOAT_TYPES: tuple[PrimitiveType, ...] = tuple(t for t in ARRAY_TYPES if t.is_float)
INTEGRAL_TYPES: tuple[PrimitiveType, ...] = tuple(t for t in ARRAY_TYPES if t.is_integral)
