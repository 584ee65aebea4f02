"""What in a graph is training: variables, update ops, train ops, towers.

Shared by the transforms that reason about a training step (`update-ops`) and by `verify`
(which proves each update op's variable moves). A MetaGraphDef's own collections win over
detection: `update_ops` and `train_op` say what the author meant.
"""

from __future__ import annotations

import re
from collections import deque

from graphfix.graph import VARIABLE_OPS, GraphIndex, parse_input

ASSIGN_OPS = frozenset({
    "Assign", "AssignAdd", "AssignSub",
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
})
# Statistics that batch norm keeps outside the gradient path.
_MOVING_STAT = re.compile(r"(^|/)(moving_mean|moving_variance|renorm_mean|renorm_stddev"
                          r"|renorm_mean_weight|renorm_stddev_weight)$")
_TOWER = re.compile(r"(?:^|/)(?:tower|clone|replica|gpu)_?(\d+)(?:/|$)", re.IGNORECASE)
_APPLY_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")
_NOT_TRAIN = re.compile(r"(^|/)(save|restore|init|report_uninitialized|summaries?)(_\d+)?(/|$)")


def collection(index: GraphIndex, key: str) -> list[str] | None:
    """Node names in a MetaGraphDef collection (None when there is no such collection)."""
    meta = getattr(index, "meta_graph", None)
    if meta is None or key not in meta.collection_def:
        return None
    values = meta.collection_def[key].node_list.value
    names = dict.fromkeys(parse_input(v)[0] for v in values)  # ordered, without repeats
    return [n for n in names if n in index]


def variable_of(index: GraphIndex, node) -> str | None:
    """The variable op an assign-like node writes (following Identity of the handle)."""
    if not node.input:
        return None
    source = parse_input(node.input[0])[0]
    seen = 0
    while source in index and seen < 8:
        src = index.node(source)
        if src.op in VARIABLE_OPS:
            return src.name
        if src.op not in ("Identity", "RefIdentity") or not src.input:
            return None
        source = parse_input(src.input[0])[0]
        seen += 1
    return None


def detect_update_ops(index: GraphIndex) -> list[str]:
    """Batch-norm moving-average updates: assigns to moving statistics, not initializers."""
    found = []
    for node in index:
        if node.op not in ASSIGN_OPS or not node.input:
            continue
        if node.name == parse_input(node.input[0])[0] + "/Assign":
            continue  # a variable's own initializer (the common case: skip it cheaply)
        variable = variable_of(index, node)
        if variable is None or not _MOVING_STAT.search(variable):
            continue
        if node.name == f"{variable}/Assign":  # the variable's own initializer
            continue
        found.append(node.name)
    return found


def update_ops(index: GraphIndex) -> tuple[list[str], str]:
    """(update op names, where they came from: "collection" or "detected")."""
    listed = collection(index, "update_ops")
    if listed:
        return listed, "collection"
    return detect_update_ops(index), "detected"


def descendants(index: GraphIndex, names) -> set[str]:
    """Every node that runs after any of `names` (data and control edges)."""
    seen: set[str] = set()
    queue = deque(names)
    while queue:
        name = queue.popleft()
        for consumer, _, _ in index.consumers(name):
            if consumer.name not in seen:
                seen.add(consumer.name)
                queue.append(consumer.name)
    return seen


def apply_ops(index: GraphIndex) -> list[str]:
    """Optimizer steps: the Apply*/ResourceApply* ops that write gradients into variables."""
    return [n.name for n in index if n.op.startswith(_APPLY_PREFIXES)]


def detect_train_ops(index: GraphIndex) -> list[str]:
    """Sinks of the graph that run after gradients are applied: the ops a loop runs."""
    applying = apply_ops(index)
    if not applying:
        return []
    after = descendants(index, applying) | set(applying)
    sinks = [
        name for name in after
        if not index.consumers(name) and not _NOT_TRAIN.search(name)
    ]
    order = {n.name: i for i, n in enumerate(index)}
    return sorted(sinks, key=order.__getitem__)


def train_ops(index: GraphIndex, named: list[str] | None = None) -> tuple[list[str], str]:
    """(train op names, where from: "parameter", "collection" or "detected")."""
    if named:
        return named, "parameter"
    listed = collection(index, "train_op")
    if listed:
        return listed, "collection"
    return detect_train_ops(index), "detected"


def tower_of(node) -> int | None:
    """The tower a node belongs to, from its name scope (`tower_1/`, `clone_0/`) or GPU."""
    match = _TOWER.search(node.name)
    if match:
        return int(match.group(1))
    return None


_GRADIENT_OF = re.compile(r"gradients(?:_\d+)?/(.+?)_grad/")


def detect_loss(index: GraphIndex) -> str | None:
    """The tensor the optimizer differentiates: `tf.gradients` seeds it with a Fill named
    `gradients/grad_ys_0` (or `gradients/Fill`), consumed by `gradients/<loss>_grad/...`."""
    for node in index:
        if node.op != "Fill" or not re.search(r"gradients(?:_\d+)?/(grad_ys_\d+|Fill)$", node.name):
            continue
        for consumer, _, _ in index.consumers(node.name):
            match = _GRADIENT_OF.search(consumer.name)
            if match and match.group(1) in index:
                return f"{match.group(1)}:0"
    return "loss:0" if "loss" in index else None
