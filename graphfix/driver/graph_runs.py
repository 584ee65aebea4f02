"""Graph runs: a graph input read, checked or fixed by the selected transforms over one
`GraphIndex`, and placed again once fixed (a fix TF would refuse is not written).
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Any

from graphfix.driver.outputs import Output, rewritten_files
from graphfix.driver.selection import Selected
from graphfix.findings import Change, Finding, Report
from graphfix.graph import graphfile as graphio
from graphfix.graph import kernels
from graphfix.graph import placement
from graphfix.graph.index import GraphError, GraphIndex, index_for
from graphfix.registry import Context
from graphfix.storage import path_problem


def apply_to_graph(graph_def, meta_graph, label: str, selected: Selected, *, fix: bool,
                   soft_placement: bool = False
                   ) -> tuple[list[Finding], list[Change], GraphIndex]:
    """Check or fix one GraphDef in place (the caller owns it). GraphError on bad structure.
    `soft_placement`: the graph's session places it with soft placement (`Context`).

    One index serves every transform: edits go through it, so it stays current; what each
    transform added (nodes, edges) is checked before the next runs. A transform's findings
    are all read before its first edit runs (`Transform.graph`). A fixed graph is placed
    again by the same model (`_InputState.recheck`): GraphError if TF would refuse it where
    it did not refuse the input, so nothing of it is written.
    """
    findings: list[Finding] = []
    changes: list[Change] = []
    index = index_for(graph_def, meta_graph)
    input_state = None  # (kept once an edit is about to run: `_InputState`)
    for transform_class, options in selected.transforms:
        if "graph" not in transform_class.surfaces():
            continue
        ctx = Context(label, options, selected.target_devices, explain=not fix,
                      soft_placement=soft_placement)
        found = list(transform_class().graph(index, ctx))
        for item in found:
            if not isinstance(item, Finding) and not callable(item):
                raise TypeError(f"{transform_class.name} found {type(item).__name__}, "
                                "not a Finding or an edit")
        if not fix:
            for finding in found:
                if isinstance(finding, Finding):
                    finding.edit = None  # (it holds the index, which the caller never sees)
                    findings.append(finding)
            continue
        edits = [item.edit if isinstance(item, Finding) else item for item in found]
        edits = list(dict.fromkeys(edit for edit in edits if edit is not None))  # shared: once
        if edits and input_state is None:
            input_state = _InputState(index)
        if edits:  # (an error's edit claims to fix what the error names)
            input_state.claimed.update(item.node for item in found if isinstance(item, Finding)
                                       and item.severity == "error" and item.edit is not None)
        for edit in edits:
            changes.extend(edit(index))
        try:
            index.check_changes()
        except GraphError as exc:
            raise GraphError(f"{transform_class.name} left a broken graph: {exc}") from None
    if changes and input_state is not None:
        input_state.recheck(index, selected, soft_placement)
    return findings, changes, index


class _InputState:
    """What placement depends on in a graph about to be fixed, kept to re-check the fixed
    graph against (`recheck`): each node's device, the body nodes' devices, how many nodes
    there were. Placing the whole graph again, before and after, would be a large share of
    a `fix` of a large graph: only the groups the edits touched are placed again, and the
    input only where the fixed graph has a refusal there."""

    def __init__(self, index: GraphIndex):
        self.devices = list(index.devices)
        self.count = len(index)
        self.bodies = _body_devices(index)
        self.claimed: set[str] = set()  # the nodes of the error findings whose edits ran

    def recheck(self, index: GraphIndex, selected: Selected, soft_placement: bool) -> None:
        """GraphError naming the node TF would refuse where the fixed graph (`index`) has
        a placement error the input did not have, or still has one in a group an error's
        edit claimed to fix (`claimed`): "a fix never turns a graph TF places into one it
        refuses", so such a graph is not written."""
        if index.kept_positions is not None:
            # A prune took nodes out (`GraphIndex.prune`): the input's devices where its
            # nodes stand now; the groups the removed ones left are not known, so every
            # group counts as touched.
            self.devices = [self.devices[p] for p in index.kept_positions]
            self.count = len(self.devices)
            touched = list(range(len(index)))
        else:
            touched = [p for p, (old, new) in enumerate(zip(self.devices, index.devices))
                       if old != new]
            touched += range(self.count, len(index))
            touched += index.rewired
        bodies = _body_devices(index)
        body_moves = {key: device for key, device in self.bodies.items()
                      if bodies.get(key) != device}
        after = _refusals(index, placement.groups_holding(index, touched), selected,
                          soft_placement, functions=bool(bodies))
        if not after:
            return
        before = self._refusals_of_input(index, touched, body_moves, selected, soft_placement)
        for key, problem in after.items():
            if key not in before or problem.group.anchor in self.claimed:
                where = f"{key[0]}/{key[1]}" if key[0] else key[1]
                still = "still " if key in before else ""
                raise GraphError(f"the fix would leave a graph TF {still}refuses at {where}: "
                                 f"{problem.message}; nothing written")

    def _refusals_of_input(self, index, touched, body_moves, selected, soft_placement):
        """`_refusals` of the touched groups as they were: their devices put back for the
        while (the nodes edits added left out), then the fixed ones again."""
        fixed = {p: index.devices[p] for p in touched if p < self.count}
        nodes = _body_nodes(index)
        fixed_bodies = {key: nodes[key].device for key in body_moves}
        try:
            for position in fixed:
                index.set_device(position, self.devices[position])
            for key, device in body_moves.items():
                nodes[key].device = device
            return _refusals(index, placement.groups_holding(
                index, [p for p in touched if p < self.count], within=self.count),
                selected, soft_placement, functions=bool(nodes))
        finally:
            for position, device in fixed.items():
                index.set_device(position, device)
            for key, device in fixed_bodies.items():
                nodes[key].device = device


def _body_nodes(index: GraphIndex) -> dict[tuple[str, str], Any]:
    return {(f.signature.name, n.name): n for f in index.graph_def.library.function
            for n in f.node_def}


def _body_devices(index: GraphIndex) -> dict[tuple[str, str], str]:
    return {key: node.device for key, node in _body_nodes(index).items()}


def _refusals(index: GraphIndex, groups: list, selected: Selected, soft_placement: bool,
              functions: bool) -> dict[tuple, placement.PlacementProblem]:
    """What TF's placer would refuse of `groups` (and, with `functions`, of the function
    bodies) for the run's target devices, by (function or None, the node TF names, kind)."""
    found = placement.problems(index, groups, targets=selected.target_devices,
                               functions=functions, soft_placement=soft_placement)
    return {(getattr(p.group, "function", None), p.node, p.kind): p
            for p in found if p.refused}


def graph_diff(before, after) -> list[str]:
    """A readable node-level diff of two GraphDefs."""
    old = {n.name: n for n in before.node}
    new = {n.name: n for n in after.node}
    lines = []
    for name, node in new.items():
        if name not in old:
            lines.append(f"+ {name} ({node.op}) on {node.device or 'any device'}")
            continue
        prev = old[name]
        if prev.device != node.device:
            lines.append(f"~ {name}: device {prev.device or '(none)'} -> {node.device or '(none)'}")
        if list(prev.input) != list(node.input):
            added = [i for i in node.input if i not in prev.input]
            removed = [i for i in prev.input if i not in node.input]
            parts = [f"+{i}" for i in added] + [f"-{i}" for i in removed]
            lines.append(f"~ {name}: inputs {' '.join(parts)}")
        if prev.attr != node.attr:
            changed = sorted(k for k in set(prev.attr) | set(node.attr)
                             if prev.attr.get(k) != node.attr.get(k))
            lines.append(f"~ {name}: attrs {', '.join(changed)}")
    for name, node in old.items():
        if name not in new:
            lines.append(f"- {name} ({node.op})")
    return lines


def run_files_without_a_graph(selected: Selected, fix: bool, want_diff: bool, report: Report,
                              outputs: list[Output]) -> None:
    """What a transform does to the files its params took (`Param.files`) in a run with no
    graph: its graph entry point over an empty graph, where only what needs no graph is
    left (stateful-custom-ops: `.SetIsStateful()` for the ops the user names)."""
    from graphfix.graph import proto

    takers = [(transform, options) for transform, options in selected.transforms
              if any(param.files and options.get(param.name) for param in transform.params)]
    if not takers:
        return
    try:
        findings, changes, _ = apply_to_graph(proto.GraphDef(), None, "<no graph>",
                                              Selected(takers, selected.target_devices),
                                              fix=fix)
    except ValueError as exc:  # (a file that cannot be read: one line naming it)
        path, _, error = str(exc).partition(": ")
        report.failed.append({"path": path, "error": error})
        return
    report.findings.extend(findings)
    report.changes.extend(changes)
    rewritten = rewritten_files(changes, want_diff)
    report.changed_paths.extend(output.label for output in rewritten)
    taken = [path for transform, options in takers for param in transform.params
             if param.files for path in options.get(param.name) or ()]
    report.unchanged_paths.extend(path for path in dict.fromkeys(taken)
                                  if path not in report.changed_paths)
    outputs.extend(rewritten)


def _graph_target(label: str, path: Path, out: str | None, in_place: bool, count: int) -> Path:
    """Where a fixed graph goes: back to `path`, to `out`, or into the directory `out` (for
    several graphs, or one file and `out` a directory that is not a SavedModel)."""
    if in_place or out is None:
        return path
    target = Path(out)
    if count > 1:
        return target / path.name
    if path_problem(target) is None and target.is_dir() and not path.is_dir() \
            and not graphio.is_graph_path(target):
        return target / path.name
    return target


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while a graph is read, indexed and
    transformed: the index and the findings are millions of small objects in no cycle,
    which the collector would walk again and again; reference counting still frees them.
    The one speed trick left (docs/benchmarks.md, "Speed tricks": it alone pays more than
    15% of `graphfix fix` on the 1M-node graph)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run_graph(label, path, selected, fix, report, outputs, out, in_place, want_diff, count):
    """Check or fix one graph input (`path`, labelled `label`) into `report`, and add what a
    fix writes to `outputs` (the graph to `_graph_target`, the files its changes rewrote)."""
    try:
        graph_file = graphio.load(path)
    except graphio.InputError as exc:
        report.failed.append({"path": label, "error": str(exc).removeprefix(f"{path}: ")})
        return
    before = None
    if want_diff:
        before = [type(g)() for g, _ in graph_file.graph_defs()]
        for copy, (g, _) in zip(before, graph_file.graph_defs()):
            copy.CopyFrom(g)
    try:
        for graph_def, meta in graph_file.graph_defs():
            findings, changes, index = apply_to_graph(graph_def, meta, label, selected, fix=fix)
            report.findings.extend(findings)
            report.changes.extend(changes)
            outputs.extend(rewritten_files(changes, want_diff))
            if not fix:
                lines = placement.summary(index)
                report.notes.append(f"{label}: placement: " + "; ".join(lines))
    except (GraphError, ValueError) as exc:
        report.failed.append({"path": label, "error": str(exc)})
        return
    except kernels.NoGpuKernelsError:
        raise  # this TensorFlow, not this graph: the command says so and stops
    except Exception as exc:  # a transform's bug must not hide the other inputs' results
        report.failed.append({"path": label, "error": f"internal error: {type(exc).__name__}: {exc}"})
        return
    changed = fix and any(c.path == label for c in report.changes)
    (report.changed_paths if changed else report.unchanged_paths).append(label)
    if fix:
        diff = []
        if before is not None:
            for old, (new, _) in zip(before, graph_file.graph_defs()):
                diff.extend(graph_diff(old, new))
        target = _graph_target(label, path, out, in_place, count)
        if changed or target != path:
            # (a graph no fix changed is copied as it was read, its bytes byte for byte: not
            # graphfix's serialization of it, which may order maps or text otherwise)
            copy = not changed and graph_file.kind != "savedmodel"
            outputs.append(Output(label, target, data=Path(path).read_bytes(), diff=diff) if copy
                           else Output(label, target, graph_file=graph_file, diff=diff))
