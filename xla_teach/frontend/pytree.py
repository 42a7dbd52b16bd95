"""Pytrees: nested containers of arrays, flattened to a list of leaves and back.

``jit``, ``grad`` and the control-flow functions take and return *pytrees*:
tuples, lists, dicts (flattened in sorted-key order, as JAX does), namedtuples,
``None`` (a tree with no leaves) and classes registered here. Everything else is
a leaf. ``tree_flatten`` returns the leaves and a :class:`PyTreeDef` that
remembers the structure, so ``tree_unflatten(treedef, leaves)`` rebuilds it.

Register your own containers with :func:`register_pytree_node` or, for
dataclasses, :func:`register_dataclass` (also usable as a decorator)::

    @register_dataclass
    @dataclasses.dataclass
    class Params:
        w: np.ndarray
        b: np.ndarray
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

# type -> (flatten: obj -> (children, aux), unflatten: (aux, children) -> obj)
_REGISTRY: dict[type, tuple[Callable[[Any], tuple[Sequence[Any], Hashable]],
                            Callable[[Hashable, Sequence[Any]], Any]]] = {}


@dataclasses.dataclass(frozen=True)
class PyTreeDef:
    """The structure of a pytree: a node kind, its static data and its children's structures.

    ``kind`` is ``"leaf"``, ``"none"``, ``"tuple"``, ``"list"``, ``"dict"``,
    ``"namedtuple"`` or ``"custom"``; ``data`` is the dict keys, the namedtuple class,
    or ``(cls, aux)`` for registered classes.
    """

    kind: str
    data: Hashable = None
    children: tuple[PyTreeDef, ...] = ()

    def leaf_path(self, index: int) -> str:
        """Where leaf ``index`` sits, as Python would reach it: ``['w1']``, ``[0].b``, ``""`` for a
        leaf itself (JAX's ``keystr`` of the leaf's key path)."""
        if self.kind == "leaf":
            return ""
        for position, child in enumerate(self.children):
            count = child.num_leaves
            if index < count:
                if self.kind == "dict":
                    step = f"[{list(self.data)[position]!r}]"  # type: ignore[call-overload]
                elif self.kind == "namedtuple":
                    step = f".{self.data._fields[position]}"  # type: ignore[union-attr]
                else:
                    step = f"[{position}]"
                return step + child.leaf_path(index)
            index -= count
        raise IndexError(f"leaf {index} is past the end of {self}")

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(str(c) for c in self.children)
        if self.kind == "tuple":
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.data, self.children, strict=True)) + "}"
        cls = self.data if self.kind == "namedtuple" else self.data[0]  # type: ignore[index]
        return f"{cls.__name__}({inner})"


LEAF = PyTreeDef("leaf")


def register_pytree_node(cls: type, flatten: Callable[[Any], tuple[Sequence[Any], Hashable]],
                         unflatten: Callable[[Hashable, Sequence[Any]], Any]) -> None:
    """Make ``cls`` a pytree node: ``flatten(obj) -> (children, aux)`` where ``aux`` is
    hashable static data, and ``unflatten(aux, children) -> obj``."""
    if cls in _REGISTRY:
        raise ValueError(f"{cls.__name__} is already registered as a pytree node")
    _REGISTRY[cls] = (flatten, unflatten)


def register_dataclass(cls: type | None = None, *, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] = ()) -> Any:
    """Register a dataclass: ``data_fields`` (default: all fields not in ``meta_fields``)
    are children; ``meta_fields`` are static (hashable) data, part of the jit cache key."""

    def register(klass: type) -> type:
        if not dataclasses.is_dataclass(klass):
            raise ValueError(f"register_dataclass needs a dataclass, got {klass.__name__}")
        names = [f.name for f in dataclasses.fields(klass)]
        data = list(data_fields) if data_fields is not None else [n for n in names if n not in meta_fields]
        meta = list(meta_fields)

        def flatten(obj: Any) -> tuple[list[Any], Hashable]:
            return [getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)

        def unflatten(aux: Hashable, children: Sequence[Any]) -> Any:
            kwargs = dict(zip(data, children, strict=True))
            kwargs.update(zip(meta, aux, strict=True))  # type: ignore[arg-type]
            return klass(**kwargs)

        register_pytree_node(klass, flatten, unflatten)
        return klass

    return register(cls) if cls is not None else register


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(tree: Any) -> tuple[list[Any], PyTreeDef]:
    """``(leaves, treedef)``: leaves in a fixed depth-first order."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list[Any]) -> PyTreeDef:
    if tree is None:
        return PyTreeDef("none")
    kind = type(tree)
    if kind in _REGISTRY:
        children, aux = _REGISTRY[kind][0](tree)
        return PyTreeDef("custom", (kind, aux), tuple(_flatten(c, leaves) for c in children))
    if _is_namedtuple(tree):
        return PyTreeDef("namedtuple", kind, tuple(_flatten(c, leaves) for c in tree))
    if isinstance(tree, tuple):
        return PyTreeDef("tuple", None, tuple(_flatten(c, leaves) for c in tree))
    if isinstance(tree, list):
        return PyTreeDef("list", None, tuple(_flatten(c, leaves) for c in tree))
    if isinstance(tree, dict):
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise ValueError(f"pytree dict keys must be sortable, got {list(tree)!r}") from None
        return PyTreeDef("dict", keys, tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return LEAF


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild the tree described by ``treedef`` from ``leaves``."""
    it = iter(leaves)
    tree = _unflatten(treedef, it)
    if next(it, _SENTINEL) is not _SENTINEL:
        raise ValueError(f"too many leaves for tree structure {treedef}")
    return tree


_SENTINEL = object()


def _unflatten(treedef: PyTreeDef, it: Any) -> Any:
    if treedef.kind == "leaf":
        leaf = next(it, _SENTINEL)
        if leaf is _SENTINEL:
            raise ValueError("too few leaves for the tree structure")
        return leaf
    if treedef.kind == "none":
        return None
    children = [_unflatten(c, it) for c in treedef.children]
    if treedef.kind == "tuple":
        return tuple(children)
    if treedef.kind == "list":
        return children
    if treedef.kind == "dict":
        return dict(zip(treedef.data, children, strict=True))  # type: ignore[arg-type]
    if treedef.kind == "namedtuple":
        return treedef.data(*children)  # type: ignore[misc, operator]
    cls, aux = treedef.data  # type: ignore[misc]
    return _REGISTRY[cls][1](aux, children)


def tree_leaves(tree: Any) -> list[Any]:
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> PyTreeDef:
    return tree_flatten(tree)[1]


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf by leaf; ``rest`` must have the same structure as ``tree``."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for other in rest:
        other_leaves, other_def = tree_flatten(other)
        if other_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} vs {other_def}")
        others.append(other_leaves)
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others, strict=True)])
