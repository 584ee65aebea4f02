"""Op-type patterns: a shape of the graph said as data, matched against a node and its inputs.

In the spirit of TF's graph_transforms `OpTypePattern`: a pattern names the op (or ops) of a
node and, in order, patterns for its data inputs; `GraphIndex.match` answers whether a node
has that shape and binds the nodes it met to the names the pattern gave them::

    average = Op("Mean", Op("ConcatV2", name="stacked"), Op("Const", where=is_zero),
                 where=lambda node: not node.attr["keep_dims"].b)
    found = graph.match(average, "tower_average")
    if found is not None:
        stacked = found["stacked"].node

A pattern may look through ops that only pass a tensor on (`through=("Identity",
"Reshape")`: from the tensor it is given, the first data input of each such node is followed
before the pattern's own op is asked), and may ask which output of its node is read
(`output=1`). What a match met can be asked whether anything outside it reads it
(`Match.read_elsewhere`), the question an edit that replaces the matched nodes must ask
before it drops them.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

ANY = "*"


class Op:
    """A node's shape: its op (`ops`: one name, several joined by `|` as TF writes them, or
    `*` for any op), its data inputs (`inputs`, in order, each a pattern; none given: any
    inputs; a trailing `...`: more inputs may follow those given), and optionally the name
    the match binds it to (`name`), the ops looked through to reach it (`through`), which
    output of it the reader reads (`output`) and a test of its NodeDef (`where`)."""

    __slots__ = ("ops", "inputs", "more", "name", "through", "output", "where")

    def __init__(self, ops: str | Iterable[str] = ANY, *inputs, name: str | None = None,
                 through: Iterable[str] = (), output: int | None = None,
                 where: Callable[[object], bool] | None = None):
        if isinstance(ops, str):
            ops = ops.split("|")
        self.ops = None if ANY in ops else frozenset(ops)
        self.more = bool(inputs) and inputs[-1] is Ellipsis
        self.inputs: tuple[Op, ...] = inputs[:-1] if self.more else inputs
        if not all(isinstance(p, Op) for p in self.inputs):
            raise TypeError("a pattern's inputs are patterns (Op), with an optional "
                            "trailing ...")
        self.name = name
        self.through = frozenset(through)
        self.output = output
        self.where = where

    def __repr__(self) -> str:
        ops = ANY if self.ops is None else "|".join(sorted(self.ops))
        inputs = [repr(p) for p in self.inputs] + (["..."] if self.more else [])
        return f"Op({ops!r}{''.join(', ' + i for i in inputs)})"


class Match:
    """One node a pattern matched, and the matches of its inputs' patterns.

    `node` is its NodeDef (`name`; `position` in graph order), `output` the output of it
    that its reader reads, `tensor` the input string that reads it as the reader wrote it
    (`name`, `name:1`; the name given where the match began), `inputs` the matches of its
    input patterns, in order, and `passed` the names of the nodes looked through to reach
    it (`Op.through`), nearest its reader first. `match["key"]` is the match its pattern named
    `key`, anywhere below."""

    __slots__ = ("graph", "name", "tensor", "output", "inputs", "passed", "key")

    def __init__(self, graph, name: str, tensor: str, output: int, inputs: list[Match],
                 passed: list[str], key: str | None):
        self.graph = graph
        self.name = name  # (a name, not a position: a prune renumbers the nodes)
        self.tensor = tensor
        self.output = output
        self.inputs = inputs
        self.passed = passed
        self.key = key

    @property
    def position(self) -> int:
        return self.graph.position(self.name)

    @property
    def node(self):
        return self.graph.node(self.name)

    def __getitem__(self, key: str) -> Match:
        for found in self.walk():
            if found.key == key:
                return found
        raise KeyError(key)

    def get(self, key: str) -> Match | None:
        """`self[key]`, or None where no pattern of the match is named `key`."""
        return next((found for found in self.walk() if found.key == key), None)

    def walk(self) -> Iterator[Match]:
        """This match and every match below it, depth first, in input order."""
        yield self
        for match in self.inputs:
            yield from match.walk()

    def names(self) -> list[str]:
        """Every node the match met: the matched nodes and those looked through, each once,
        this one first."""
        found: dict[str, None] = {}
        for match in self.walk():
            found[match.name] = None
            found.update(dict.fromkeys(match.passed))
        return list(found)

    def read_elsewhere(self, keep: Iterable[str] = ()) -> set[str]:
        """Those of the nodes below this one (`names`, this one aside: its readers are the
        edit's to rewire) that something outside the match reads, as
        `GraphIndex.read_elsewhere` says: a replacement of the match must keep them. `keep`:
        more readers that do not count (the edit's own new nodes)."""
        inner = self.names()
        return self.graph.read_elsewhere(inner[1:], besides={*inner, *keep})

    def __repr__(self) -> str:
        return f"Match({self.name!r}, output={self.output})"


def match(graph, pattern: Op, tensor: str) -> Match | None:
    """`pattern` against the node that computes `tensor` (a node's name or an input string,
    `name:1`), or None (see `GraphIndex.match`)."""
    from graphfix.graph.edges import parse_input

    text = tensor
    name, output = parse_input(text)
    if output < 0:
        return None  # (a control input carries no tensor)
    position = graph.position_or_none(name)
    if position is None:
        return None
    passed = []
    while pattern.through and graph.ops[position] in pattern.through and (
            pattern.ops is None or graph.ops[position] not in pattern.ops):
        first = graph.data_input_texts(position)[:1]
        if not first:
            break
        text = first[0]
        name, output = parse_input(text)
        next_position = graph.position_or_none(name)
        if next_position is None:
            return None
        passed.append(graph.names[position])
        position = next_position
    if pattern.ops is not None and graph.ops[position] not in pattern.ops:
        return None
    if pattern.output is not None and output != pattern.output:
        return None
    if pattern.where is not None and not pattern.where(graph.node_at(position)):
        return None
    inputs = []
    if pattern.inputs:
        data = graph.data_input_texts(position)
        if len(data) < len(pattern.inputs) or (len(data) > len(pattern.inputs)
                                               and not pattern.more):
            return None
        for sub, text in zip(pattern.inputs, data):
            found = match(graph, sub, text)
            if found is None:
                return None
            inputs.append(found)
    return Match(graph, graph.names[position], text, output, inputs, passed, pattern.name)
