"""Shardings: how an array is split across devices (XLA's ``HloSharding``), as a typed value.

An instruction's ``sharding={...}`` says which part of its value each device holds. The forms
XLA prints::

    {replicated}                        every device holds all of it
    {maximal device=3}                  device 3 holds all of it, the others nothing
    {manual}                            already per-device (inside shard_map)
    {devices=[2,4]0,1,2,3,4,5,6,7}      a 2x4 grid of tiles; tile (i, j) lives on the listed device
    {devices=[2,4]<=[8]}                the same list as an *iota*: devices 0..7 in order
    {devices=[4,2]<=[2,4]T(1,0)}        iota 0..7 reshaped to [2,4], transposed by (1,0), flattened
    {devices=[2,1,4]<=[8] last_tile_dim_replicate}
                                        2x1 tiles, each held by the 4 devices of the last dimension
    {devices=[2,2,2]<=[8] last_tile_dims={manual}}
                                        trailing dimensions that are not data: manual or replicated subgroups
    {{replicated}, {devices=[4]<=[4]}}  a tuple value: one sharding per leaf

The *tile assignment* is an array with one dimension per array dimension (plus trailing subgroup
dimensions); its element at tile index ``t`` is the device holding tile ``t``. Tile ``t`` of an
array ``[d0, d1, ...]`` split ``[n0, n1, ...]`` ways is the slice ``[t0*s0 : (t0+1)*s0, ...]`` with
``s_k = ceil(d_k / n_k)`` -- the last tile is shorter when ``n_k`` does not divide ``d_k``, and a
device's per-device buffer is padded to ``s_k`` (what the SPMD partitioner does).

:func:`parse_sharding` reads every form above (and keeps ``metadata={...}`` verbatim), and
:meth:`HloSharding.to_text` prints it back as it was written; :meth:`HloSharding.shard` and
:meth:`HloSharding.assemble` move between a global array and the devices' pieces.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

SUBGROUP_TYPES = ("manual", "replicated", "maximal")


class ShardingError(ValueError):
    """A sharding that does not parse, or does not fit its value."""


@dataclass(frozen=True)
class IotaTileAssignment:
    """``<=[reshape] T(perm)``: iota(prod(reshape)) reshaped, transposed by ``perm``, flattened."""

    reshape: tuple[int, ...]
    transpose: tuple[int, ...] = ()

    def devices(self) -> tuple[int, ...]:
        ids = np.arange(math.prod(self.reshape)).reshape(self.reshape)
        if self.transpose:
            ids = ids.transpose(self.transpose)
        return tuple(int(d) for d in ids.reshape(-1))

    def to_text(self) -> str:
        text = "<=[" + ",".join(str(d) for d in self.reshape) + "]"
        if self.transpose:
            text += "T(" + ",".join(str(p) for p in self.transpose) + ")"
        return text


@dataclass(frozen=True)
class HloSharding:
    """One sharding (``kind`` is replicated, maximal, manual, unknown, tiled or tuple)."""

    kind: str
    tile_dims: tuple[int, ...] = ()  # the tile assignment's dimensions (data dims, then subgroups)
    device_list: tuple[int, ...] = ()  # explicit list form
    iota: IotaTileAssignment | None = None  # iota form
    last_tile_dim_replicate: bool = False
    last_tile_dims: tuple[str, ...] = ()  # subgroup types of the trailing dimensions
    device: int = -1  # maximal
    elements: tuple[HloSharding, ...] = ()  # tuple
    metadata: str = field(default="", compare=False)  # verbatim "metadata={...}"

    # ---- building --------------------------------------------------------------------
    @staticmethod
    def replicate() -> HloSharding:
        return HloSharding("replicated")

    @staticmethod
    def tiled(tile_dims: tuple[int, ...], devices: tuple[int, ...] | None = None,
              replicate_last: bool = False) -> HloSharding:
        """Tiles ``tile_dims`` holding ``devices`` in row-major tile order (iota 0..n-1 if None)."""
        if devices is None:
            return HloSharding("tiled", tuple(tile_dims), iota=IotaTileAssignment((math.prod(tile_dims),)),
                               last_tile_dim_replicate=replicate_last)
        return HloSharding("tiled", tuple(tile_dims), device_list=tuple(devices),
                           last_tile_dim_replicate=replicate_last)

    # ---- reading ---------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.kind == "tuple"

    @property
    def is_replicated(self) -> bool:
        return self.kind == "replicated" or (self.kind == "tiled" and math.prod(self.data_tile_dims) == 1)

    def devices(self) -> tuple[int, ...]:
        """The tile assignment, flattened (row-major over ``tile_dims``)."""
        return self.iota.devices() if self.iota is not None else self.device_list

    def tile_assignment(self) -> np.ndarray:
        return np.array(self.devices(), dtype=np.int64).reshape(self.tile_dims)

    @property
    def subgroup_dims(self) -> int:
        return 1 if self.last_tile_dim_replicate else len(self.last_tile_dims)

    @property
    def data_rank(self) -> int:
        """How many of the tile dimensions split the array's dimensions."""
        return len(self.tile_dims) - self.subgroup_dims

    @property
    def data_tile_dims(self) -> tuple[int, ...]:
        return self.tile_dims[: self.data_rank]

    def tile_shape(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """The per-device shape of an array of ``dims`` (ceil division: the last tile is padded)."""
        if self.kind != "tiled":
            return tuple(dims)
        return tuple(-(-d // n) for d, n in zip(dims, self.data_tile_dims, strict=True))

    def tile_index(self, device: int) -> tuple[int, ...] | None:
        """The data-tile coordinates device ``device`` holds (None if it holds no tile)."""
        where = np.argwhere(self.tile_assignment() == device)
        if len(where) == 0:
            return None
        return tuple(int(i) for i in where[0][: self.data_rank])

    def index(self, dims: tuple[int, ...], device: int) -> tuple[slice, ...]:
        """The part of a global array of ``dims`` that device ``device`` holds, as slices (JAX's
        ``Shard.index``): everything when replicated, its tile when split (the last tile short
        when the split is uneven)."""
        if self.kind != "tiled":
            return tuple(slice(0, d) for d in dims)
        self.check_fits(tuple(dims))
        where = self.tile_index(device)
        if where is None:
            raise ShardingError(f"device {device} holds no tile of {self.to_text()}")
        tile = self.tile_shape(tuple(dims))
        return tuple(slice(min(i * t, d), min((i + 1) * t, d)) for i, t, d in zip(where, tile, dims, strict=True))

    # ---- moving data -----------------------------------------------------------------
    def shard(self, array: np.ndarray, device: int) -> np.ndarray:
        """Device ``device``'s piece of the global ``array`` (zero-padded to the tile shape)."""
        if self.kind in ("replicated", "manual", "unknown"):
            return np.array(array, copy=True)
        if self.kind == "maximal":
            return np.array(array, copy=True) if device == self.device else np.zeros_like(array)
        if self.kind != "tiled":
            raise ShardingError(f"cannot take a shard of an array with a {self.kind} sharding")
        self.check_fits(array.shape)
        index = self.tile_index(device)
        if index is None:
            raise ShardingError(f"device {device} holds no tile of {self.to_text()}")
        tile = self.tile_shape(array.shape)
        piece = np.zeros(tile, dtype=array.dtype)
        spans = tuple(slice(t * s, min((t + 1) * s, d)) for t, s, d in zip(index, tile, array.shape, strict=True))
        part = array[spans]
        piece[tuple(slice(0, n) for n in part.shape)] = part
        return piece

    def assemble(self, pieces: dict[int, np.ndarray], dims: tuple[int, ...] | None = None) -> np.ndarray:
        """The global array from each device's piece (``dims``: the global shape; by default the
        tile shape times the tile counts)."""
        if self.kind in ("replicated", "manual", "unknown"):
            return pieces[min(pieces)]
        if self.kind == "maximal":
            return pieces[self.device]
        if self.kind != "tiled":
            raise ShardingError(f"cannot assemble a value with a {self.kind} sharding")
        tile = next(iter(pieces.values())).shape
        full = tuple(t * n for t, n in zip(tile, self.data_tile_dims, strict=True))
        dims = tuple(dims) if dims is not None else full
        out = np.zeros(dims, dtype=next(iter(pieces.values())).dtype)
        assignment = self.tile_assignment()
        for index in np.ndindex(*self.data_tile_dims):
            device = int(assignment[index].reshape(-1)[0])  # the first replica of this tile
            spans = tuple(slice(i * t, min((i + 1) * t, d)) for i, t, d in zip(index, tile, dims, strict=True))
            piece = pieces[device]
            out[spans] = piece[tuple(slice(0, s.stop - s.start) for s in spans)]
        return out

    def check_fits(self, dims: tuple[int, ...]) -> None:
        if self.kind == "tiled" and self.data_rank != len(dims):
            raise ShardingError(f"sharding {self.to_text()} splits {self.data_rank} dimensions, "
                                f"but the value has {len(dims)}")

    # ---- text ------------------------------------------------------------------------
    def to_text(self) -> str:
        return "{" + self._body() + "}"

    def _body(self) -> str:
        if self.kind == "tuple":
            return ", ".join(e.to_text() for e in self.elements)
        if self.kind == "maximal":
            parts = [f"maximal device={self.device}"]
        elif self.kind == "tiled":
            head = "devices=[" + ",".join(str(d) for d in self.tile_dims) + "]"
            head += self.iota.to_text() if self.iota is not None else ",".join(str(d) for d in self.device_list)
            parts = [head]
            if self.last_tile_dim_replicate:
                parts.append("last_tile_dim_replicate")
            if self.last_tile_dims:
                parts.append("last_tile_dims={" + ", ".join(self.last_tile_dims) + "}")
        else:
            parts = [self.kind]
        if self.metadata:
            parts.append(self.metadata)
        return " ".join(parts)

    def __str__(self) -> str:
        return self.to_text()


def sharding_from_mesh_axes(device_grid: np.ndarray, axis_names: tuple[str, ...],
                            dims_axes: list[tuple[str, ...]]) -> HloSharding:
    """The sharding of a value whose dimension ``k`` is split over the mesh axes ``dims_axes[k]``
    (a mesh: ``device_grid``, an array of device ids with one named dimension per axis). The tiles
    take the devices in mesh order; the axes that split nothing replicate (a last dimension)."""
    used = [name for names in dims_axes for name in names]
    if len(set(used)) != len(used):
        raise ShardingError(f"a mesh axis splits two dimensions: {dims_axes}")
    unknown = [n for n in used if n not in axis_names]
    if unknown:
        raise ShardingError(f"{unknown} are not axes of the mesh {list(axis_names)}")
    unused = [name for name in axis_names if name not in used]
    sizes = dict(zip(axis_names, device_grid.shape, strict=True))
    tiles = [math.prod(sizes[n] for n in names) for names in dims_axes]
    replicas = math.prod(sizes[n] for n in unused)
    if math.prod(tiles) == 1:
        return HloSharding.replicate()
    grid = device_grid.transpose([axis_names.index(n) for n in used + unused]).reshape(-1)
    dims = tuple(tiles) + ((replicas,) if replicas > 1 else ())
    return HloSharding.tiled(dims, tuple(int(d) for d in grid), replicate_last=replicas > 1)


def parse_sdy_mesh(text: str) -> tuple[np.ndarray, tuple[str, ...]] | None:
    """Shardy's ``#sdy.mesh<["x"=2, "y"=2]>`` (as JAX writes it into the module's frontend
    attributes) as (device grid, axis names); devices in order unless a ``device_ids=[...]``
    follows the axes. None if there is none."""
    match = re.search(r'#sdy\.mesh<\[(.*?)\](?:\s*,\s*device_ids=\[([\d,\s]*)\])?', text)
    if match is None:
        return None
    axes = re.findall(r'"([^"]+)"\s*=\s*(\d+)', match.group(1))
    names = tuple(name for name, _ in axes)
    sizes = [int(size) for _, size in axes]
    ids = [int(i) for i in match.group(2).split(",")] if match.group(2) else list(range(math.prod(sizes)))
    return np.array(ids).reshape(sizes), names


def parse_sdy_shardings(text: str, mesh: tuple[np.ndarray, tuple[str, ...]]) -> list[HloSharding]:
    """Shardy's ``#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, ...]>``: one sharding per value,
    each a list of dimensions with the mesh axes that split them."""
    shardings = []
    for value in re.findall(r'<@\w+,\s*\[(.*?)\]>', text):
        dims = [tuple(re.findall(r'"([^"]+)"', d)) for d in re.findall(r'\{([^}]*)\}', value)]
        shardings.append(sharding_from_mesh_axes(mesh[0], mesh[1], dims))
    return shardings


def parse_sharding(text: str) -> HloSharding:
    """Read a sharding as XLA prints it (module docstring); :class:`ShardingError` says what is wrong."""
    parser = _Parser(text)
    sharding = parser.sharding()
    parser.skip_space()
    if parser.pos != len(text):
        raise ShardingError(f"unexpected text after the sharding at column {parser.pos + 1}: {text[parser.pos:]!r}")
    return sharding


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def fail(self, what: str) -> ShardingError:
        return ShardingError(f"bad sharding {self.text!r}: expected {what} at column {self.pos + 1}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
            self.pos += 1

    def eat(self, token: str) -> bool:
        self.skip_space()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise self.fail(f"'{token}'")

    def word(self) -> str:
        self.skip_space()
        match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if not match:
            raise self.fail("a word")
        self.pos = match.end()
        return match.group(0)

    def integers(self, close: str) -> tuple[int, ...]:
        values = []
        while True:
            self.skip_space()
            match = re.compile(r"-?\d+").match(self.text, self.pos)
            if not match:
                break
            values.append(int(match.group(0)))
            self.pos = match.end()
            if not self.eat(","):
                break
        self.expect(close)
        return tuple(values)

    def balanced(self) -> str:
        """A ``{...}`` group, verbatim (metadata)."""
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == '"':
                end = self.text.find('"', self.pos + 1)
                while end > 0 and self.text[end - 1] == "\\":
                    end = self.text.find('"', end + 1)
                if end < 0:
                    raise self.fail("a closing quote")
                self.pos = end
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return self.text[start:self.pos]
            self.pos += 1
        raise self.fail("a closing '}'")

    def sharding(self) -> HloSharding:
        self.expect("{")
        self.skip_space()
        if self.text.startswith("{", self.pos) or self.text.startswith("}", self.pos):  # a tuple
            elements = []
            while not self.eat("}"):
                elements.append(self.sharding())
                self.eat(",")
            return HloSharding("tuple", elements=tuple(elements))
        head = self.word()
        fields: dict[str, object] = {}
        if head in ("replicated", "manual", "unknown"):
            kind = head
        elif head == "maximal":
            kind = "maximal"
            self.expect("device")
            self.expect("=")
            fields["device"] = self._one_int()
        elif head == "devices":
            kind = "tiled"
            self.expect("=")
            self.expect("[")
            dims = self.integers("]")
            fields["tile_dims"] = dims
            if self.eat("<="):
                self.expect("[")
                reshape = self.integers("]")
                transpose: tuple[int, ...] = ()
                if self.eat("T("):
                    transpose = self.integers(")")
                if math.prod(reshape) != math.prod(dims):
                    raise ShardingError(f"bad sharding {self.text!r}: iota [{','.join(map(str, reshape))}] has "
                                        f"{math.prod(reshape)} devices, the tiles {list(dims)} need {math.prod(dims)}")
                if transpose and sorted(transpose) != list(range(len(reshape))):
                    raise ShardingError(f"bad sharding {self.text!r}: T{transpose} is not a permutation")
                fields["iota"] = IotaTileAssignment(reshape, transpose)
            else:
                devices = []
                while True:
                    self.skip_space()
                    match = re.compile(r"\d+").match(self.text, self.pos)
                    if not match:
                        break
                    devices.append(int(match.group(0)))
                    self.pos = match.end()
                    if not self.eat(","):
                        break
                if len(devices) != math.prod(dims):
                    raise ShardingError(f"bad sharding {self.text!r}: {len(devices)} devices listed for "
                                        f"{math.prod(dims)} tiles {list(dims)}")
                if len(set(devices)) != len(devices):
                    raise ShardingError(f"bad sharding {self.text!r}: a device is listed twice")
                fields["device_list"] = tuple(devices)
        else:
            self.pos -= len(head)
            raise self.fail("replicated, maximal, manual, unknown or devices=")
        metadata = ""
        while not self.eat("}"):
            option = self.word()
            if option == "last_tile_dim_replicate":
                fields["last_tile_dim_replicate"] = True
            elif option == "last_tile_dims":
                self.expect("=")
                self.expect("{")
                types = []
                while not self.eat("}"):
                    t = self.word()
                    if t not in SUBGROUP_TYPES:
                        raise self.fail(f"a subgroup type ({', '.join(SUBGROUP_TYPES)})")
                    types.append(t)
                    self.eat(",")
                fields["last_tile_dims"] = tuple(types)
            elif option == "metadata":
                self.expect("=")
                self.skip_space()
                metadata = "metadata=" + self.balanced()
            else:
                self.pos -= len(option)
                raise self.fail("last_tile_dim_replicate, last_tile_dims= or metadata=")
        sharding = HloSharding(kind, metadata=metadata, **fields)  # type: ignore[arg-type]
        if sharding.kind == "tiled" and sharding.data_rank < 0:
            raise ShardingError(f"bad sharding {self.text!r}: more subgroup dimensions than tile dimensions")
        return sharding

    def _one_int(self) -> int:
        self.skip_space()
        match = re.compile(r"-?\d+").match(self.text, self.pos)
        if not match:
            raise self.fail("a device number")
        self.pos = match.end()
        return int(match.group(0))
