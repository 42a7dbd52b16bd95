"""Independent NumPy oracles for the HLO opcode corpus (``tests/corpus/*.hlo``).

Every corpus module has an :class:`~tests.hlo.corpus_oracles.common.Oracle` here: a function
making deterministic inputs and a function computing, **with NumPy only** (never the
interpreter), the value of every element of the ENTRY's ROOT tuple, keyed by the operand's
instruction name. ``tests/hlo/test_corpus.py`` runs each module on the reference interpreter
and compares. One module per theme, mirroring the corpus files.
"""

from __future__ import annotations

from tests.hlo.corpus_oracles import (
    contractions,
    control,
    conversions,
    data_movement,
    elementwise,
    indexing,
    integer,
    reductions,
    special,
    tuple_constants,
)
from tests.hlo.corpus_oracles.common import Oracle

ORACLES: dict[str, Oracle] = {}
for _theme in (contractions, control, conversions, data_movement, elementwise, indexing, integer, reductions,
               special, tuple_constants):
    ORACLES.update(_theme.ORACLES)

__all__ = ["ORACLES", "Oracle"]
