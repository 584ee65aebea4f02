"""What verify concludes from comparing two runs: whether the fixed graph computes what the
original did. (The checks of one transform's bug are that transform's:
`graphfix.registry.Transform.verify_check`.)

- "compare": the fixed graph's fetched outputs and variables equal the original's, except
  what a fix changes on purpose: each transform declares that
  (`graphfix.registry.Transform.intended_change`, passed in by the caller as
  `intended_changes`, since verify does not read the registry). The check names them
  ("equal except the 4 moving statistics update-ops now updates") and lists them in JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from graphfix.findings import Check, IntendedChange
from graphfix.graph import training
from graphfix.graph.index import GraphIndex

if TYPE_CHECKING:
    from graphfix.verification.run import _Run

def raced_update_variables(index: GraphIndex, original: GraphIndex) -> set[str]:
    """The moving statistics several update ops of one step write in both graphs (a
    statistic each tower's batch norm updates): the order of their read-and-subtract is the
    scheduler's, so two runs of the same graph differ there."""
    return ({v for v, ops in training.update_writers(index).items() if len(ops) > 1}
            & {v for v, ops in training.update_writers(original).items() if len(ops) > 1})


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
