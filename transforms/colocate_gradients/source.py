"""colocate-gradients, source surface: the call that differentiates a loss computed in the
device scopes of several towers or stages, not in its own, gains
`colocate_gradients_with_ops=True`.

Read within the module making the call: the names its loss is computed from are followed
back (`graphfix.source.scopes.trace_values`: their assignments, the lists they are appended
to, `self.<attribute>`s, the module's functions' returns) to where they are bound inside a
`with tf.device(...)`. A call is reported but not fixed where the file, or one its imports
connect it to, calls TF's `gather` (the transform's page says why).
"""

from __future__ import annotations

import os

import libcst as cst
from libcst.metadata import ScopeProvider

from graphfix.source import fixes
from graphfix.graph.devices import DeviceSpec
from graphfix.source.codemod import (RUNTIME_DIGITS, DeviceValues, SourceCodemod, argument,
                                     device_argument, on_ps_job, scope_template, template_spec)
from graphfix.source.examples import Example
from graphfix.source.scopes import (descendants, enclosing, in_one_turn_branch, inside,
                                    single_value, trace_values)
from graphfix.source.vocabulary import (GATHER_CALLS, GET_VARIABLE_CALLS, GRADIENT_METHODS,
                                        LAYER_CALLS, VARIABLE_CALLS)

KEYWORD = "colocate_gradients_with_ops"


class ColocateGradientsRule(SourceCodemod):
    """`minimize`, `compute_gradients` or compat.v1's `gradients` called, without the
    keyword, on a loss computed in the device scopes of several towers or stages, not in
    the call's own."""

    VALID = ("""\
        import tensorflow.compat.v1 as tf

        with tf.device("/gpu:0"):
            loss = tower_loss(0)
        train = opt.minimize(loss)
        """,)
    INVALID = (Example("""\
        import tensorflow.compat.v1 as tf

        losses = []
        for i in range(2):
            with tf.device("/gpu:%d" % i):
                losses.append(tower_loss(i))
        train = opt.minimize(tf.add_n(losses))
        """, fixed="""\
        import tensorflow.compat.v1 as tf

        losses = []
        for i in range(2):
            with tf.device("/gpu:%d" % i):
                losses.append(tower_loss(i))
        train = opt.minimize(tf.add_n(losses), colocate_gradients_with_ops=True)
        """, says="the backward pass runs on one device"),)

    def visit_Module(self, node: cst.Module) -> None:
        for call in self.nodes(cst.Call):
            loss = self._loss_of(call)
            if (loss is None or argument(call, KEYWORD, None) is not None
                    or any(arg.star == "**" for arg in call.args)):
                continue
            towers = [t for t in self._forward_scopes(loss, call) if not on_ps_job(t)]
            devices = dict.fromkeys(self.code(item.item) for item in towers)
            beside_default = len(devices) == 1 and self._beside_default_device(loss, call, towers)
            split = len(devices) > 1 or beside_default or any(
                self._tower_loop(t) or self.round_robin_device(t) for t in towers)
            elsewhere = {} if split else self._stages_in_callees(loss, call, towers)
            if not (split or len(elsewhere) > 1) or any(
                    in_one_turn_branch(call, self._tower_loop(t), self.parent) for t in towers):
                continue
            if beside_default:
                devices["the default device (layers built outside every device scope)"] = None
            devices.update(dict.fromkeys(elsewhere.values()))
            gather = self.project.first_call(GATHER_CALLS)
            self.report(call, (
                f"{self.code(call.func)}(...) differentiates a loss computed in several towers' "
                f"or stages' device scopes ({', '.join(devices)}), not in its own, without "
                f"{KEYWORD}=True: its gradient ops are built here, not beside their forward ops, "
                "so the backward pass runs on one device" + (gather and (
                    f"; not fixed: tf.gather is called ({gather}), and {KEYWORD}=True would "
                    "colocate its gradient with both the gather and the gathered table, which "
                    "TF's placer refuses where they sit on different devices") or "")),
                fix=None if gather else fixes.Replace(
                    call, lambda c: fixes.with_argument(c, KEYWORD, "True")),
                severity="warning")

    def _loss_of(self, call: cst.Call) -> cst.BaseExpression | None:
        """What `call` differentiates, if it is a call that takes the keyword: an optimizer's
        `minimize`/`compute_gradients` (not a Keras optimizer's, which has no such argument)
        or compat.v1's `gradients`, plain `tf.gradients` in a file written for TF 1.x too
        (TF 2's colocates always and takes none)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in GRADIENT_METHODS:
            made = (single_value(func.value, self.get_metadata(ScopeProvider, func.value, None),
                                 self.parent) if isinstance(func.value, cst.Name) else None)
            keras = isinstance(made, cst.Call) and "keras." in (self.tf_canonical(made.func) or "")
            return None if keras else argument(call, "loss", 0)
        if self.v1_qualified(func) == "tensorflow.compat.v1.gradients":
            return argument(call, "ys", 0)
        return None

    def _forward_scopes(self, loss: cst.BaseExpression, call: cst.Call) -> list[cst.WithItem]:
        """The device scopes of the forward code `call` differentiates, other than the call's
        own (one holding it, or asking for its device): each `with <device>(...)` item the
        loss is computed in (`trace_values`), and behind the first such item on a path, the
        items of a tower loop or where a layer is built (not an input's or a variable's). A
        tower loop whose scope differentiates its own loss (`compute_gradients` per tower) is
        not counted: its backward pass is built there, and a loss `call` reads from its
        values (the first tower's output, the towers' logged average) is another path's,
        such as a single-device build's beside it."""
        own = next(self.device_items_around(call), None)
        found: list[cst.WithItem] = []

        def step(value: cst.CSTNode, behind: bool) -> bool:
            item = next(self.device_items_around(value), None)
            if item is None or own and self.code(item.item) == self.code(own.item) or any(
                    inside(call, self.parent(s), self.parent) or self._tower_loop(s)
                    and any(self._loss_of(c) is not None for c in self.calls_in_scope(s))
                    for s in [item, *self.device_items_around(item)]):
                return behind
            if all(item is not f for f in found) and (not behind or self._tower_loop(item) or any(
                    self.tf_canonical(c.func) in LAYER_CALLS or self.project.variables_created_by(
                        self.code(c.func), line=self.position(c)[0])
                    for c in descendants(value, cst.Call))):
                found.append(item)
            return True

        trace_values(loss, self.parent, self.nodes(cst.Module)[0], step, False)
        return found

    def _beside_default_device(self, loss: cst.BaseExpression, call: cst.Call,
                               stages: list[cst.WithItem]) -> bool:
        """Whether the loss `call` differentiates, outside every device scope, is computed
        in one stage's block on a GPU other than the first (`'/gpu:1'`) and from layers
        built outside every device scope: those take TF's default device, GPU 0, so the
        model is split over two GPUs though the code names one. A stage on GPU 0, on a CPU
        or on a device built at run time may be the default device's own (an input
        pipeline, a pinned block): not a split the code shows."""
        if len(stages) != 1 or next(self.device_items_around(call), None) is not None:
            return False
        spec = template_spec(scope_template(stages[0]))
        if spec is None or spec.device_type != "GPU" or spec.device_index in (
                None, 0, int(RUNTIME_DIGITS)) or spec.job not in (None, "localhost"):
            return False
        built: list[cst.CSTNode] = []

        def step(value: cst.CSTNode, _: bool) -> bool:
            if next(self.device_items_around(value), None) is None and any(
                    self.tf_canonical(c.func) in LAYER_CALLS or self.project.variables_created_by(
                        self.code(c.func), line=self.position(c)[0])
                    for c in descendants(value, cst.Call)):
                built.append(value)
            return True

        trace_values(loss, self.parent, self.nodes(cst.Module)[0], step, False)
        return bool(built)

    def _stages_in_callees(self, loss: cst.BaseExpression, call: cst.Call,
                           stages: list[cst.WithItem]) -> dict[DeviceSpec, str]:
        """The GPUs asked for by the device blocks of forward code in the project's functions
        the loss is computed through (`FileView.code_run_by`: a model class of another
        module whose stages each open a `with tf.device(...)` block of their own), with this
        module's stages: spec -> the block's code and place. Only for a call outside every
        device scope (the call's own scope would hold the backward pass of code placed
        nowhere else). Each block must ask for one GPU the code names (`'/gpu:1'`, a
        module's constant): a device built at run time, a CPU (an input pipeline, pinned
        variables) or the ps job's is not a stage here."""
        if next(self.device_items_around(call), None) is not None:
            return {}
        found: dict[DeviceSpec, str] = {}
        for stage in stages:
            spec = _one_gpu([scope_template(stage)])
            if spec is not None:
                found.setdefault(spec, self.code(stage.item))
        callees = [c for c in descendants(loss, cst.Call)]

        def step(value: cst.CSTNode, _: bool) -> bool:
            callees.extend(descendants(value, cst.Call))
            return True

        trace_values(loss, self.parent, self.nodes(cst.Module)[0], step, False)
        read: set[tuple[str, tuple[int, int]]] = set()
        for callee in callees:
            if self.tf_canonical(callee.func) is not None:
                continue
            for label, code, spans in self.project.code_run_by(
                    self.code(callee.func), self.position(callee)[0]):
                values = self.device_values_of(label, code)
                if values is None or (label, spans[0]) in read:
                    continue
                read.add((label, spans[0]))
                for line in (n for first, last in spans for n in range(first, last + 1)):
                    for asked in values.calls_at(line):
                        spec = _forward_gpu_block(values, asked)
                        if spec is not None:
                            found.setdefault(spec, f"{_CODE.code_for_node(asked)} at "
                                                   f"{os.path.basename(label)}:{line}")
        return found

    def _tower_loop(self, item: cst.WithItem) -> cst.For | cst.While | None:
        """The loop that enters the device scope once per turn, with a device that changes
        (`SourceCodemod.device_changes`): the loop of several towers; None if there is none."""
        return enclosing(item, self.parent, cst.For, cst.While, within_function=True) if (
            self.device_changes(item)) else None


_CODE = cst.Module([])  # writes a node of another module out as code
_VARIABLE_MAKERS = frozenset(name.rsplit(".", 1)[-1] for name in VARIABLE_CALLS | GET_VARIABLE_CALLS)


def _one_gpu(templates: list[str | None] | None) -> DeviceSpec | None:
    """The one GPU device templates (`device_template`) all name, where the code names it
    (no part built at run time, no ps job); None otherwise."""
    specs = {template_spec(t) for t in templates or [None]}
    spec = specs.pop() if len(specs) == 1 else None
    if spec is None or spec.device_type != "GPU" or spec.job == "ps" or spec.device_index in (
            None, int(RUNTIME_DIGITS)) or spec.task == int(RUNTIME_DIGITS):
        return None
    return spec


def _forward_gpu_block(values: DeviceValues, asked: cst.Call) -> DeviceSpec | None:
    """The GPU a `with ...device(...)` item of another module asks for (`_one_gpu`, its
    names read by `values`), where its block holds forward code: a call other than a
    variable's making and what that is given (`tf.Variable(tf.zeros(...))`)."""
    func, item = asked.func, values.parent(asked)
    if not (isinstance(func, cst.Attribute) and func.attr.value == "device"
            and isinstance(item, cst.WithItem) and item.item is asked):
        return None
    block = values.parent(item)
    argument_given = device_argument(asked)
    if not isinstance(block, cst.With) or argument_given is None:
        return None
    calls = descendants(block.body, cst.Call)
    making = {id(inner) for c in calls if _called_last(c.func) in _VARIABLE_MAKERS
              for inner in descendants(c, cst.Call)}
    if all(id(c) in making for c in calls):
        return None
    return _one_gpu(values.templates(argument_given))


def _called_last(func: cst.BaseExpression) -> str | None:
    """The last name of what a call calls (`Variable` of `tf.Variable`)."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None
