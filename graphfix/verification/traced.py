"""Verify the graph a traced script built (`graphfix verify SCRIPT.py`, `fix --verify`).

`verify_trace` verifies what a trace captured, its placeholders fed what the script fed
them. It runs in graphfix's process, from the captured MetaGraphDef alone, as a graph file
is verified; or, for a graph that calls the script's Python functions (`tf.py_func`,
`tf.numpy_function`: `inputs.python_function_nodes`), in the traced script's own process at
the stop point (`graphfix.trace.child`), the one process whose registry of Python functions
has them: TF finds a PyFunc's function by the token its node names, in a registry global
to the process, so the graph re-imported there into a fresh `tf.Graph` finds them. The
child sends its verdict back as JSON (`verdict_doc`), read here again (`verdict_of`).

The trace is read by its attributes (`graphfix.trace.Trace`): verification does not import
the trace; the trace's child imports this.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from graphfix.graph import graphfile
from graphfix.graph.index import index_for
from graphfix.graph.kernels import NoGpuKernelsError
from graphfix.verification.run import Check, VerifyError, VerifyResult

if TYPE_CHECKING:
    from graphfix.trace import Trace


def verify_trace(captured: Trace, *, label: str, steps: int = 1, fetches: Sequence[str] = (),
                 target_devices: Sequence[str] = (), op_libraries: Sequence[str] = (),
                 checks: Sequence = ()) -> VerifyResult:
    """Verify the graph a trace captured (named `label`), its placeholders fed what the
    script fed them: on a local cluster of the jobs its devices name (a ps/worker script's:
    the script made its cluster), else on the target devices. It fetches `fetches`, else
    what the script ran where the trace stopped (its train run, else its last run). The
    custom-op libraries given (`op_libraries`) and those the script loaded are loaded
    first (a graph with a custom op does not import without its library), each once. It is
    placed and run with soft placement where the script's sessions have it
    (`Trace.soft_placement`). `checks`: the transforms' checks of the run (`verify_graph`).

    Raises:
        VerifyError, NoGpuKernelsError: as `verify_graph` and `verify_on_cluster` do.
    """
    from graphfix.verification.cluster import verify_on_cluster
    from graphfix.verification.run import jobs_named, verify_graph

    libraries = list(op_libraries)
    seen = {os.path.realpath(p) for p in libraries}
    libraries += [p for p in captured.op_libraries if os.path.realpath(p) not in seen]
    graph_file = graphfile.GraphFile(Path(label), "metagraph", False, captured.meta_graph)
    stop_run = ([r for r in captured.runs if r.train] or captured.runs[-1:] or [None])[0]
    fetches = tuple(fetches) or (tuple(stop_run.fetches) if stop_run else ())
    jobs = jobs_named(index_for(captured.meta_graph.graph_def, captured.meta_graph))
    if jobs:
        return verify_on_cluster(graph_file, jobs, steps=steps, fetches=fetches,
                                 feeds=captured.feeds, label=label, op_libraries=libraries,
                                 soft_placement=captured.soft_placement)
    return verify_graph(graph_file, label=label, feeds=captured.feeds, steps=steps,
                        fetches=fetches, target_devices=target_devices,
                        op_libraries=libraries, soft_placement=captured.soft_placement,
                        checks=checks)


def verdict_doc(captured: Trace, **options) -> dict:
    """`verify_trace(captured, **options)` as JSON: {"result": ...} (every field of the
    `VerifyResult` but its values), {"error": line} for what verify says in one line (exit
    2), {"crashed": traceback} for anything else it raised (a fault of graphfix's)."""
    try:
        result = verify_trace(captured, **options)
    except (VerifyError, NoGpuKernelsError) as exc:
        return {"error": str(exc)}
    except Exception:  # (said in the parent, which has the terminal)
        return {"crashed": traceback.format_exc()}
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
              if f.name not in ("checks", "values")}
    return {"result": {**fields, "checks": [dataclasses.asdict(c) for c in result.checks]}}


def verdict_of(doc: dict) -> VerifyResult:
    """The `VerifyResult` a `verdict_doc` holds. Raises VerifyError for its one-line error,
    RuntimeError for what verify raised otherwise (with the child's traceback)."""
    if "error" in doc:
        raise VerifyError(doc["error"])
    if "crashed" in doc:
        raise RuntimeError("verify raised in the traced script's process:\n" + doc["crashed"])
    fields = dict(doc["result"])
    checks = [Check(**check) for check in fields.pop("checks")]
    return VerifyResult(**fields, checks=checks)
