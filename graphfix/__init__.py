"""graphfix: find and fix TF1-style multi-GPU and distributed-training bugs.

The public API, for export pipelines::

    import graphfix
    findings = graphfix.check_graph("model.pb", target_devices=["/gpu:0"])
    fixed, changes = graphfix.fix_graph(graph_def)       # same kind back: GraphDef here
    new_code, changes = graphfix.fix_source(code)
    result = graphfix.verify(fixed)

Graph functions take a path, bytes, a GraphDef / MetaGraphDef / SavedModel message or a
`tf.Graph`, and give back the kind they were given. Nothing here imports the TF runtime
unless a placement check, a `tf.Graph` or `verify` needs it.
"""

from graphfix.api import check_graph, check_source, fix_graph, fix_source, verify
from graphfix.findings import Change, Finding
from graphfix.registry import Context, Param, Transform, UsageError, all_transforms

__version__ = "0.1.0"

__all__ = [
    "Change",
    "Context",
    "Finding",
    "Param",
    "Transform",
    "UsageError",
    "all_transforms",
    "check_graph",
    "check_source",
    "fix_graph",
    "fix_source",
    "verify",
]
