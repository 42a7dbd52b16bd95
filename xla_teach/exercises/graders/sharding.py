"""Hidden checks of the ``sharding`` exercise: where each device's piece of an array lies, and which
collective moves a value from one sharding to another.

The student's functions run in the student's process on shardings the grader writes as HLO text
(parsed there). Each device's slices are checked here against xla_teach's own ``HloSharding.shard``
(the piece a device holds of an ``arange`` array, which the slices must cut out exactly); each
resharding case is built to need one known collective (by construction: the oracle).
"""

from __future__ import annotations

import random
from functools import partial

import numpy as np

from xla_teach.exercises.exercise import Exercise
from xla_teach.exercises.grading import CaseFailed, Check
from xla_teach.exercises.sandbox import StudentProcess
from xla_teach.hlo.sharding import parse_sharding

ENTRY_POINTS = ("device_slices", "reshard")
COLLECTIVES = ("none", "all-gather", "dynamic-slice", "collective-permute", "all-to-all")


def _slices_case(dims: tuple[int, ...], text: str, devices: int, solution: StudentProcess) -> None:
    result = solution.call("device_slices", entry=ENTRY_POINTS[0], dims=list(dims), sharding=text, devices=devices)
    got = result.get("slices") if isinstance(result, dict) else None
    where = f"an array of sizes {list(dims)} with sharding={text} on {devices} devices"
    if not isinstance(got, dict) or sorted(got) != [str(d) for d in sorted(range(devices), key=str)]:
        raise CaseFailed(f"{where}: expected an entry for every device 0..{devices - 1}, got "
                         f"{sorted(got) if isinstance(got, dict) else got!r}")
    sharding = parse_sharding(text)
    array = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    for device in range(devices):
        spans = got[str(device)]
        if not (isinstance(spans, list) and len(spans) == len(dims)
                and all(isinstance(s, list) and len(s) == 2 and all(isinstance(v, int) for v in s) for s in spans)):
            raise CaseFailed(f"{where}: device {device}'s slices should be {len(dims)} (start, limit) pairs, "
                             f"got {spans!r:.120}")
        piece = sharding.shard(array, device)  # the oracle: what the device holds, zero-padded to the tile
        want = [(0, n) for n in dims] if sharding.kind != "tiled" else None
        if want is None:
            tile = sharding.tile_shape(dims)
            index = sharding.tile_index(device)
            want = [(min(i * t, n), min((i + 1) * t, n)) for i, t, n in zip(index, tile, dims, strict=True)]
        cut = array[tuple(slice(a, b) for a, b in spans)] if all(0 <= a <= b <= n for (a, b), n in
                                                                   zip(spans, dims, strict=True)) else None
        held = piece[tuple(slice(0, b - a) for a, b in want)]
        if cut is None or cut.shape != held.shape or not np.array_equal(cut, held):
            raise CaseFailed(f"{where}: device {device} holds {[list(w) for w in want]}, you said {spans}")


def _reshard_case(dims: tuple[int, ...], src: str, dst: str, devices: int, want: str, solution: StudentProcess) -> None:
    result = solution.call("reshard", entry=ENTRY_POINTS[1], dims=list(dims), src=src, dst=dst, devices=devices)
    got = result.get("collective") if isinstance(result, dict) else None
    if got != want:
        raise CaseFailed(f"from sharding={src} to sharding={dst} (sizes {list(dims)}, {devices} devices): "
                         f"the partitioner needs {want!r}, you said {got!r} (one of {', '.join(COLLECTIVES)})")


def _dims(rng: random.Random, rank: int, even: int | None) -> tuple[int, ...]:
    """Sizes that ``even`` divides (None: any sizes, so that the last tile may be short or empty)."""
    return tuple(even * rng.randint(1, 3) if even else rng.randint(3, 9) for _ in range(rank))


def slice_cases(seed: int) -> dict[str, list[tuple[tuple[int, ...], str, int]]]:
    rng = random.Random(seed)
    two = ["{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", "{devices=[2,2]<=[4]}"]
    return {
        "replicated-and-even-tiles": [(_dims(rng, 2, 4), "{replicated}", 4)] +
                                     [(_dims(rng, 2, 4), t, 4) for t in two],
        "device-order": [(_dims(rng, 2, 4), "{devices=[2,2]<=[2,2]T(1,0)}", 4),
                         (_dims(rng, 2, 4), "{devices=[4,1]" + ",".join(map(str, rng.sample(range(4), 4))) + "}", 4),
                         (_dims(rng, 3, 2), "{devices=[2,2,2]<=[2,2,2]T(2,0,1)}", 8)],
        "copies": [(_dims(rng, 2, 2), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4),
                   (_dims(rng, 2, 2), "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 4),
                   (_dims(rng, 2, 1), "{devices=[1,1,4]<=[4] last_tile_dim_replicate}", 4)],
        "uneven-sizes": [((5, rng.randint(2, 6)), "{devices=[4,1]<=[4]}", 4),
                         ((rng.randint(2, 6), 7), "{devices=[1,4]<=[4]}", 4),
                         (_dims(rng, 2, None), "{devices=[2,2]<=[4]}", 4)],
    }


def reshard_cases(seed: int) -> list[tuple[tuple[int, ...], str, str, int, str]]:
    rng = random.Random(seed)
    dims = (4 * rng.randint(1, 3), 4 * rng.randint(1, 3))
    rows, cols = "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"
    shuffled = "{devices=[4,1]" + ",".join(map(str, [3, 2, 1, 0])) + "}"
    return [
        (dims, rows, rows, 4, "none"),
        (dims, "{replicated}", "{devices=[1,1,4]<=[4] last_tile_dim_replicate}", 4, "none"),
        (dims, rows, "{replicated}", 4, "all-gather"),
        (dims, "{devices=[2,2]<=[4]}", "{replicated}", 4, "all-gather"),
        (dims, "{replicated}", cols, 4, "dynamic-slice"),
        (dims, "{replicated}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4, "dynamic-slice"),
        (dims, rows, shuffled, 4, "collective-permute"),
        (dims, "{devices=[2,2]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0)}", 4, "collective-permute"),
        (dims, rows, cols, 4, "all-to-all"),
        (dims, cols, rows, 4, "all-to-all"),
    ]


def make_checks(seed: int = 0) -> list[Check]:
    base = 1000 * seed
    checks = [Check(name, description, [partial(_slices_case, *case) for case in cases])
              for (name, cases), description in zip(slice_cases(base).items(), (
                  "the whole array on every device, and even tiles of rows, columns or both",
                  "tiles on devices in another order: an explicit list, a transposed iota",
                  "copies of each tile (last_tile_dim_replicate): two or four devices hold the same piece",
                  "sizes the tiles do not divide: the last tile is short, or empty"), strict=True)]
    cases = reshard_cases(base)
    random.Random(base).shuffle(cases)
    checks.append(Check("reshard", "the collective that moves a value from one sharding to another",
                        [partial(_reshard_case, *case) for case in cases]))
    return checks


EXERCISE = Exercise(
    name="sharding",
    title="Shardings: each device's piece, and the collective that moves it",
    teaches="What an HLO sharding says: tiles, the order of devices (explicit lists and iota forms), copies "
            "(last_tile_dim_replicate), short last tiles; and which collective (all-gather, dynamic-slice, "
            "collective-permute, all-to-all) the SPMD partitioner needs to change a value's sharding.",
    entry_points=[(name, "function") for name in ENTRY_POINTS],
    make_checks=make_checks,
)
