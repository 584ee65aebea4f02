"""saver-before-variables: a `tf.train.Saver()` built before the model it should save.

    saver = tf.train.Saver()           # ValueError: No variables to save
    logits = model.build(images)       # the variables are created here

A Saver given no `var_list` saves the variables that exist when it is built. Found, in
source: a `Saver()` without `var_list`, followed in the same block by a simple statement
that creates variables, directly or through the project's functions (the project model follows
the call into model.py). Reported, not fixed: build the Saver after the model.
"""

import libcst as cst

from graphfix.registry import Transform
from graphfix.source.codemod import SourceCodemod, argument
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import CREATES_VARIABLES


class SaverBeforeVariablesCodemod(SourceCodemod):
    def visit_Module(self, node: cst.Module) -> None:
        for block in self.nodes(cst.IndentedBlock, cst.Module):
            statements = [s for s in block.body if isinstance(s, cst.SimpleStatementLine)]
            for index, statement in enumerate(statements):
                saver = self._saver(statement)
                if saver is None:
                    continue
                for later in statements[index + 1:]:
                    made = self._variables_made(later)
                    if made is not None:
                        self.report(saver, f"tf.train.Saver() is built before {made} "
                                    "creates variables: it does not save them")
                        break

    def _saver(self, statement):
        for call in self._calls(statement):
            if (self.tf_canonical(call.func) == "train.Saver"
                    and argument(call, "var_list", 0) is None):
                return call
        return None

    def _variables_made(self, statement) -> str | None:
        """What in `statement` creates variables: a TF constructor, or a project function
        that does (the project model's answer, through imports and calls)."""
        for call in self._calls(statement):
            if self.tf_canonical(call.func) in CREATES_VARIABLES:
                return self.code(call.func)
            callee = self.code(call.func)
            if self.project.variables_created_by(callee, placed_too=True) is not None:
                return callee
        return None

    def _calls(self, statement):
        found = []
        statement.visit(_Calls(found))
        return found


class _Calls(cst.CSTVisitor):
    def __init__(self, found):
        self.found = found

    def visit_Call(self, node: cst.Call) -> None:
        self.found.append(node)


class SaverBeforeVariables(Transform):
    name = "saver-before-variables"
    summary = "a tf.train.Saver() built before the variables it should save"
    codemod = SaverBeforeVariablesCodemod
    source_triggers = SourceTriggers(calls={"train.Saver"})
