"""stateful-custom-ops' check of a verify run: custom ops that TF folds, caught by running.

A custom op (an op type TF's own registry lacks) registered without `.SetIsStateful()`
promises that its output depends only on its inputs, so TF may evaluate it once, while it
optimizes the graph for the first `Session.run`, and reuse that value on every step
(issue 21; docs/custom_ops.md gives TF's rules and the measurements). Verify fetches the
outputs of every such op on each step (`unstateful_custom_ops`); an output that is the same
on every step is run a second time in a session with both folding passes off
(`folding_off`). If it changes there, TF folded it (`folding_check`). Imported by verify
alone, after TF and the graph's custom-op libraries are loaded.
"""

from __future__ import annotations

import numpy as np

from graphfix.findings import Check
from graphfix.graph.index import GraphIndex

CHECK = "custom ops"
# Past these a tensor is in every step again (a cond's Merge, a loop's Exit); before them,
# from a Switch or an Enter, it may be dead or inside a loop's frame, where it cannot be
# fetched.
_JOINS = frozenset({"Merge", "RefMerge", "Exit", "RefExit"})
_SPLITS = frozenset({"Switch", "RefSwitch", "Enter", "RefEnter"})


def folding_off(config) -> None:
    """Turn off both passes that fold a constant-fed op (`config`, a ConfigProto): the
    classic graph optimizer (L0: its constant folding and CSE) and Grappler's constant
    folding. Either alone still folds (docs/custom_ops.md, "Which switches stop it")."""
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

    config.graph_options.optimizer_options.opt_level = config_pb2.OptimizerOptions.L0
    config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF


def unstateful_custom_ops(index: GraphIndex) -> list[str]:
    """The nodes of the main graph whose op is a custom op registered not stateful (in
    this process's registry: call after `load_libraries`), and whose outputs every step
    computes (not in a cond's branch or a loop's body)."""
    from tensorflow.python.framework import op_def_registry

    found = []
    for position, op in enumerate(index.ops):
        if not index.is_custom_op(op):
            continue
        op_def = op_def_registry.get(op)
        if op_def is None or op_def.is_stateful or not op_def.output_arg:
            continue  # (unregistered: the import says so)
        if _on_every_step(index, position):
            found.append(index.names[position])
    return found


def _on_every_step(index: GraphIndex, position: int) -> bool:
    """Whether no Switch or Enter lies behind the node without a Merge or Exit after it."""
    seen, pending = set(), [position]
    while pending:
        for text in index.inputs(pending.pop()):
            source = index.position(text.lstrip("^").partition(":")[0])
            if source in seen:
                continue
            seen.add(source)
            if index.ops[source] in _SPLITS:
                return False
            if index.ops[source] not in _JOINS:
                pending.append(source)
    return True


def folding_check(index: GraphIndex, run) -> Check | None:
    """The "custom ops" check from the outputs of unstateful custom ops on each step of
    `run` (`run.observed`: tensor -> its value per step). Outputs that never changed are
    run again with `folding_off` (`run.rerun`: (error or None, its observed)); an output
    that changes there is folded: the check fails. None where there is no such op."""
    observed, steps = run.observed, run.steps
    if not observed:
        return None
    ops = _ops_of(index, observed)
    if steps < 2:
        return Check(CHECK, True, f"not checked: {ops} not registered stateful; --steps 2 or "
                                  "more shows whether TF folds it")
    stuck = {tensor: values for tensor, values in observed.items() if _same(values)}
    if not stuck:
        changed = "; ".join(f"{_op_of(index, tensor)} ({_steps_shown(values)})"
                            for tensor, values in observed.items())
        return Check(CHECK, True, f"not registered stateful, and changed between steps: {changed}")
    error, unfolded = run.rerun(sorted({tensor.partition(":")[0] for tensor in stuck}),
                                folding_off)
    if error:
        return Check(CHECK, True, (
            f"{_ops_of(index, stuck)} returned the same value on every step; the run with "
            f"constant folding off failed ({error}), so whether it is folded is not shown"))
    folded = [t for t in stuck if t in unfolded and not _same(unfolded[t])]
    constant = [t for t in stuck if t not in folded]
    said = []
    for tensor in folded:
        said.append(f"{_op_of(index, tensor)} returned the same value on every step "
                    f"({_steps_shown(stuck[tensor])}); with folding off it changes "
                    f"({_steps_shown(unfolded[tensor])}): it is folded")
    if folded:
        return Check(CHECK, False, "; ".join(said) + (
            " (TF evaluates a custom op not registered stateful once, when it optimizes the "
            "graph, if its inputs are constant: add .SetIsStateful() to its REGISTER_OP and "
            "rebuild, or graphfix fix --only stateful-custom-ops keeps it running)"))
    return Check(CHECK, True, f"{_ops_of(index, constant)} returned the same value on every "
                              "step, with folding off too: not folded")


def _same(values: list[np.ndarray]) -> bool:
    first = values[0]
    return all(v.shape == first.shape and np.array_equal(v, first) for v in values[1:])


def _op_of(index: GraphIndex, tensor: str) -> str:
    return f"{index.node(tensor.partition(':')[0]).op} ({tensor})"


def _ops_of(index: GraphIndex, tensors) -> str:
    """`GetImageID (image_ids:0)`, or a list of them, naming each op and its tensors."""
    by_op: dict[str, list[str]] = {}
    for tensor in tensors:
        by_op.setdefault(index.node(tensor.partition(":")[0]).op, []).append(tensor)
    return ", ".join(f"{op} ({', '.join(names)})" for op, names in by_op.items())


def _steps_shown(values: list[np.ndarray]) -> str:
    """Each step's value, briefly: `id1, id1, id1` (the first element of each)."""
    return ", ".join(_brief(v) for v in values)


def _brief(value: np.ndarray) -> str:
    flat = value.reshape(-1)
    if flat.size == 0:
        return "[]"
    first = flat[0].decode(errors="replace") if isinstance(flat[0], bytes) else str(flat[0])
    return first if flat.size == 1 else f"[{first}, ...]"
