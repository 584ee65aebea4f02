"""colocate-gradients, source surface: the call that differentiates several towers' loss
outside their device scopes gains `colocate_gradients_with_ops=True`.

Read within the function (or module) making the call: the names its loss is computed from
are followed back through their assignments (and the lists they are appended to) to where
they are bound inside a `with tf.device(...)`. A call is reported but not fixed where the
file, or one its imports connect it to, calls TF's `gather` (the transform's page says why).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ScopeProvider

from graphfix.source import fixes
from graphfix.source.codemod import HOLE, SourceCodemod, argument, device_argument, device_template
from graphfix.source.examples import Example
from graphfix.source.scopes import (bound_values, descendants, enclosing, enclosing_function,
                                    in_one_turn_branch, inside, single_value)
from graphfix.source.vocabulary import GATHER_CALLS, GRADIENT_METHODS

KEYWORD = "colocate_gradients_with_ops"


class ColocateGradientsRule(SourceCodemod):
    """`minimize`, `compute_gradients` or compat.v1's `gradients` called outside the towers'
    device scopes on a loss built inside several of them, without the keyword."""

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
            towers = self._device_scopes_building(loss, call)
            if (len(towers) < 2 and not any(map(self._tower_loop, towers))
                    or any(in_one_turn_branch(call, self._tower_loop(item), self.parent)
                           or any(inside(call, self.parent(scope), self.parent)
                                  for scope in [item, *self.device_items_around(item)])
                           for item in towers)):
                continue
            devices = ", ".join(dict.fromkeys(self.code(item.item) for item in towers))
            gather = self.project.first_call(GATHER_CALLS)
            self.report(call, (
                f"{self.code(call.func)}(...) differentiates a loss built in several towers' "
                f"device scopes ({devices}) outside them, without {KEYWORD}=True: its gradient "
                "ops are built here, so the backward pass runs on one device" + (gather and (
                    f"; not fixed: tf.gather is called ({gather}), and {KEYWORD}=True would "
                    "colocate its gradient with both the gather and the gathered table, which "
                    "TF's placer refuses where they sit on different devices") or "")),
                fix=None if gather else fixes.Replace(
                    call, lambda c: fixes.with_argument(c, KEYWORD, "True")),
                severity="warning")

    def _loss_of(self, call: cst.Call) -> cst.BaseExpression | None:
        """What `call` differentiates, if it is a call that takes the keyword: an optimizer's
        `minimize`/`compute_gradients` (not a Keras optimizer's, which has no such argument)
        or compat.v1's `gradients` (TF 2's colocates always and takes none)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in GRADIENT_METHODS:
            made = (single_value(func.value, self.get_metadata(ScopeProvider, func.value, None),
                                 self.parent) if isinstance(func.value, cst.Name) else None)
            keras = isinstance(made, cst.Call) and "keras." in (self.tf_canonical(made.func) or "")
            return None if keras else argument(call, "loss", 0)
        if self.tf_qualified(func) == "tensorflow.compat.v1.gradients":
            return argument(call, "ys", 0)
        return None

    def _device_scopes_building(self, loss: cst.BaseExpression, call: cst.Call
                                ) -> list[cst.WithItem]:
        """The `with <device>(...)` items the loss's names are bound in, following each name
        bound outside any device scope back through the names it is computed from, within
        the function (or module) making the call."""
        bindings = bound_values(enclosing_function(call, self.parent) or self.nodes(cst.Module)[0])
        found: list[cst.WithItem] = []
        pending, seen = [n.value for n in descendants(loss, cst.Name)], set()
        while pending:
            name = pending.pop()
            for value in bindings.get(name, ()) if name not in seen else ():
                item = next(self.device_items_around(value), None)
                if item is None:
                    pending.extend(n.value for n in descendants(value, cst.Name))
                elif all(item is not other for other in found):
                    found.append(item)
            seen.add(name)
        return found

    def _tower_loop(self, item: cst.WithItem) -> cst.For | cst.While | None:
        """The loop that enters the device scope once per turn, with a device that changes
        (`'/gpu:%d' % i`, a name): the loop of several towers; None if there is none."""
        template = device_template(device_argument(item.item) or cst.SimpleString('""'))
        return enclosing(item, self.parent, cst.For, cst.While, within_function=True) if (
            template is None or HOLE in template) else None
