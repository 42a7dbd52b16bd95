"""Typed values of instruction attributes that are more than an int or a list.

Each class knows its own HLO text spelling (``to_text``) and, for the compact
forms, how to read it back (``from_text``):

* :class:`Window` — ``{size=2x2 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=..}``
* :class:`SliceDim` — one ``[start:limit:stride]`` of ``slice={...}``
* :class:`PaddingDim` — one ``lo_hi_interior`` of ``padding=1_1x0_0``
* :class:`ConvDimensionNumbers` — ``dim_labels=b01f_01io->b01f``
* :class:`OpMetadata` — ``metadata={op_name="..." source_line=3}``
"""

from __future__ import annotations

import re
from dataclasses import dataclass


# ---------------------------------------------------------------------------------------
# Windows (reduce-window, select-and-scatter, convolution)
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowDimension:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1  # printed rhs_dilate
    base_dilation: int = 1  # printed lhs_dilate
    window_reversal: bool = False  # printed rhs_reversal


@dataclass(frozen=True)
class Window:
    dimensions: tuple[WindowDimension, ...]

    def to_text(self) -> str:
        """Only non-default fields are printed; ``size`` always is (``{}`` for no dimensions:
        the window of a rank-0 reduce-window or of a convolution without spatial dims, which
        XLA leaves out of the text altogether)."""
        dims = self.dimensions
        if not dims:
            return "{}"
        parts = ["size=" + "x".join(str(d.size) for d in dims)]
        if any(d.stride != 1 for d in dims):
            parts.append("stride=" + "x".join(str(d.stride) for d in dims))
        if any(d.padding_low != 0 or d.padding_high != 0 for d in dims):
            parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
        if any(d.base_dilation != 1 for d in dims):
            parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
        if any(d.window_dilation != 1 for d in dims):
            parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
        if any(d.window_reversal for d in dims):
            parts.append("rhs_reversal=" + "x".join(str(int(d.window_reversal)) for d in dims))
        return "{" + " ".join(parts) + "}"

    @staticmethod
    def from_fields(fields: dict[str, str]) -> Window:
        """Build from the ``key=value`` pairs inside the braces (values still text)."""
        if not fields:
            return NO_WINDOW
        if "size" not in fields:
            raise ValueError("window needs size=")
        sizes = [int(v) for v in fields["size"].split("x")]
        rank = len(sizes)

        def ints(key: str, default: int) -> list[int]:
            if key not in fields:
                return [default] * rank
            values = [int(v) for v in fields[key].split("x")]
            if len(values) != rank:
                raise ValueError(f"window {key} has {len(values)} entries, size has {rank}")
            return values

        pads = [(0, 0)] * rank
        if "pad" in fields:
            pads = []
            for item in fields["pad"].split("x"):
                lo_hi = item.split("_")
                if len(lo_hi) != 2:
                    raise ValueError(f"window pad entry '{item}' is not lo_hi")
                pads.append((int(lo_hi[0]), int(lo_hi[1])))
            if len(pads) != rank:
                raise ValueError(f"window pad has {len(pads)} entries, size has {rank}")
        unknown = set(fields) - {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
        if unknown:
            raise ValueError(f"unknown window field(s): {', '.join(sorted(unknown))}")
        strides = ints("stride", 1)
        lhs = ints("lhs_dilate", 1)
        rhs = ints("rhs_dilate", 1)
        rev = ints("rhs_reversal", 0)
        return Window(
            tuple(
                WindowDimension(sizes[i], strides[i], pads[i][0], pads[i][1], rhs[i], lhs[i], bool(rev[i]))
                for i in range(rank)
            )
        )

    @staticmethod
    def make(
        sizes: tuple[int, ...] | list[int],
        strides: tuple[int, ...] | list[int] | None = None,
        padding: tuple[tuple[int, int], ...] | list[tuple[int, int]] | None = None,
        base_dilation: tuple[int, ...] | list[int] | None = None,
        window_dilation: tuple[int, ...] | list[int] | None = None,
    ) -> Window:
        """Convenience constructor used by the builder."""
        rank = len(sizes)
        strides = strides or [1] * rank
        padding = padding or [(0, 0)] * rank
        base_dilation = base_dilation or [1] * rank
        window_dilation = window_dilation or [1] * rank
        return Window(
            tuple(
                WindowDimension(
                    int(sizes[i]),
                    int(strides[i]),
                    int(padding[i][0]),
                    int(padding[i][1]),
                    int(window_dilation[i]),
                    int(base_dilation[i]),
                )
                for i in range(rank)
            )
        )


NO_WINDOW = Window(())  # the window of an op with no window dimensions; XLA prints no ``window=`` then


# ---------------------------------------------------------------------------------------
# slice={[0:8:2], ...} and padding=1_1x0_0_1
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1

    def to_text(self) -> str:
        if self.stride == 1:
            return f"[{self.start}:{self.limit}]"
        return f"[{self.start}:{self.limit}:{self.stride}]"


def slice_to_text(dims: tuple[SliceDim, ...]) -> str:
    return "{" + ", ".join(d.to_text() for d in dims) + "}"


@dataclass(frozen=True)
class PaddingDim:
    low: int = 0
    high: int = 0
    interior: int = 0


def padding_to_text(dims: tuple[PaddingDim, ...]) -> str:
    """``lo_hi`` per dim joined by ``x``; all dims get ``_interior`` if any has one."""
    with_interior = any(d.interior != 0 for d in dims)
    items = []
    for d in dims:
        item = f"{d.low}_{d.high}"
        if with_interior:
            item += f"_{d.interior}"
        items.append(item)
    return "x".join(items)


def padding_from_text(text: str) -> tuple[PaddingDim, ...]:
    if text == "":
        return ()
    dims = []
    for item in text.split("x"):
        numbers = item.split("_")
        if len(numbers) not in (2, 3):
            raise ValueError(f"padding entry '{item}' is not lo_hi or lo_hi_interior")
        values = [int(n) for n in numbers]
        dims.append(PaddingDim(values[0], values[1], values[2] if len(values) == 3 else 0))
    return tuple(dims)


# ---------------------------------------------------------------------------------------
# Convolution dimension numbers: dim_labels=b01f_01io->b01f
# ---------------------------------------------------------------------------------------
_DIM_LABELS_RE = re.compile(r"^([0-9bf]+)_([0-9io]+)->([0-9bf]+)$")


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """Which dimension of input, kernel and output plays which role.

    ``input_spatial_dimensions[k]`` is the input dimension labelled ``k`` etc.
    """

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]

    @staticmethod
    def from_text(text: str) -> ConvDimensionNumbers:
        match = _DIM_LABELS_RE.match(text)
        if not match:
            raise ValueError(f"dim_labels '{text}' is not of the form b01f_01io->b01f")
        lhs, rhs, out = match.groups()

        def roles(labels: str, a: str, b: str, what: str) -> tuple[int, int, tuple[int, ...]]:
            if labels.count(a) != 1 or labels.count(b) != 1:
                raise ValueError(f"{what} labels '{labels}' need exactly one '{a}' and one '{b}'")
            spatial = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
            if [s for s, _ in spatial] != list(range(len(spatial))):
                raise ValueError(f"{what} labels '{labels}' must number spatial dims 0..n-1")
            return labels.index(a), labels.index(b), tuple(i for _, i in spatial)

        ib, if_, isp = roles(lhs, "b", "f", "input")
        ki, ko, ksp = roles(rhs, "i", "o", "kernel")
        ob, of, osp = roles(out, "b", "f", "output")
        if not (len(isp) == len(ksp) == len(osp)):
            raise ValueError(f"dim_labels '{text}' has differing spatial ranks")
        return ConvDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp)

    def to_text(self) -> str:
        def labels(rank: int, first: tuple[int, str], second: tuple[int, str], spatial: tuple[int, ...]) -> str:
            chars = ["?"] * rank
            chars[first[0]] = first[1]
            chars[second[0]] = second[1]
            for k, d in enumerate(spatial):
                chars[d] = str(k)
            return "".join(chars)

        n = len(self.input_spatial_dimensions) + 2
        lhs = labels(n, (self.input_batch_dimension, "b"), (self.input_feature_dimension, "f"),
                     self.input_spatial_dimensions)
        rhs = labels(n, (self.kernel_input_feature_dimension, "i"), (self.kernel_output_feature_dimension, "o"),
                     self.kernel_spatial_dimensions)
        out = labels(n, (self.output_batch_dimension, "b"), (self.output_feature_dimension, "f"),
                     self.output_spatial_dimensions)
        return f"{lhs}_{rhs}->{out}"


# ---------------------------------------------------------------------------------------
# metadata={op_type="Mul" op_name="jit(f)/mul" source_file="f.py" source_line=7}
# ---------------------------------------------------------------------------------------
def quote_string(text: str) -> str:
    """C-style escaped, double-quoted string as XLA prints attribute strings."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\r", "\\r")
    )
    return f'"{escaped}"'


@dataclass
class OpMetadata:
    """Source information attached to an instruction; fields keep their text order.

    Values are ``str`` (printed quoted) or ``int`` (printed bare), as in XLA.
    """

    fields: dict[str, str | int]

    def get(self, key: str, default: str | int | None = None) -> str | int | None:
        return self.fields.get(key, default)

    @property
    def op_name(self) -> str:
        value = self.fields.get("op_name", "")
        return str(value)

    def to_text(self, short: bool = False) -> str:
        """``{op_name="..." source_file="..." source_line=3}``; ``short`` keeps only the source
        file's name (not its folder: a notebook's is ``/tmp/ipykernel_1234/...``) and drops
        the fields other than ``op_name``, ``source_file`` and ``source_line``."""
        parts = []
        for key, value in self.fields.items():
            if short and key not in ("op_name", "source_file", "source_line"):
                continue
            if short and key == "source_file":
                value = str(value).replace("\\", "/").rsplit("/", 1)[-1]
            parts.append(f"{key}={quote_string(value) if isinstance(value, str) else value}")
        return "{" + " ".join(parts) + "}"

    def is_empty(self) -> bool:
        return not self.fields


def source_target_pairs(text: object) -> list[tuple[int, int]]:
    """``collective-permute``'s ``source_target_pairs={{0,1},{1,0}}`` (kept verbatim on the
    instruction, as XLA prints it) as ``[(0, 1), (1, 0)]``."""
    return [(int(s), int(t)) for s, t in re.findall(r"\{\s*(-?\d+)\s*,\s*(-?\d+)\s*\}", str(text))]
