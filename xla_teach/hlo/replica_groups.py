"""``replica_groups``: which devices a collective combines, in each of the forms XLA prints.

A collective (``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all``) works within
groups of devices: every group computes its own result. XLA prints the groups three ways:

* a **list**: ``{{0,1},{2,3}}`` -- device ids, group by group (``{}``: one group of all devices);
* an **iota** form: ``[2,2]<=[4]`` -- the ids 0..3 (``<=[4]``) laid out as a 2x2 array, one group
  per row; ``[2,2]<=[2,2]T(1,0)`` first arranges the ids as ``[2,2]``, transposes them (1,0), then
  reshapes to the groups' ``[2,2]``: groups ``{0,2}`` and ``{1,3}``;
* a **mesh** form, as current XLA writes after Shardy: ``mesh['x'=2,'y'=2] {'y'}`` -- the devices
  laid out as a mesh with named axes (row-major), and each group the devices that differ only
  along the listed axes: ``{'y'}`` gives ``{0,1}`` and ``{2,3}``, ``{'x'}`` gives ``{0,2}`` and
  ``{1,3}``.

:func:`expand_replica_groups` turns any of them into explicit lists of device ids.
"""

from __future__ import annotations

import re

import numpy as np

_LIST = re.compile(r"\{(\{(\d+(,\d+)*)?\}(,\{(\d+(,\d+)*)?\})*)?\}")
_IOTA = re.compile(r"\[(\d+(?:,\d+)*)\]<=\[(\d+(?:,\d+)*)\](?:T\((\d+(?:,\d+)*)\))?")
_MESH = re.compile(r"mesh\[('[^']+'=\d+(?:,'[^']+'=\d+)*)\]\{('[^']+'(?:,'[^']+')*)?\}")


def replica_groups_syntax_ok(text: str) -> bool:
    """Does ``text`` read as replica groups in one of XLA's forms?"""
    compact = text.replace(" ", "")
    return any(p.fullmatch(compact) for p in (_LIST, _IOTA, _MESH))


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",")] if text else []


def expand_replica_groups(text: str, num_devices: int) -> list[list[int]]:
    """The groups of ``text`` as lists of device ids; ``{}`` means one group of all
    ``num_devices``. Raises ValueError for text in none of the forms, or groups that do not
    cover the devices 0..n-1 exactly once."""
    compact = text.replace(" ", "")
    if _LIST.fullmatch(compact):
        inner = compact[1:-1]
        groups = [_ints(g) for g in re.findall(r"\{([\d,]*)\}", inner)]
        groups = groups or [list(range(num_devices))]
    elif (m := _IOTA.fullmatch(compact)) is not None:
        shape, reshape = _ints(m.group(1)), _ints(m.group(2))
        ids = np.arange(int(np.prod(reshape))).reshape(reshape)
        if m.group(3):
            ids = ids.transpose(_ints(m.group(3)))
        groups = ids.reshape(shape).tolist() if len(shape) == 2 else [ids.reshape(-1).tolist()]
    elif (m := _MESH.fullmatch(compact)) is not None:
        axes = [(name.strip("'"), int(size)) for name, size in (a.split("=") for a in m.group(1).split(","))]
        names = [name for name, _ in axes]
        chosen = [a.strip("'") for a in m.group(2).split(",")] if m.group(2) else []
        unknown = [a for a in chosen if a not in names]
        if unknown:
            raise ValueError(f"replica_groups={text}: {', '.join(unknown)} is not an axis of the mesh")
        ids = np.arange(int(np.prod([s for _, s in axes]))).reshape([s for _, s in axes])
        kept = [i for i, n in enumerate(names) if n not in chosen]
        varied = [names.index(a) for a in chosen]
        grouped = ids.transpose(kept + varied)
        group_size = int(np.prod([axes[i][1] for i in varied])) if varied else 1
        groups = grouped.reshape(-1, group_size).tolist()
    else:
        raise ValueError(f"replica_groups={text} is in none of XLA's forms ({{{{0,1}},{{2,3}}}}, [2,2]<=[4], "
                         "mesh['x'=2,'y'=2] {'y'})")
    members = sorted(d for g in groups for d in g)
    if members != list(range(len(members))) or (num_devices and len(members) != num_devices):
        raise ValueError(f"replica_groups={text} does not cover devices 0..{num_devices - 1} once each: {groups}")
    return groups


def replica_groups_text(groups: list[list[int]]) -> str:
    """Groups as XLA's list form: ``{{0,2},{1,3}}``."""
    return "{" + ",".join("{" + ",".join(str(d) for d in g) + "}" for g in groups) + "}"
