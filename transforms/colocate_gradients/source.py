"""colocate-gradients, source surface: the call that differentiates a loss computed in the
device scopes of several towers or stages, not in its own, gains
`colocate_gradients_with_ops=True`.

Read within the module making the call: the names its loss is computed from are followed
back (`graphfix.source.scopes.trace_values`: their assignments, the lists they are appended
to, `self.<attribute>`s, the module's functions' returns) to where they are bound inside a
`with tf.device(...)`; for a call outside every device scope, into the project's code the
loss's calls run too (`graphfix.source.stages.stage_gpus`). A call is reported but not fixed where the file, or one its imports
connect it to, calls TF's `gather` (the transform's page says why).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ScopeProvider

from graphfix.source import fixes
from graphfix.source.codemod import SourceCodemod, argument, on_ps_job
from graphfix.source.examples import Example
from graphfix.source.scopes import (descendants, in_one_turn_branch, inside,
                                    single_value, trace_values)
from graphfix.source.stages import stage_gpus
from graphfix.source.vocabulary import GATHER_CALLS, GRADIENT_METHODS, LAYER_CALLS

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
            gpus = stage_gpus(self, call, loss, towers)
            if len(devices) < 2 and len(gpus) < 2 and not any(
                    self.tower_loop(t) or self.round_robin_device(t) for t in towers) or any(
                    in_one_turn_branch(call, self.tower_loop(t), self.parent) for t in towers):
                continue
            devices.update(dict.fromkeys(gpus.values()))
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
                    inside(call, self.parent(s), self.parent) or self.tower_loop(s)
                    and any(self._loss_of(c) is not None for c in self.calls_in_scope(s))
                    for s in [item, *self.device_items_around(item)]):
                return behind
            if all(item is not f for f in found) and (not behind or self.tower_loop(item) or any(
                    self.tf_canonical(c.func) in LAYER_CALLS or self.project.variables_created_by(
                        self.code(c.func), line=self.position(c)[0])
                    for c in descendants(value, cst.Call))):
                found.append(item)
            return True

        trace_values(loss, self.parent, self.nodes(cst.Module)[0], step, False)
        return found
