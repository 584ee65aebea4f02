"""What verify concludes from a run: whether each update op ran, and whether the fixed graph
computes what the original did.

- "update ops": every update op of the graph (`graphfix.graph.training.update_ops`: batch
  norm's moving statistics) must have run in the step. Proof is what ran, read from the
  traced first step's step stats, not whether the variable changed: a moving mean can keep
  its value through an update that ran (a momentum of 1, a batch whose mean is the moving
  mean, or a change below float32's resolution at a high momentum). An update op that did
  not run is the failure; one that ran and left its variable as it was is a note.
- "compare": the fixed graph's fetched outputs and variables equal the original's, except
  what a fix changes on purpose: each transform declares that
  (`graphfix.registry.Transform.intended_change`, passed in by the caller as
  `intended_changes`, since verify does not read the registry). The check names them
  ("equal except the 4 moving statistics update-ops now updates") and lists them in JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from graphfix.findings import IntendedChange
from graphfix.graph import training
from graphfix.graph.index import GraphIndex
# (run imports this module inside verify_graph, so this import finds run complete)
from graphfix.verification.run import Check

if TYPE_CHECKING:
    from graphfix.verification.run import _Run

_SHOWN = 3  # names a one-line detail shows before "..."


def _some(names: Sequence[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")


def update_writers(index: GraphIndex) -> dict[str, list[str]]:
    """Each variable an update op writes -> the update ops that write it (one per tower
    that runs the batch norm)."""
    names, _ = training.update_ops(index)
    writers: dict[str, list[str]] = {}
    for name in names:
        variable = training.variable_of(index, index.node(name))
        if variable is not None:
            writers.setdefault(variable, []).append(name)
    return writers


def update_variables(index: GraphIndex) -> set[str]:
    """The variables the update ops write (batch norm's moving statistics)."""
    return set(update_writers(index))


def update_ops_check(index: GraphIndex, run: _Run) -> Check | None:
    """Whether every update op ran (None for a graph without update ops). What ran is read
    from `run.devices` (the traced first step); a variable that changed was written, by
    whatever name its writer ran under (a function's body renames its nodes). A variable
    that kept its value fails the check only where none of its update ops ran."""
    writers = update_writers(index)
    if not writers:
        return None
    kept = sorted(v for v in writers if v in run.variables_before and v in run.variables_after
                  and np.array_equal(run.variables_before[v], run.variables_after[v]))
    ran = set(run.devices)
    # (a statistic that one tower's update op wrote was updated, whether or not the
    # others' ran: slim's first-clone convention runs the first tower's only)
    stuck = [v for v in kept if not ran.intersection(writers[v])]
    total = len(writers)
    if stuck:
        not_run = [op for v in stuck for op in writers[v]]
        return Check("update ops", False, (
            f"{len(not_run)} update op(s) did not run, so {len(stuck)} of {total} update-op "
            f"variable(s) never changed: {_some(not_run)}"),
            names={"did_not_run": not_run, "never_changed": stuck})
    if kept:
        return Check("update ops", True, (
            f"{total - len(kept)} of {total} update-op variable(s) "
            f"changed; noted: {len(kept)} kept their value through an update that ran: "
            f"{_some(kept)}"), names={"ran_and_kept_their_value": kept})
    return Check("update ops", True, f"all {total} update-op variable(s) changed")


def raced_update_variables(index: GraphIndex, original: GraphIndex) -> set[str]:
    """The moving statistics several update ops of one step write in both graphs (a
    statistic each tower's batch norm updates): the order of their read-and-subtract is the
    scheduler's, so two runs of the same graph differ there."""
    return ({v for v, ops in update_writers(index).items() if len(ops) > 1}
            & {v for v, ops in update_writers(original).items() if len(ops) > 1})


def compare(run: _Run, reference: _Run, tolerance: float,
            intended: Sequence[IntendedChange] = (), raced: set[str] = frozenset()) -> Check:
    """Fetched outputs and variables must match the original's, except those a fix
    changes on purpose (`intended`) and the moving statistics whose updates race
    (`raced`). Where queue runners fed the steps, which batches a step sees depends on their
    threads' timing, so no two runs match: the check says so and compares nothing."""
    if run.queue_threads or reference.queue_threads:
        return Check("compare", True, (
            "not compared: queue runners fed the steps, and which examples a step dequeues "
            "depends on their threads' timing, so two runs differ whatever the graph"))
    meant = {node: change for change in intended for node in change.nodes}
    excepted: dict[str, list[str]] = {}  # what -> the names set aside as changed on purpose
    pairs = []
    for name, theirs in reference.values.items():
        change = meant.get(name.partition(":")[0])
        if change is not None:
            excepted.setdefault(change.what, []).append(name)
        else:
            pairs.append((name, run.values.get(name), theirs))
    unordered = []
    for name, theirs in reference.variables_after.items():
        change = meant.get(name)
        if change is not None:
            excepted.setdefault(change.what, []).append(name)
        elif name in raced:
            unordered.append(name)
        else:
            pairs.append((f"variable {name}", run.variables_after.get(name), theirs))
    mismatched = []
    for name, ours, theirs in pairs:
        if ours is None:
            mismatched.append(f"{name} missing")
        elif ours.shape != theirs.shape or (
            ours.dtype.kind in "fciub"
            and not np.allclose(ours, theirs, rtol=tolerance, atol=tolerance)
        ):
            mismatched.append(name)
    names = {}
    if excepted:
        names["changed_on_purpose"] = sorted(n for found in excepted.values() for n in found)
    if unordered:
        names["not_compared_several_update_ops"] = sorted(unordered)
    if mismatched:
        names["differs"] = mismatched
        return Check("compare", False, f"differs from the original: {', '.join(mismatched[:5])}",
                     names=names)
    detail = f"{len(pairs)} output(s) and variable(s) equal the original's"
    if excepted:
        detail += ", except " + "; ".join(f"the {len(found)} {what}"
                                          for what, found in excepted.items())
    if unordered:
        detail += (f" ({len(unordered)} moving statistic(s) several towers' update ops write "
                   f"in the scheduler's order not compared)")
    return Check("compare", True, detail, names=names)
