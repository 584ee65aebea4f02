"""Running transforms over inputs: graphs and sources, checked or fixed, never half-written.

`run` takes the paths given on the command line and returns a `Report` plus the outputs it
would write; `write_outputs` writes them only once every input succeeded, each atomically.

Its parts: `inputs` (what the paths name), `source_runs` (the sources, by the worker
processes of `pool`), `graph_runs` (each graph, over one index), `outputs` (what a fix
writes, all or nothing), `selection` (the run's transforms and their options).

May import: `graphfix.graph`, `graphfix.source`, `graphfix.registry` and the core. Never
imports verification, the API or the command line.
"""

from __future__ import annotations

from pathlib import Path

from graphfix.driver.graph_runs import (apply_to_graph, collector_paused, graph_diff,
                                        run_files_without_a_graph, run_graph)
from graphfix.driver.inputs import InputFile, give_files_to_params, iter_inputs
from graphfix.driver.outputs import (Output, preflight, refuse_overwriting_inputs,
                                     rewritten_files, write_outputs)
from graphfix.driver.selection import Selected
from graphfix.driver.source_runs import SourceFile, run_sources
from graphfix.findings import Report
from graphfix.graph import graphfile as graphio
from graphfix.graph import kernels
from graphfix.source.files import SOURCE_SUFFIXES

__all__ = ["InputFile", "Output", "Selected", "apply_to_graph", "collector_paused",
           "give_files_to_params", "graph_diff", "iter_inputs", "preflight",
           "rewritten_files", "run", "write_outputs"]


def run(paths: list[str], selected: Selected, *, fix: bool, out: str | None = None,
        in_place: bool = False, want_diff: bool = False, excludes: tuple[str, ...] = (),
        jobs: int | None = None, progress=None, cache_dir: Path | None = None,
        timeout_per_file: float | None = None, fix_texts: bool = False
        ) -> tuple[Report, list[Output]]:
    """Check or fix every input; return the report and the outputs to write.

    Sources are read by `jobs` forked processes (default 1: this process; the CLI uses one
    per core); the report and outputs are the same, in input order, whatever `jobs` is.
    `progress(total)` may return a callable to call once per step done (a progress bar):
    one step per source file checked. With
    `cache_dir`, source results are cached there (`graphfix.source.cache`); the report counts the
    files read from it in `cached_paths`. The answers of TF's kernel registry are kept there
    too (`kernels.use_snapshot`). A source file whose reading takes longer than
    `timeout_per_file` seconds fails with that reason (None: no bound).

    `fix_texts`, in a check: each Python source with a fixable finding also gives the
    output `fix` would write for it (the fix as text, `graphfix.cli.replacements`), made in
    the same pass, by the worker that checks the file, with the same project model; the
    findings are still the check's. A check writes no output.
    """
    report = Report()
    outputs: list[Output] = []
    kernels.use_snapshot(cache_dir)
    listed = iter_inputs(paths, excludes)
    inputs, selected = give_files_to_params(listed, selected)
    graph_inputs = [p for _, p, problem in inputs if problem is None and graphio.is_graph_path(p)]
    sources = [SourceFile(label, path) for label, path, problem in inputs
               if problem is None and path.suffix in SOURCE_SUFFIXES
               and not graphio.is_graph_path(path)]
    # Sources first, before anything may load the TF runtime (its threads and fork do not mix).
    done = iter(run_sources(sources, selected, fix, want_diff, jobs, progress, cache_dir,
                            timeout_per_file, fix_texts=fix_texts and not fix))
    for label, path, problem in inputs:
        if problem is not None:
            report.failed.append({"path": label, "error": problem})
            continue
        if graphio.is_graph_path(path):
            with collector_paused():
                run_graph(label, path, selected, fix, report, outputs, out, in_place,
                          want_diff, len(graph_inputs))
        elif path.suffix in SOURCE_SUFFIXES:
            part, part_outputs = next(done)
            _merge(report, part)
            outputs.extend(part_outputs)
        else:
            report.skipped.append({"path": label, "reason": "not a graph (.pb, .pbtxt, .meta, "
                                   "SavedModel directory), a Python file or a notebook"})
    if not graph_inputs and len(inputs) < len(listed):  # (files named for a param, no graph)
        run_files_without_a_graph(selected, fix, want_diff, report, outputs)
    kernels.save_snapshot()  # (a run that stops on an error keeps nothing: TF is asked again)
    refuse_overwriting_inputs(report, outputs, [p for _, p, problem in inputs if not problem])
    return report, outputs


def _merge(report: Report, part: Report) -> None:
    for field in Report.__slots__:  # every one a list
        getattr(report, field).extend(getattr(part, field))
