"""stateful-custom-ops: custom ops that run once and never again (issue 21, seed 003).

The bug::

    REGISTER_OP("GetImageID").Input("count: int32").Output("image_id: string");

    ids = my_ops.get_image_id(tf.constant(32))
    sess.run(ids)  # id1
    sess.run(ids)  # id1 again: Compute() never runs a second time

An op registered without `.SetIsStateful()` promises TF that its output depends only on its
inputs. When every input is a constant, TF evaluates it once, while it optimizes the graph
at the first `sess.run`, and puts the result in the graph as a `Const`; identical calls of
it are merged into one (common subexpression elimination).

Why (measured on TF 2.21 by tests/test_custom_ops.py with the compiled op of
fixtures/custom_ops/get_image_id.cc; TF's rules read from its code): two passes fold, and
either alone suffices. Grappler's constant folding (`ConstantFolding::IsFoldable`) folds a
node free of side effects (`OpDef.is_stateful` false) whose data inputs are all constants;
control inputs are skipped and moved onto the folded `Const`. The classic graph optimizer
(`OptimizerOptions.opt_level` L1, the default) folds a non-stateful node whose every data
input is foldable (a `PlaceholderWithDefault` of a constant is, and so is an op with no data
input at all), and its CSE merges equal non-stateful nodes. So a placeholder fed every step
or a variable's value keeps the op running; `placeholder_with_default`, a control dependency
on a random op, and turning off either pass alone do not. Only L0 with Grappler's folding
off stops it in the session config. The full research, each statement measured or read
with the TF commit it was read at, is docs/custom_ops.md.

Found (graph): each node of a custom op (an op type TF's own registry lacks) registered not
stateful whose data inputs all come from constants (through stateless TF ops), or which has
no input: an error naming the op, its constant inputs, and what TF does. Identical calls
(same op, inputs and attributes) are named together in one finding: on constants TF folds
each to a value of its own (measured), and once their shared input is not constant its CSE
merges them into one, so the fix gives each call its own pass-through. The registration comes
from the library (`--set stateful-custom-ops.op_library=my_ops.so`, read with
`tf.load_op_library` in a child process, only for a graph that has a custom op), the C++ sources (their `REGISTER_OP` chains:
`sources=my_ops.cc`, or a `.cc`, `.cpp` or `.cxx` file named on the command line or, in a
run with a graph, lying in the folder of a Python source given), or the op list a MetaGraphDef carries; an op none of
them describes is a warning (its registration is unknown). On a traced script (`check
--trace`, `fix --trace`), the libraries the script loaded with `tf.load_op_library` are read
unless `op_library` is given, and the C++ sources are `sources` and the `.cc`, `.cpp` and
`.cxx` files in the script's folder. No finding for a stateful custom op, one fed from a
placeholder or a variable, or TF's own ops.

Fixed (graph, a workaround, said so in the finding): each constant input of each such call
goes through a `DebugIdentityV2` node of its own. That op is registered stateful, so neither
pass folds it and CSE never merges two of them; with its default attributes it returns its
input and writes nothing, so the graph's outputs are unchanged (the op still sees the same
input). It relies on Grappler's `debug_stripper` being off, as it is by default. An op with
no input cannot be kept running by a graph rewrite (a control input is moved onto the folded
constant): that finding is not fixable in the graph.

Fixed (C++, the real fix): in the C++ sources (as above), `.SetIsStateful()` is added
to the `REGISTER_OP` chain of each op the graph shows folded and of each op named
(`ops=GetImageID`; `graphfix fix my_ops.cc --set stateful-custom-ops.ops=GetImageID` needs no
graph), right after `REGISTER_OP("Name")` in the chain's own layout; a chain that
has it is left alone; a source that cannot be read is a one-line error (exit 2). Rebuild
the library for it to take effect.

Verified: `graphfix verify graph.pb --steps 2 --set stateful-custom-ops.op_library=my_ops.so`
(or the same key in `[tool.graphfix]`) loads the library, fetches the outputs of each custom
op not registered stateful on every step and, where one stayed the same, runs the graph a
second time with both folding passes off (`OptimizerOptions.L0` and Grappler's
`constant_folding` OFF): the "custom ops" check fails (exit 1) for an output that changes
there, "GetImageID (image_ids:0) returned the same value on every step (...); with folding off
it changes (...): it is folded"; one that stays the same there too is not folded. With
`--steps 1` the check says it needs two.

Parameters:
    op_library: built custom-op libraries (`.so`) to read registrations from (repeatable).
    sources: C++ sources with `REGISTER_OP` chains, read and fixed (repeatable); `.cc`,
        `.cpp` and `.cxx` files named on the command line or beside the Python sources
        given are added.
    ops: ops to make stateful in the sources whatever the graph shows (repeatable).
"""

from __future__ import annotations

from functools import partial
from typing import Iterator

from graphfix.findings import Change, Finding
from graphfix.graph.index import GraphIndex
from graphfix.graph.signatures import is_tf_op
from graphfix.registry import OP_LIBRARY, Context, Param, Transform, UsageError
from graphfix.tf_runtime import op_library_stat

from . import registrations

# Stateless TF ops that TF never folds through: a fed placeholder changes every step.
_NEVER_FOLDED = frozenset({"Placeholder", "PlaceholderV2"})
_CONTROL_FLOW = frozenset({"Enter", "Exit", "NextIteration", "Switch", "Merge", "RefSwitch",
                           "RefEnter", "RefExit", "RefMerge", "RefNextIteration"})
PASS_THROUGH = "DebugIdentityV2"


def _data_inputs(graph: GraphIndex, position: int) -> list[str]:
    return [text for text in graph.inputs(position) if not text.startswith("^")]


def _source_name(text: str) -> tuple[str, int]:
    name, _, index = text.partition(":")
    return name, int(index) if index else 0


class StatefulCustomOps(Transform):
    name = "stateful-custom-ops"
    summary = "custom ops not registered stateful that TF folds: SetIsStateful, or unfold in the graph"
    params = (
        Param(OP_LIBRARY.key, None, "custom-op libraries (.so) to read registrations from",
              multiple=True),
        Param("sources", None, "C++ sources whose REGISTER_OP chains are read and fixed",
              multiple=True, files=(".cc", ".cpp", ".cxx")),
        Param("ops", None, "ops to make stateful in the sources (besides those found folded)",
              multiple=True),
    )

    def _registrations(self, graph: GraphIndex, ctx: Context
                       ) -> tuple[dict[str, bool], dict[str, str]]:
        """Op -> is_stateful from the libraries and sources given, and the source texts. The
        libraries are read (a child process that starts TF) only for a graph with a custom
        op: a configured `op_library` costs nothing to the other graphs and to sources."""
        known: dict[str, bool] = {}
        texts: dict[str, str] = {}
        has_custom_ops = any(map(graph.is_custom_op, graph.op_kinds()))
        for path in ctx.options[OP_LIBRARY.key]:
            if has_custom_ops:
                known.update(registrations.library_ops(path))
            else:
                op_library_stat(path, UsageError)  # (a path that cannot be read is still said)
        for path in ctx.options["sources"]:
            texts[path] = registrations.read_source(path)
            for chain in registrations.chains_in(texts[path], path):
                known.setdefault(chain.op, chain.stateful)
        return known, texts

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding | object]:
        """An error for each custom-op call TF will fold (fixable where it has inputs); one
        edit for the C++ sources given, adding `.SetIsStateful()` where needed."""
        known, texts = self._registrations(graph, ctx)
        foldable: dict[str, tuple[bool, tuple[str, ...]]] = {}

        def constants_behind(text: str) -> tuple[bool, tuple[str, ...]]:
            """Whether the tensor `text` is folded to a constant, and the Consts behind it."""
            name, _ = _source_name(text)
            if name in foldable:
                return foldable[name]
            foldable[name] = (False, ())  # (a cycle through a loop is no constant)
            position = graph.position(name)
            op = graph.ops[position]
            if op == "Const":
                answer = (True, (name,))
            elif (not is_tf_op(op) or op in _NEVER_FOLDED or op in _CONTROL_FLOW
                  or graph.signatures.is_stateful(op)):
                answer = (False, ())
            else:
                inputs = _data_inputs(graph, position)
                parts = [constants_behind(t) for t in inputs]
                answer = (all(ok for ok, _ in parts) and bool(inputs),
                          tuple(c for _, cs in parts for c in cs))
            foldable[name] = answer
            return answer

        folded: dict[tuple, list[int]] = {}  # (op, inputs, attrs) -> its calls
        unknown: dict[str, list[int]] = {}
        for position, op in enumerate(graph.ops):
            if not graph.is_custom_op(op):
                continue
            if op in known:
                stateful = known[op]
            elif graph.signatures.known(op):  # described by the MetaGraphDef's op list
                stateful = graph.signatures.is_stateful(op)
            else:
                stateful = None
            if stateful:
                continue
            inputs = _data_inputs(graph, position)
            if not all(constants_behind(t)[0] for t in inputs):
                continue
            if stateful is None:
                unknown.setdefault(op, []).append(position)
                continue
            node = graph.node_at(position)
            attrs = tuple(sorted((k, v.SerializeToString()) for k, v in node.attr.items()))
            folded.setdefault((op, tuple(inputs), attrs), []).append(position)

        found_ops: list[str] = []
        for (op, inputs, _), calls in folded.items():
            found_ops.append(op)
            yield self._folded(graph, ctx, op, inputs, calls, constants_behind)
        for op, calls in unknown.items():
            names = [graph.names[p] for p in calls]
            yield Finding(ctx.path, self.name,
                          f"custom op {op} ({', '.join(names)}) has only constant inputs and "
                          "its registration is unknown: if it is not registered stateful TF "
                          f"evaluates it once; give its library ({OP_LIBRARY})"
                          " or its C++ (stateful-custom-ops.sources)",
                          node=names[0], severity="warning", fixable=False,
                          details={"op": op, "nodes": names})
        wanted = list(dict.fromkeys([*found_ops, *ctx.options["ops"]]))
        if texts and wanted:
            yield partial(self._fix_sources, texts, wanted, ctx)

    def _folded(self, graph: GraphIndex, ctx: Context, op: str, inputs: tuple[str, ...],
                calls: list[int], constants_behind) -> Finding:
        names = [graph.names[p] for p in calls]
        consts = list(dict.fromkeys(c for t in inputs for c in constants_behind(t)[1]))
        # Identical calls on constants are each folded to a value of their own (measured:
        # Grappler folds them before the classic CSE could merge them); named together, as
        # the merge awaits them once the constant is replaced by one shared non-constant.
        if len(names) == 1:
            fed = (f"its inputs are all constant ({', '.join(consts)})" if inputs
                   else "it has no inputs")
            told = (f"custom op {op} ({names[0]}) is not registered stateful and {fed}: TF "
                    "evaluates it once when it optimizes the graph at the first session run "
                    "and returns that value on every step")
        else:
            fed = (f"have only constant inputs ({', '.join(consts)})" if inputs
                   else "have no inputs")
            told = (f"custom op {op} is not registered stateful and its {len(names)} identical "
                    f"calls ({', '.join(names)}) {fed}: TF evaluates each once when it "
                    "optimizes the graph at the first session run and returns that value on "
                    "every step (fed one shared input that is not constant, identical calls "
                    "are merged into one)")
        if not inputs:
            return Finding(ctx.path, self.name,
                           f"{told}; no graph rewrite keeps it running: add .SetIsStateful() "
                           f"to REGISTER_OP(\"{op}\") and rebuild (or run at "
                           "OptimizerOptions.L0 with Grappler's constant folding off)",
                           node=names[0], severity="error", fixable=False,
                           details={"op": op, "nodes": names, "constants": consts})
        return Finding(ctx.path, self.name,
                       f"{told}; the real fix is .SetIsStateful() on REGISTER_OP(\"{op}\"); "
                       f"workaround: fix routes each constant input of each call through a "
                       f"{PASS_THROUGH} of its own (stateful: never folded, never merged; "
                       "outputs unchanged)",
                       node=names[0], severity="error",
                       edit=partial(self._unfold, names, ctx),
                       details={"op": op, "nodes": names, "constants": consts})

    def _unfold(self, names: list[str], ctx: Context, graph: GraphIndex) -> list[Change]:
        """Each data input of each call goes through a DebugIdentityV2 of its own."""
        changes = []
        for name in names:
            position = graph.position(name)
            node = graph.node_at(position)
            added, done = [], set()
            for k, text in enumerate(list(node.input)):
                source, index = _source_name(text)
                if text.startswith("^") or index != 0 or source in done:  # (a Const: 1 output)
                    continue
                done.add(source)
                dtype = graph.signatures.output_types(graph.node(source))
                if not dtype:
                    continue
                through = type(node)(name=graph.unique_name(f"{name}/input_{k}_unfolded"),
                                   op=PASS_THROUGH, input=[text], device=node.device)
                through.attr["T"].type = dtype[index]
                graph.add_node(through)
                graph.replace_input(name, source, through.name)
                added.append(through.name)
            if added:
                changes.append(Change(ctx.path, self.name,
                                      f"routed {name}'s constant inputs through "
                                      f"{', '.join(added)} ({PASS_THROUGH}: not folded)",
                                      node=name, details={"added": added}))
        return changes

    def _fix_sources(self, texts: dict[str, str], ops: list[str], ctx: Context,
                     graph: GraphIndex) -> list[Change]:
        """`.SetIsStateful()` in each source's chains of `ops`; the new text rides on the
        Change (`details["file"]`, `["text"]`), written with the graph's outputs."""
        changes = []
        for path, text in texts.items():
            new, changed = registrations.with_stateful(text, ops)
            if changed:
                changes.append(Change(path, self.name,
                                      f"added .SetIsStateful() to REGISTER_OP of "
                                      f"{', '.join(changed)} (rebuild the library)",
                                      details={"file": path, "text": new, "ops": changed}))
        return changes
