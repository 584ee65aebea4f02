"""colocate-gradients, source surface: the call that differentiates several towers' loss
outside their device scopes gains `colocate_gradients_with_ops=True`.

Read within the function (or module) making the call: the names its loss is computed from
are followed back through their assignments (and the lists they are appended to) to where
they are bound inside a `with tf.device(...)`.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ScopeProvider

from graphfix.source import fixes
from graphfix.source.codemod import HOLE, SourceCodemod, argument, device_argument, device_template
from graphfix.source.examples import Example
from graphfix.source.scopes import (descendants, enclosing, enclosing_function, inside,
                                    single_value, with_items_around)
from graphfix.source.vocabulary import DEVICE_CALLS, GRADIENT_METHODS

KEYWORD = "colocate_gradients_with_ops"
_GROWS_A_LIST = frozenset({"append", "extend", "insert"})


class ColocateGradientsRule(SourceCodemod):
    """`minimize`, `compute_gradients` or compat.v1's `gradients` called outside the towers'
    device scopes on a loss built inside several of them, without the keyword."""

    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        opt = tf.train.GradientDescentOptimizer(0.1)
        losses = []
        for i in range(2):
            with tf.device("/gpu:%d" % i):
                losses.append(tower_loss(i))
        train = opt.minimize(tf.add_n(losses), colocate_gradients_with_ops=True)
        """,
        """\
        import tensorflow.compat.v1 as tf

        opt = tf.train.GradientDescentOptimizer(0.1)
        with tf.device("/gpu:0"):
            loss = tower_loss(0)
        train = opt.minimize(loss)
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf

            opt = tf.train.GradientDescentOptimizer(0.1)
            losses = []
            for i in range(2):
                with tf.device("/gpu:%d" % i):
                    losses.append(tower_loss(i))
            train = opt.minimize(tf.add_n(losses))
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf

            opt = tf.train.GradientDescentOptimizer(0.1)
            losses = []
            for i in range(2):
                with tf.device("/gpu:%d" % i):
                    losses.append(tower_loss(i))
            train = opt.minimize(tf.add_n(losses), colocate_gradients_with_ops=True)
            """,
            says="the backward pass runs on one device"),
    )

    def visit_Module(self, node: cst.Module) -> None:
        for call in self.nodes(cst.Call):
            loss = self._loss_of(call)
            if (loss is None or argument(call, KEYWORD, None) is not None
                    or any(arg.star == "**" for arg in call.args)):
                continue
            towers = self._device_scopes_building(loss, call)
            if not _several(towers) or any(inside(call, self.parent(item), self.parent)
                                           for item, _ in towers):
                continue
            devices = ", ".join(dict.fromkeys(self.code(item.item) for item, _ in towers))
            self.report(call, (
                f"{self.code(call.func)}(...) differentiates a loss built in several towers' "
                f"device scopes ({devices}) outside them, without {KEYWORD}=True: every "
                "gradient op is built here, on one device, so the backward pass runs on one "
                "device and the other GPUs compute only the forward pass"),
                fix=fixes.Replace(call, _with_keyword), severity="warning")

    def _loss_of(self, call: cst.Call) -> cst.BaseExpression | None:
        """What `call` differentiates, if it is a call that takes the keyword: an optimizer's
        `minimize`/`compute_gradients` (not a Keras optimizer's, which has no such argument)
        or compat.v1's `gradients` (TF 2's colocates always and takes none)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in GRADIENT_METHODS:
            made = (single_value(func.value, self.get_metadata(ScopeProvider, func.value, None),
                                 self.parent) if isinstance(func.value, cst.Name) else None)
            if isinstance(made, cst.Call) and (self.tf_canonical(made.func) or "").startswith(
                    "keras."):
                return None
            return argument(call, "loss", 0)
        if self.tf_qualified(func) == "tensorflow.compat.v1.gradients":
            return argument(call, "ys", 0)
        return None

    def _device_scopes_building(self, loss: cst.BaseExpression, call: cst.Call
                                ) -> list[tuple[cst.WithItem, bool]]:
        """The `with <device>(...)` items the loss's names are bound in, each with whether
        it is a tower loop's (a device that changes with the loop it is in), following the
        names bound outside any device scope back through what they are computed from."""
        body = enclosing_function(call, self.parent) or self.nodes(cst.Module)[0]
        bindings: dict[str, list[cst.CSTNode]] = {}  # name -> the values it is bound to
        for node in descendants(body, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Call):
            if isinstance(node, cst.Call):
                func = node.func
                if (isinstance(func, cst.Attribute) and func.attr.value in _GROWS_A_LIST
                        and isinstance(func.value, cst.Name)):
                    bindings.setdefault(func.value.value, []).append(node)
                continue
            targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                       else [node.target])
            for name in (n for t in targets for n in descendants(t, cst.Name)):
                if node.value is not None:
                    bindings.setdefault(name.value, []).append(node.value)
        found, seen = [], set()
        pending = [n.value for n in descendants(loss, cst.Name)]
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            for value in bindings.get(name, ()):
                item = self._device_item_around(value)
                if item is None:
                    pending.extend(n.value for n in descendants(value, cst.Name))
                elif all(item is not other for other, _ in found):
                    found.append((item, self._in_a_tower_loop(item)))
        return found

    def _device_item_around(self, node: cst.CSTNode) -> cst.WithItem | None:
        """The innermost `with` item around `node` that calls TF's `device`, within the
        function holding `node`."""
        for around in with_items_around(node, self.parent):
            if not isinstance(around, cst.WithItem):
                return None
            if (isinstance(around.item, cst.Call)
                    and self.tf_canonical(around.item.func) in DEVICE_CALLS):
                return around
        return None

    def _in_a_tower_loop(self, item: cst.WithItem) -> bool:
        """Whether the device scope is entered once per turn of a loop, with a device that
        changes (`'/gpu:%d' % i`, a name): one scope of several towers."""
        loop = enclosing(item, self.parent, cst.For, cst.While, within_function=True)
        given = device_argument(item.item)
        template = device_template(given) if given is not None else ""
        return loop is not None and (template is None or HOLE in template)


def _several(towers: list[tuple[cst.WithItem, bool]]) -> bool:
    return len(towers) >= 2 or any(in_loop for _, in_loop in towers)


def _with_keyword(call: cst.Call) -> cst.Call:
    """`call` with `colocate_gradients_with_ops=True` after its last argument (one per line
    where the arguments are, the trailing comma kept)."""
    args = list(call.args)
    trailing = args[-1].comma if isinstance(args[-1].comma, cst.Comma) else None
    if trailing is None:
        between, last = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), None
    else:
        between = (args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma)
                   else cst.Comma(whitespace_after=call.whitespace_before_args))
        last = trailing
    args[-1] = args[-1].with_changes(comma=between)
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""))
    added = cst.Arg(value=cst.Name("True"), keyword=cst.Name(KEYWORD), equal=equal,
                    comma=last or cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=[*args, added])
