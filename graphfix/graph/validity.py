"""What makes a graph invalid: the one rule, checked when a graph is read.

A graph is invalid, and no transform sees it, when

* a node's name is empty or repeated;
* a node's op is not a name an op or function can have (`[A-Za-z0-9._][A-Za-z0-9_.\\-/>]*`:
  another message read as a GraphDef, an OpList, gives ops of control characters);
* an input is malformed (`a:`, `^`, empty, `a:x`, `^a:1`) or names a node the graph does not
  have;
* a `_class` attr names a node the graph does not have;
* its edges close a cycle that does not pass through a loop's back edge (the edge out of
  `NextIteration` into `Merge`, the one cycle TF allows); a self-loop is a cycle;
* a function of its library repeats a name or reads a name that is neither one of its
  arguments nor one of its nodes (function bodies name their tensors `node:output_arg:k`
  or `arg`, and are checked in those terms);
* (a MetaGraphDef's, a SavedModel's) a `node_list` collection names a node the main graph
  does not have, one that lives only inside a function body (a `tf.cond` branch of control
  flow v2) for one: TF's `import_meta_graph` and SavedModel loader look every such name up
  in the graph and stop with a KeyError ("The name '...' refers to an Operation not in the
  graph"), so no session of the user's could read the file.

What a file is before it is a graph (empty, corrupt, the wrong message, a bad escape or a
NUL byte in a text graph, nesting too deep) is `graphfix.graph.graphfile`'s to say.

`GraphIndex.check_structure` applies this rule to an index (`index_for` applies it to every
graph it indexes); the pieces here take the index's columns and edge table, so the check is a
few passes over lists (docs/benchmarks.md has its cost on the benchmark graphs).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import chain, compress, repeat
from operator import ge, sub
from typing import Collection, Iterable, Mapping, Sequence


class GraphError(ValueError):
    """A graph that is not well formed (the rule above); str() names the first problem."""


# An op's name as TF's `REGISTER_OP` and function names allow (another message read as a
# GraphDef gives ops of control characters).
_OP = re.compile(r"[A-Za-z0-9._][A-Za-z0-9_.\-/>]*\Z")
# `name`, `name:k` or `^name`, with a name as TF writes them and a port of digits.
_INPUT = re.compile(r"(?:\^[A-Za-z0-9._][A-Za-z0-9_.\-/>]*"
                    r"|[A-Za-z0-9._][A-Za-z0-9_.\-/>]*(?::(?:0|[1-9][0-9]*))?)\Z")
_SHOWN = 60  # characters of a bad name shown in the error (a wrong message's are long)


def shown(text: str) -> str:
    """`text` quoted for an error line, cut short if long."""
    quoted = repr(text)
    return quoted if len(quoted) <= _SHOWN else quoted[:_SHOWN - 4] + "...'"


def duplicate_name(names: Sequence[str]) -> str:
    """The first name of `names` met a second time (call it where a dict of them came out
    shorter than the list)."""
    seen: set[str] = set()
    return next(n for n in names if n in seen or seen.add(n))


def check_names(names: Sequence[str], known: Collection[str]) -> None:
    """GraphError for an empty node name (`known`: the names, as a set or dict)."""
    if "" in known:
        raise GraphError(f"node {names.index('')} (counting from 0) has an empty name")


def check_ops(ops: Iterable[str], names: Sequence[str], node_ops: Sequence[str]) -> None:
    """GraphError for the first node whose op is not a name an op could have (`ops`: the
    distinct ops of the graph; `node_ops`: each node's, to name the node)."""
    bad = {op for op in ops if not _OP.match(op)}
    if bad:
        position = next(p for p, op in enumerate(node_ops) if op in bad)
        op = node_ops[position]
        what = "no op" if not op else f"op {shown(op)}, not a name an op can have"
        raise GraphError(f"node {shown(names[position])} has {what} (not a GraphDef, "
                         "or a corrupt one)")


def input_problem(text: str) -> str:
    """Why an input string that names no node of the graph is wrong: malformed or dangling."""
    if not _INPUT.match(text):
        return f"has a malformed input {shown(text)}"
    return f"has input {shown(text)} from no node"


def check_inputs(names: Sequence[str], flat: Sequence[int], offsets: Sequence[int],
                 inputs_of) -> None:
    """GraphError for the first input that names no node (-1 in the edge table `flat`,
    `offsets`; `inputs_of(position)`: a node's input strings)."""
    if -1 not in flat:
        return
    k = flat.index(-1)
    reader = bisect_right(offsets, k) - 1
    text = inputs_of(reader)[k - offsets[reader]]
    raise GraphError(f"node {shown(names[reader])} {input_problem(text)}")


def check_colocation(names: Sequence[str], known: Collection[str],
                     points_to: Mapping[int, str], classes: Mapping[int, list[str]]) -> None:
    """GraphError for the first `_class` entry that names no node of the graph."""
    unknown = [(p, other) for p, other in points_to.items() if other not in known]
    unknown += [(p, other) for p, others in classes.items() for other in others
                if other not in known]
    if unknown:
        position, other = min(unknown)
        raise GraphError(f"node {shown(names[position])} expects to be colocated "
                         f"with unknown node {shown(other)}")


def edges_run_forward(flat: Sequence[int], offsets: Sequence[int],
                      back: Collection[int]) -> bool:
    """Whether every edge runs forward in graph order (source before reader) except edges
    out of `back` nodes (a loop's NextIteration). Then the graph has no cycle but its
    loops: every cycle holds an edge that runs backward. TF writes graphs in this order,
    so the costly search for a cycle runs only for the few that are not."""
    readers = chain.from_iterable(map(repeat, range(len(offsets) - 1),
                                      map(sub, offsets[1:], offsets)))
    backward = compress(flat, map(ge, flat, readers))
    return all(source in back for source in backward)


def cycle_members(count: int, consumers: Mapping[int, Sequence[int]],
                  back: Collection[int]) -> list[int]:
    """Positions of the nodes on or after a cycle that passes through no `back` node
    (Kahn's algorithm; a loop's back edge is not an ordering); [] when there is none."""
    indegree = [0] * count
    for source, readers in consumers.items():
        if source not in back and source >= 0:
            for reader in readers:
                indegree[reader] += 1
    ready = [p for p, degree in enumerate(indegree) if degree == 0]
    while ready:
        position = ready.pop()
        if position in back:
            continue
        for reader in consumers.get(position, ()):
            indegree[reader] -= 1
            if indegree[reader] == 0:
                ready.append(reader)
    return [p for p, degree in enumerate(indegree) if degree > 0]


# Collections `import_meta_graph` skips with a warning instead of looking their names up
# (meta_graph.py's `_COMPAT_COLLECTION_LIST`).
_COLLECTIONS_NOT_READ = frozenset({"local_resources", "trainable_resource_variables"})


def check_collections(meta_graph, known: Collection[str]) -> None:
    """GraphError for the first name of a `node_list` collection of `meta_graph` (a
    MetaGraphDef) that is no node of its graph (`known`: the main graph's node names), in
    collection order as TF reads them (sorted by key). A name may be a tensor's
    (`loss:0`): its node counts."""
    for key, collection in sorted(meta_graph.collection_def.items()):
        if key in _COLLECTIONS_NOT_READ or collection.WhichOneof("kind") != "node_list":
            continue
        for value in collection.node_list.value:
            if value.split(":", 1)[0] not in known:
                where = ("only inside a function body (a tf.cond or while_loop branch)"
                         if _in_a_body(meta_graph.graph_def, value) else "in no graph")
                raise GraphError(f"collection {shown(key)} names {shown(value)}, a node "
                                 f"{where}: TF's import_meta_graph cannot read this file "
                                 "(\"refers to an Operation not in the graph\")")


def _in_a_body(graph_def, name: str) -> bool:
    node = name.split(":", 1)[0]
    return any(n.name == node for f in graph_def.library.function for n in f.node_def)


def check_library(library) -> None:
    """GraphError for the first function of a FunctionDefLibrary that repeats a name or
    reads a name that is neither its argument nor its node."""
    functions = [f.signature.name for f in library.function]
    if len(set(functions)) != len(functions):
        raise GraphError(f"the function library defines {shown(duplicate_name(functions))} "
                         "twice")
    for function in library.function:
        where = f"function {shown(function.signature.name)}"
        nodes = [n.name for n in function.node_def]
        if "" in nodes:
            raise GraphError(f"{where} has a node with an empty name")
        if len(set(nodes)) != len(nodes):
            raise GraphError(f"{where} has two nodes named {shown(duplicate_name(nodes))}")
        known = set(nodes).union(a.name for a in function.signature.input_arg)
        for node in function.node_def:
            for text in node.input:
                if text.lstrip("^").split(":", 1)[0] not in known:
                    raise GraphError(f"{where}: node {shown(node.name)} has input "
                                     f"{shown(text)} from no node or argument")
        for output, text in function.ret.items():
            if text.split(":", 1)[0] not in known:
                raise GraphError(f"{where} returns {shown(text)} as {shown(output)}, "
                                 "from no node or argument")

