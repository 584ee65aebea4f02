"""colocate-gradients, source surface (to come)."""

from graphfix.source.astrule import AstRule


class ColocateGradientsRule(AstRule):
    DESCRIPTION = "Add colocate_gradients_with_ops=True where several towers' loss is differentiated."
