"""graphfix: find and fix TF1-style multi-GPU and distributed-training bugs.

The public API, for export pipelines::

    import graphfix
    findings = graphfix.check_graph("model.pb", target_devices=["/gpu:0"])
    fixed, changes = graphfix.fix_graph(graph_def)       # same kind back: GraphDef here
    new_code, findings = graphfix.fix_source(code)    # the findings it fixed
    result = graphfix.verify(fixed, compare=graph_def, steps=2)
    captured = graphfix.trace("train.py", ["--gpus", "2"])  # runs the script: its graph

Whatever graphfix refuses or cannot do raises a `graphfix.Error` (`UsageError`,
`InputError`, `VerifyError`, `TraceError`), whose message is one line.

Graph functions take a path, bytes, a GraphDef / MetaGraphDef / SavedModel message or a
`tf.Graph`, and give back the kind they were given. Nothing here imports the TF runtime
unless a placement check, a `tf.Graph` or `verify` needs it.
"""

import importlib

__version__ = "0.1.0"

# Names are loaded on first use, so `import graphfix` stays cheap: the graph path must not
# wait for libcst or the TensorFlow runtime.
_EXPORTS = {
    "check_graph": "graphfix.api",
    "check_source": "graphfix.api",
    "fix_graph": "graphfix.api",
    "fix_source": "graphfix.api",
    "verify": "graphfix.api",
    "Change": "graphfix.findings",
    "Finding": "graphfix.findings",
    "Context": "graphfix.registry",
    "Param": "graphfix.registry",
    "Transform": "graphfix.registry",
    "UsageError": "graphfix.registry",
    "Error": "graphfix.errors",
    "InputError": "graphfix.graph.graphfile",
    "VerifyError": "graphfix.verification.run",
    "TraceError": "graphfix.trace",
    "all_transforms": "graphfix.registry",
}

__all__ = sorted([*_EXPORTS, "trace"])


def __getattr__(name: str):
    if name == "trace":  # the package, callable as `graphfix.trace(path)` (its `trace`)
        return importlib.import_module("graphfix.trace")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'graphfix' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
