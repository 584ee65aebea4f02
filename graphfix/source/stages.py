"""Where a model's stages run, read from source across the project: the GPUs named by the
device blocks of forward code that a loss is computed through, in the module computing it
and in the project's functions and methods it calls (a model class imported from another
module), and whether layers built outside every device scope take the default device
beside them. For a rule asking whether a backward pass built in one scope leaves devices
the forward pass used (colocate-gradients)."""

from __future__ import annotations

import os

import libcst as cst

from graphfix.graph.devices import DeviceSpec
from graphfix.source.codemod import (RUNTIME_DIGITS, DeviceValues, SourceCodemod,
                                     device_argument, scope_template, template_spec)
from graphfix.source.scopes import descendants, trace_values
from graphfix.source.vocabulary import GET_VARIABLE_CALLS, LAYER_CALLS, VARIABLE_CALLS

# What a GPU block beside layers built outside every device scope is split from: TF's
# placer puts an op that asks for no device on the first GPU of a machine with GPUs.
DEFAULT_GPU = DeviceSpec(device_type="GPU", device_index=0)
_WRITER = cst.Module([])  # writes a node of another module out as code
_VARIABLE_MAKERS = frozenset(n.rsplit(".", 1)[-1] for n in VARIABLE_CALLS | GET_VARIABLE_CALLS)


def one_gpu(templates: list[str | None] | None) -> DeviceSpec | None:
    """The one GPU device templates (`codemod.device_template`) all name, where the code
    names it (no part built at run time, not the ps job); None otherwise."""
    specs = {template_spec(t) for t in templates or [None]}
    spec = specs.pop() if len(specs) == 1 else None
    if spec is None or spec.device_type != "GPU" or spec.job == "ps" or int(RUNTIME_DIGITS) in (
            spec.device_index, spec.task) or spec.device_index is None:
        return None
    return spec


def stage_gpus(rule: SourceCodemod, call: cst.Call, loss: cst.BaseExpression,
               stages: list[cst.WithItem]) -> dict[DeviceSpec, str]:
    """The GPUs the forward code `loss` is computed through asks for, each with the code and
    place of a block asking for it: `stages` (the module's `with tf.device(...)` items the
    loss is computed in), and the device blocks of the project's functions and methods the
    loss's calls run (`FileView.code_run_by`) that hold forward code. Where those name one
    GPU other than the first and the loss is computed from layers built outside every
    device scope too (a call of the project's that runs no GPU block of its own), the
    default GPU (`DEFAULT_GPU`) is one of them. Nothing for a `call` (the one
    differentiating `loss`) made inside a device scope: its own scope would hold the
    backward pass of the code placed nowhere else."""
    found: dict[DeviceSpec, str] = {}
    if next(rule.device_items_around(call), None) is not None:
        return found
    fed_by_inputs_only: set[DeviceSpec] = set()  # a block of this module reading only inputs
    for stage in stages:
        spec = one_gpu([scope_template(stage)])
        if spec is not None:
            found.setdefault(spec, rule.code(stage.item))
            if _reads_only_inputs(rule, stage):
                fed_by_inputs_only.add(spec)
    calls = {id(c): c for c in descendants(loss, cst.Call)}
    unplaced = dict(calls)  # (the loss itself is computed at the call, outside every scope)

    def step(value: cst.CSTNode, _: bool) -> bool:
        reached = {id(c): c for c in descendants(value, cst.Call)}
        calls.update(reached)
        if next(rule.device_items_around(value), None) is None:
            unplaced.update(reached)
        return True

    trace_values(loss, rule.parent, rule.nodes(cst.Module)[0], step, False)
    placing: set[int] = set()  # the calls that run a block of their own on a GPU
    for callee in (c for c in calls.values() if rule.tf_canonical(c.func) is None):
        for label, code, spans in rule.project.code_run_by(rule.code(callee.func),
                                                           rule.position(callee)[0]):
            values = rule.device_values_of(label, code)
            for line in (n for first, last in spans for n in range(first, last + 1)):
                for asked in values.calls_at(line) if values is not None else ():
                    spec = _forward_gpu_block(values, asked)
                    if spec is not None:
                        placing.add(id(callee))
                        found.setdefault(spec, f"{_WRITER.code_for_node(asked)} at "
                                               f"{os.path.basename(label)}:{line}")
    only = next(iter(found)) if len(found) == 1 else None
    if only and only.device_index != 0 and only.job in (None, "localhost") and (
            only not in fed_by_inputs_only) and any(
            rule.tf_canonical(c.func) in LAYER_CALLS or rule.project.variables_created_by(
                rule.code(c.func), line=rule.position(c)[0]) and id(c) not in placing
            for c in unplaced.values()):
        found[DEFAULT_GPU] = "the default device (layers built outside every device scope)"
    return found


def _reads_only_inputs(rule: SourceCodemod, stage: cst.WithItem) -> bool:
    """Whether the block `stage` opens reads, of the values made outside it, only the
    graph's inputs (`tf.placeholder`s): then no layer built outside the block feeds it, and
    no gradient of theirs passes through it (a pretrained network weighing a loss by the
    source images alone, hanna-xu/U2Fusion's VGG16 under '/gpu:1'). A value made outside by
    anything else, or read from elsewhere, counts as a model's."""
    block = rule.parent(stage)
    if not isinstance(block, cst.With):
        return False
    inside = {id(n) for n in descendants(block, cst.CSTNode)}
    made_outside: dict[str, list[cst.BaseExpression]] = {}
    for assign in rule.nodes(cst.Assign):
        if id(assign) not in inside:
            for target in assign.targets:
                made_outside.setdefault(rule.code(target.target), []).append(assign.value)
    read = [rule.code(n) for n in descendants(block.body, cst.Name, cst.Attribute)]
    values = [value for code in dict.fromkeys(read) for value in made_outside.get(code, ())]
    return bool(values) and all(
        isinstance(v, cst.Call) and (rule.tf_canonical(v.func) or "").endswith("placeholder")
        for v in values)


def _forward_gpu_block(values: DeviceValues, asked: cst.Call) -> DeviceSpec | None:
    """The GPU a `with ...device(...)` item of another module asks for (`one_gpu`, its
    names read by `values`), where its block holds forward code: a call other than a
    variable's making and what that is given (`tf.Variable(tf.zeros(...))`)."""
    func, item = asked.func, values.parent(asked)
    if not (isinstance(func, cst.Attribute) and func.attr.value == "device"
            and isinstance(item, cst.WithItem) and item.item is asked):
        return None
    block, given = values.parent(item), device_argument(asked)
    if not isinstance(block, cst.With) or given is None:
        return None
    calls = descendants(block.body, cst.Call)
    making = {id(inner) for c in calls if isinstance(c.func, (cst.Name, cst.Attribute))
              and (c.func.value if isinstance(c.func, cst.Name) else c.func.attr.value)
              in _VARIABLE_MAKERS for inner in descendants(c, cst.Call)}
    if all(id(c) in making for c in calls):
        return None
    return one_gpu(values.templates(given))
