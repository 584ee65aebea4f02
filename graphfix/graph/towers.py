"""Towers: the replicas of one model that multi-GPU training builds side by side.

The recipe (CIFAR-10 multi-GPU, slim `model_deploy`, tf_cnn_benchmarks) builds the same
sub-graph once per device, each in its own name scope: `tower_0/...`, `tower_1/...` (or
`clone_N`, `replica_N`, `gpu_N`, any `<base>_N`; TF names the first of a re-entered scope
`<base>` and the next ones `<base>_1`, `<base>_2`). A *tower set* is such a family of sibling
scopes that

- are replicas by name (the base is a tower word: tower, clone, replica, gpu) or by
  placement (each member asks for a different device),
- are parallel: no node of one member reads a node of another directly (what tells towers
  from a repeated layer, `conv3/conv3_1` -> `conv3/conv3_2`, which is a chain), and
- build the same sub-graph: at least half the node names, relative to their member's
  scope, are in both the first member and each other one.

The tower notion lives here once: `tower_of` (a name's tower number, from its scope alone)
and `find_towers` (the tower sets of a graph, checked against the graph). Transforms that
reason about towers (`update-ops`, `shared-variables`, `average-gradients`) read both.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Iterable, NamedTuple

if TYPE_CHECKING:
    from graphfix.graph.index import GraphIndex

_TOWER = re.compile(r"(?:^|/)(?:tower|clone|replica|gpu)_?(\d+)(?:/|$)", re.IGNORECASE)
_TOWER_WORDS = frozenset({"tower", "clone", "replica", "gpu"})
# The last component of a scope: `<base>_<N>` (TF's uniquifier, or the author's `%s_%d`).
# A numbered scope in a folder path: `<base>_<N>` or `<base><N>` as a whole component
# (TF's uniquifier, or the author's `%s_%d`).
_NUMBERED_SCOPE = re.compile(r"(?:(?<=/)|(?<=\n)|^)([^/\n]*?[^/\n\d_])_?(\d+)(?=/|\n|$)")
# Of each member's relative names, the share that must be in the first member's (and back).
_SAME_SUBGRAPH = 0.5


def tower_of(name: str) -> int | None:
    """The tower a node belongs to from its name alone (`tower_1/`, `clone_0/`, `gpu2/`),
    or None. Cheap, and blind to the graph: `find_towers` is what checks a family is one."""
    match = _TOWER.search(name)
    if match:
        return int(match.group(1))
    return None


class Tower(NamedTuple):
    """One replica: its number, its name scope (no trailing slash: `tower_1`, `model/gpu_1`)
    and the device most of its nodes ask for ("" when none)."""

    index: int
    scope: str
    device: str = ""


class TowerSet(NamedTuple):
    """Sibling scopes that build the same sub-graph in parallel (see the module docstring).

    `towers` are in tower order; `towers[0]` is the first tower, whose variables the
    optimizer's `apply_gradients` receives in the recipe (`grad_and_vars[0][1]`)."""

    parent: str  # the scope holding the members ("" at the top)
    base: str  # the members' common name (`tower`)
    towers: list[Tower]

    @property
    def first(self) -> Tower:
        return self.towers[0]

    def tower_holding(self, name: str) -> Tower | None:
        """The member whose scope holds the node `name`, or None."""
        for tower in self.towers:
            if name.startswith(tower.scope + "/"):
                return tower
        return None

    def relative(self, name: str) -> str | None:
        """`name` relative to its member's scope (`tower_1/conv/w` -> `conv/w`), or None."""
        tower = self.tower_holding(name)
        return None if tower is None else name[len(tower.scope) + 1:]

    def counterpart(self, name: str, tower: Tower) -> str | None:
        """The name the node `name` has in `tower` (None when `name` is in no member)."""
        relative = self.relative(name)
        return None if relative is None else f"{tower.scope}/{relative}"


def find_towers(index: "GraphIndex", names: Iterable[str] | None = None) -> list[TowerSet]:
    """The tower sets of the graph, in the order of their (parent, base).

    `names` narrows where candidate families are looked for (a transform that only cares
    about variables passes the variables' names: a graph whose variables lie in no numbered
    scope then costs one pass over those few names); each candidate is checked against the
    whole graph, all of them in one pass over its names."""
    if names is None:
        names = index.names
    candidates = _numbered_families(names)
    if not candidates:
        return []
    # A family not named as towers is one only if each member is on a device of its own:
    # more members than the graph has devices cannot be (a chain of 70k `dense_N` layers).
    devices = len(set(index.devices) - {""})
    families = sorted((key, members) for key, members in candidates.items()
                      if key[1].lower() in _TOWER_WORDS or len(members) <= devices)
    if not families:
        return []
    # member scope -> [(family, place of the member)]: a node's scopes are looked up as its
    # name is walked, one pass for every family at once, over the names whose first scope
    # can lead to a member.
    owner: dict[str, list[tuple[int, int]]] = {}
    heads = set()
    for f, ((parent, _), members) in enumerate(families):
        for k, number in enumerate(sorted(members)):
            owner.setdefault(members[number], []).append((f, k))
            heads.add(members[number].partition("/")[0])
    seen = [_Seen(len(members)) for _, members in families]
    all_devices = index.devices
    for position, name in enumerate(index.names):
        head, slash, _ = name.partition("/")
        if not slash or head not in heads:
            continue
        parts = name.split("/")
        scope = parts[0]
        for depth in range(1, len(parts)):
            found = owner.get(scope)
            if found is not None:
                rest = "/".join(parts[depth:])
                for f, k in found:
                    seen[f].add(k, position, rest, all_devices[position])
            scope = f"{scope}/{parts[depth]}"
    out = []
    for ((parent, base), members), facts in zip(families, seen):
        tower_set = _checked(index, parent, base, members, facts)
        if tower_set is not None:
            out.append(tower_set)
    return out


class _Seen:
    """What one pass saw of a family's members: each member's relative names and devices,
    and which member each node is in."""

    __slots__ = ("member_of", "relative", "devices")

    def __init__(self, size: int):
        self.member_of: dict[int, int] = {}
        self.relative: list[set[str]] = [set() for _ in range(size)]
        self.devices: list[Counter] = [Counter() for _ in range(size)]

    def add(self, k: int, position: int, rest: str, device: str) -> None:
        self.member_of[position] = k
        self.relative[k].add(rest)
        if device:
            self.devices[k][device] += 1


def _numbered_families(names: Iterable[str]) -> dict[tuple[str, str], dict[int, str]]:
    """(parent scope, base) -> {number: member scope} for the families of numbered sibling
    scopes (two or more members) among the scopes of `names`. One regular-expression scan
    of the names' folders finds every numbered scope (a million-node graph has hundreds of
    thousands: no loop per folder)."""
    unique = {name.rpartition("/")[0] for name in names} - {""}
    folders = "\n".join(unique)
    families: dict[tuple[str, str], dict[int, str]] = {}
    for match in _NUMBERED_SCOPE.finditer(folders):
        start = folders.rfind("\n", 0, match.start()) + 1
        parent = folders[start:match.start() - 1] if match.start() > start else ""
        base, number = match.group(1), int(match.group(2))
        scope = folders[start:match.end()]
        families.setdefault((parent, base), {}).setdefault(number, scope)
    out = {}
    # (a scope that holds nodes, or scopes that do: where a tower's first member shows)
    holding = unique | {folder.rpartition("/")[0] for folder in unique}
    for (parent, base), members in families.items():
        # TF's own numbering leaves the first member unnumbered: `tower`, `tower_1`, ...
        if 0 not in members:
            first = f"{parent}/{base}" if parent else base
            if first in holding:
                members[0] = first
        if len(members) >= 2:
            out[(parent, base)] = members
    return out


def _checked(index: "GraphIndex", parent: str, base: str, members: dict[int, str],
             seen: _Seen) -> TowerSet | None:
    """The family as a TowerSet if it is one (replicas, parallel, the same sub-graph)."""
    numbers = sorted(members)
    if sum(1 for names in seen.relative if names) < 2:
        return None
    placed = [d.most_common(1)[0][0] if d else "" for d in seen.devices]
    by_name = base.lower() in _TOWER_WORDS
    by_device = all(placed) and len(set(placed)) == len(placed)
    if not (by_name or by_device):
        return None
    if not _same_subgraph(_normalized(seen.relative, [members[n] for n in numbers], base)):
        return None
    if _chained(index, seen.member_of, from_first_too=not by_name):
        return None
    return TowerSet(parent, base, [Tower(n, members[n], placed[k])
                                   for k, n in enumerate(numbers) if seen.relative[k]])


def _normalized(relative: list[set[str]], scopes: list[str], base: str) -> list[set[str]]:
    """Relative names with every member's scope written `<tower>`: a tower's gradients name
    towers again (`tower_1/gradients/tower_1/...`, `.../gradients/tower_0/...` where tower
    0's regularizers feed every tower's loss)."""
    pattern = re.compile("(?:^|(?<=/))(?:" + "|".join(map(re.escape, scopes)) + ")/")
    return [{pattern.sub("<tower>/", name) if base in name else name for name in names}
            for names in relative]


def _same_subgraph(relative: list[set[str]]) -> bool:
    """Whether each member's relative names are mostly the first member's, and back."""
    first = relative[0]
    if not first:
        return False
    for other in relative[1:]:
        if not other:
            continue
        common = len(first & other)
        if common < _SAME_SUBGRAPH * len(other) or common < _SAME_SUBGRAPH * len(first):
            return False
    return True


def _chained(index: "GraphIndex", member_of: dict[int, int], from_first_too: bool) -> bool:
    """Whether a node of one member reads a node of another directly: a chain of layers,
    not towers. Reads from the first member are allowed where the family is named as
    towers (`from_first_too` False): what tower 0 builds once, such as the regularization
    losses made with the variables, every tower's total loss reads."""
    get = member_of.get
    for position, k in member_of.items():
        for source in index.sources(position):
            other = get(source)
            if other is not None and other != k and (other != 0 or from_first_too):
                return True
    return False
