"""Running transforms over inputs: graphs and sources, checked or fixed, never half-written.

`run` takes the paths given on the command line and returns a `Report` plus the outputs it
would write; `write_outputs` writes them only once every input succeeded, each atomically.
"""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path
from typing import Any, Sequence

from graphfix.graph import graphfile as graphio
from graphfix.graph import kernels
from graphfix.graph import placement
from graphfix.findings import Change, Finding, Report
from graphfix.graph.index import GraphError, GraphIndex, index_for
from graphfix.registry import Context, Transform, options_for
from graphfix.source.files import NOTEBOOK_SUFFIX, SOURCE_SUFFIXES, excluded, walk_sources
from graphfix.storage import RefusedWrite, StagedWrites, path_problem, writable_target


class Selected:
    """The transforms of one run, each with its options."""

    def __init__(self, transforms: list[tuple[type[Transform], dict[str, Any]]],
                 target_devices: tuple[str, ...] = ()):
        self.transforms = transforms
        self.target_devices = target_devices

    @classmethod
    def build(cls, transforms: list[type[Transform]], settings: dict, target_devices=()):
        return cls([(t, options_for(t, settings)) for t in transforms], tuple(target_devices))


def apply_to_graph(graph_def, meta_graph, label: str, selected: Selected, *, fix: bool,
                   soft_placement: bool = False
                   ) -> tuple[list[Finding], list[Change], GraphIndex]:
    """Check or fix one GraphDef in place (the caller owns it). GraphError on bad structure.
    `soft_placement`: the graph's session places it with soft placement (`Context`).

    One index serves every transform: edits go through it, so it stays current; what each
    transform added (nodes, edges) is checked before the next runs. A transform's findings
    are all read before its first edit runs (`Transform.graph`). A fixed graph is placed
    again by the same model (`_InputState.recheck`): GraphError if TF would refuse it where
    it did not refuse the input, so nothing of it is written.
    """
    findings: list[Finding] = []
    changes: list[Change] = []
    index = index_for(graph_def, meta_graph)
    input_state = None  # (kept once an edit is about to run: `_InputState`)
    for transform_class, options in selected.transforms:
        if "graph" not in transform_class.surfaces():
            continue
        ctx = Context(label, options, selected.target_devices, explain=not fix,
                      soft_placement=soft_placement)
        found = list(transform_class().graph(index, ctx))
        for item in found:
            if not isinstance(item, Finding) and not callable(item):
                raise TypeError(f"{transform_class.name} found {type(item).__name__}, "
                                "not a Finding or an edit")
        if not fix:
            for finding in found:
                if isinstance(finding, Finding):
                    finding.edit = None  # (it holds the index, which the caller never sees)
                    findings.append(finding)
            continue
        edits = [item.edit if isinstance(item, Finding) else item for item in found]
        edits = [edit for edit in edits if edit is not None]
        if edits and input_state is None:
            input_state = _InputState(index)
        if edits:  # (an error's edit claims to fix what the error names)
            input_state.claimed.update(item.node for item in found if isinstance(item, Finding)
                                       and item.severity == "error" and item.edit is not None)
        for edit in edits:
            changes.extend(edit(index))
        try:
            index.check_changes()
        except GraphError as exc:
            raise GraphError(f"{transform_class.name} left a broken graph: {exc}") from None
    if changes and input_state is not None:
        input_state.recheck(index, selected, soft_placement)
    return findings, changes, index


class _InputState:
    """What placement depends on in a graph about to be fixed, kept to re-check the fixed
    graph against (`recheck`): each node's device, the body nodes' devices, how many nodes
    there were. Placing the whole graph again, before and after, would be a large share of
    a `fix` of a large graph: only the groups the edits touched are placed again, and the
    input only where the fixed graph has a refusal there."""

    def __init__(self, index: GraphIndex):
        self.devices = list(index.devices)
        self.count = len(index)
        self.bodies = _body_devices(index)
        self.claimed: set[str] = set()  # the nodes of the error findings whose edits ran

    def recheck(self, index: GraphIndex, selected: Selected, soft_placement: bool) -> None:
        """GraphError naming the node TF would refuse where the fixed graph (`index`) has
        a placement error the input did not have, or still has one in a group an error's
        edit claimed to fix (`claimed`): "a fix never turns a graph TF places into one it
        refuses", so such a graph is not written."""
        touched = [p for p, (old, new) in enumerate(zip(self.devices, index.devices))
                   if old != new]
        touched += range(self.count, len(index))
        touched += index.rewired
        bodies = _body_devices(index)
        body_moves = {key: device for key, device in self.bodies.items()
                      if bodies.get(key) != device}
        after = _refusals(index, placement.groups_holding(index, touched), selected,
                          soft_placement, functions=bool(bodies))
        if not after:
            return
        before = self._refusals_of_input(index, touched, body_moves, selected, soft_placement)
        for key, problem in after.items():
            if key not in before or problem.group.anchor in self.claimed:
                where = f"{key[0]}/{key[1]}" if key[0] else key[1]
                still = "still " if key in before else ""
                raise GraphError(f"the fix would leave a graph TF {still}refuses at {where}: "
                                 f"{problem.message}; nothing written")

    def _refusals_of_input(self, index, touched, body_moves, selected, soft_placement):
        """`_refusals` of the touched groups as they were: their devices put back for the
        while (the nodes edits added left out), then the fixed ones again."""
        fixed = {p: index.devices[p] for p in touched if p < self.count}
        nodes = _body_nodes(index)
        fixed_bodies = {key: nodes[key].device for key in body_moves}
        try:
            for position in fixed:
                index.set_device(position, self.devices[position])
            for key, device in body_moves.items():
                nodes[key].device = device
            return _refusals(index, placement.groups_holding(
                index, [p for p in touched if p < self.count], within=self.count),
                selected, soft_placement, functions=bool(nodes))
        finally:
            for position, device in fixed.items():
                index.set_device(position, device)
            for key, device in fixed_bodies.items():
                nodes[key].device = device


def _body_nodes(index: GraphIndex) -> dict[tuple[str, str], Any]:
    return {(f.signature.name, n.name): n for f in index.graph_def.library.function
            for n in f.node_def}


def _body_devices(index: GraphIndex) -> dict[tuple[str, str], str]:
    return {key: node.device for key, node in _body_nodes(index).items()}


def _refusals(index: GraphIndex, groups: list, selected: Selected, soft_placement: bool,
              functions: bool) -> dict[tuple, placement.PlacementProblem]:
    """What TF's placer would refuse of `groups` (and, with `functions`, of the function
    bodies) for the run's target devices, by (function or None, the node TF names, kind)."""
    found = placement.problems(index, groups, targets=selected.target_devices,
                               functions=functions, soft_placement=soft_placement)
    return {(getattr(p.group, "function", None), p.node, p.kind): p
            for p in found if p.refused}


def graph_diff(before, after) -> list[str]:
    """A readable node-level diff of two GraphDefs."""
    old = {n.name: n for n in before.node}
    new = {n.name: n for n in after.node}
    lines = []
    for name, node in new.items():
        if name not in old:
            lines.append(f"+ {name} ({node.op}) on {node.device or 'any device'}")
            continue
        prev = old[name]
        if prev.device != node.device:
            lines.append(f"~ {name}: device {prev.device or '(none)'} -> {node.device or '(none)'}")
        if list(prev.input) != list(node.input):
            added = [i for i in node.input if i not in prev.input]
            removed = [i for i in prev.input if i not in node.input]
            parts = [f"+{i}" for i in added] + [f"-{i}" for i in removed]
            lines.append(f"~ {name}: inputs {' '.join(parts)}")
        if prev.attr != node.attr:
            changed = sorted(k for k in set(prev.attr) | set(node.attr)
                             if prev.attr.get(k) != node.attr.get(k))
            lines.append(f"~ {name}: attrs {', '.join(changed)}")
    for name, node in old.items():
        if name not in new:
            lines.append(f"- {name} ({node.op})")
    return lines


def iter_inputs(paths: list[str], excludes: tuple[str, ...] | list[str] = ()
                ) -> list[tuple[str, Path, str | None]]:
    """(label as given, path, why it cannot be read or None) for every graph and source the
    paths name, in order; what cannot be read (a symlink loop, a FIFO, a directory that
    cannot be listed, ...) is found without opening it (`graphfix.storage.path_problem`).

    A directory gives its Python files and notebooks (see `graphfix.source.files.walk_sources`: no hidden
    folders, virtual environments, node_modules, git-ignored files, nor `excludes`); a file
    named explicitly is read unless `excludes` matches the path as given or its name.
    """
    out: list[tuple[str, Path, str | None]] = []
    for given in paths:
        path = Path(given)
        problem = path_problem(path)
        if problem is None and path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
            problem = "cannot read directory: permission denied"
        if problem is not None:
            out.append((given, path, problem))
        elif path.is_dir() and not graphio.is_graph_path(path):
            try:
                found = walk_sources(path, excludes)
            except OSError as exc:
                where = exc.filename or given
                out.append((str(where), Path(where),
                            f"cannot read directory: {(exc.strerror or str(exc)).lower()}"))
                continue
            out.extend((str(sub), sub, path_problem(sub)) for sub in found)
        elif not (excludes and excluded(path.as_posix(), excludes, path.resolve().as_posix())):
            out.append((given, path, None))
    return out


def give_files_to_params(inputs: list[tuple[str, Path, str | None]], selected: Selected,
                         *, with_graph: bool | None = None
                         ) -> tuple[list[tuple[str, Path, str | None]], Selected]:
    """The inputs without the files a selected transform's param takes (`Param.files`, such
    as stateful-custom-ops' C++ `sources`), and the run's transforms with those files added
    to that param: each named on the command line, then, in a run with a graph, each found
    in the folder of a Python source or notebook given, in order, once. A file no selected
    param takes stays an input (reported as skipped). `with_graph`: whether the run has a
    graph (default: whether a graph file is among the inputs; a traced script's run has
    the graph it builds)."""
    if not any(param.files for transform, _ in selected.transforms for param in transform.params):
        return inputs, selected
    named = [path for _, path, problem in inputs if problem is None]
    beside = []
    # (Found beside the sources only for a graph of the run to be read with: a run of
    # sources alone leaves the C++ of their folders unread.)
    if with_graph is None:
        with_graph = any(graphio.is_graph_path(path) for path in named)
    for folder in dict.fromkeys(path.parent for path in named
                                if with_graph and path.suffix in SOURCE_SUFFIXES):
        try:
            beside += [sub for sub in sorted(folder.iterdir()) if sub.is_file()]
        except OSError:
            continue  # (a folder that cannot be listed: its named files are still read)
    taken: set[Path] = set()
    transforms = []
    for transform, options in selected.transforms:
        options = dict(options)
        for param in transform.params:
            if not param.files:
                continue
            found = [p for p in (*named, *beside) if p.name.endswith(param.files)]
            taken.update(found)
            given = list(options.get(param.name) or [])
            options[param.name] = list(dict.fromkeys(
                [*given, *(str(p) for p in found if str(p) not in given)]))
        transforms.append((transform, options))
    kept = [item for item in inputs if item[2] is not None or item[1] not in taken]
    return kept, Selected(transforms, selected.target_devices)


def _run_files_without_a_graph(selected: Selected, fix: bool, want_diff: bool, report: Report,
                               outputs: list[Output]) -> None:
    """What a transform does to the files its params took (`Param.files`) in a run with no
    graph: its graph entry point over an empty graph, where only what needs no graph is
    left (stateful-custom-ops: `.SetIsStateful()` for the ops the user names)."""
    from graphfix.graph import proto

    takers = [(transform, options) for transform, options in selected.transforms
              if any(param.files and options.get(param.name) for param in transform.params)]
    if not takers:
        return
    try:
        findings, changes, _ = apply_to_graph(proto.GraphDef(), None, "<no graph>",
                                              Selected(takers, selected.target_devices),
                                              fix=fix)
    except ValueError as exc:  # (a file that cannot be read: one line naming it)
        path, _, error = str(exc).partition(": ")
        report.failed.append({"path": path, "error": error})
        return
    report.findings.extend(findings)
    report.changes.extend(changes)
    rewritten = rewritten_files(changes, want_diff)
    report.changed_paths.extend(output.label for output in rewritten)
    taken = [path for transform, options in takers for param in transform.params
             if param.files for path in options.get(param.name) or ()]
    report.unchanged_paths.extend(path for path in dict.fromkeys(taken)
                                  if path not in report.changed_paths)
    outputs.extend(rewritten)


class Output:
    """A file a fix would write: where, what, and for a SavedModel the loaded file."""

    def __init__(self, label: str, target: Path | None, data: bytes | None = None,
                 graph_file: graphio.GraphFile | None = None, diff: list[str] | None = None):
        self.label = label
        self.target = target
        self.data = data
        self.graph_file = graph_file
        self.diff = [] if diff is None else diff


def rewritten_files(changes: list[Change], want_diff: bool = False) -> list[Output]:
    """The `Output`s of the files other than the graph that a graph fix rewrote
    (stateful-custom-ops' C++: a Change whose details carry `file` and its new `text`), to be
    written with the graph's outputs, all or none (`write_outputs`), by `run` and by a fix of
    a traced graph alike; the text leaves the Change (the report names the file). With
    `want_diff`, each carries its unified diff against the file as it is."""
    import difflib

    rewritten = []
    for change in changes:
        if "file" in change.details and "text" in change.details:
            text = change.details.pop("text")
            target = Path(change.details["file"])
            diff = []
            if want_diff:
                diff = list(difflib.unified_diff(
                    target.read_text(encoding="utf-8").splitlines(keepends=True),
                    text.splitlines(keepends=True), *_diff_labels(change.path)))
            rewritten.append(Output(change.path, target, data=text.encode("utf-8"),
                                    diff=diff))
    return rewritten


def _diff_labels(label: str) -> tuple[str, str]:
    """git's a/ b/ prefixes for a relative path; an absolute path is shown as it is."""
    return (label, label) if Path(label).is_absolute() else (f"a/{label}", f"b/{label}")


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
    sources = [(label, path) for label, path, problem in inputs
               if problem is None and path.suffix in SOURCE_SUFFIXES
               and not graphio.is_graph_path(path)]
    # Sources first, before anything may load the TF runtime (its threads and fork do not mix).
    done = iter(_run_sources(sources, selected, fix, want_diff, jobs, progress, cache_dir,
                             timeout_per_file, fix_texts=fix_texts and not fix))
    for label, path, problem in inputs:
        if problem is not None:
            report.failed.append({"path": label, "error": problem})
            continue
        if graphio.is_graph_path(path):
            with collector_paused():
                _run_graph(label, path, selected, fix, report, outputs, out, in_place,
                           want_diff, len(graph_inputs))
        elif path.suffix in SOURCE_SUFFIXES:
            part, part_outputs = next(done)
            _merge(report, part)
            outputs.extend(part_outputs)
        else:
            report.skipped.append({"path": label, "reason": "not a graph (.pb, .pbtxt, .meta, "
                                   "SavedModel directory), a Python file or a notebook"})
    if not graph_inputs and len(inputs) < len(listed):  # (files named for a param, no graph)
        _run_files_without_a_graph(selected, fix, want_diff, report, outputs)
    kernels.save_snapshot()  # (a run that stops on an error keeps nothing: TF is asked again)
    _refuse_overwriting_inputs(report, outputs, [p for _, p, problem in inputs if not problem])
    return report, outputs


def _refuse_overwriting_inputs(report: Report, outputs: list[Output], inputs: list[Path]) -> None:
    """A failure for each graph output that would land on another input of the run (`fix
    g.pb s.py -o s.py`), found before anything is written."""
    read = {os.path.realpath(p): p for p in inputs}
    for output in outputs:
        if output.graph_file is None:
            continue
        real = os.path.realpath(output.target)
        if real != os.path.realpath(output.graph_file.path) and real in read:
            report.failed.append({"path": output.label, "error": f"its output {output.target} "
                                  f"is the input {read[real]}"})


def _merge(report: Report, part: Report) -> None:
    for field in Report.__slots__:  # every one a list
        getattr(report, field).extend(getattr(part, field))


# What every worker process needs, set in the parent before the pool forks (not pickled).
_JOB: dict[str, Any] = {}


class _Survey:
    """What the cheap steps say of one source file, before libcst: the text pre-filter, then
    the stdlib parser's pre-check (both from `Transform.source_triggers`, by
    `graphfix.source.prefilter`), and the file's part of the project model
    (`graphfix.source.project.file_part`), packed (`pack_part`): the run's process holds
    every file's survey."""

    __slots__ = ("work", "parsed", "part")

    def __init__(self, work: tuple[str, ...] = (), parsed: bool = True,
                 part: bytes | None = None):
        self.work = work  # transforms whose codemod may have work in it, in run order
        self.parsed = parsed  # False: Python cannot parse it (libcst then says why it is skipped)
        self.part = part  # its packed part of the project model (None: Python cannot parse it)

    def to_json(self) -> dict:
        import base64

        from graphfix.source.project import PART_FORMAT

        return {"work": self.work, "parsed": self.parsed, "part_format": PART_FORMAT,
                "part": None if self.part is None else base64.b64encode(self.part).decode()}

    @classmethod
    def from_json(cls, doc: dict) -> _Survey | None:
        """The survey `to_json` gave `doc` for; None if `doc` is not one (a damaged entry)."""
        import base64
        import zlib

        from graphfix.source.project import PART_FORMAT

        try:
            part = None if doc["part"] is None else base64.b64decode(doc["part"],
                                                                    validate=True)
            survey = cls(tuple(doc["work"]), bool(doc["parsed"]), part)
            if part is not None:
                zlib.decompress(part)  # (an entry cut short or altered: a miss)
        except (KeyError, TypeError, ValueError, zlib.error):
            return None
        if doc.get("part_format") != PART_FORMAT:
            return None
        return survey if all(isinstance(n, str) for n in survey.work) else None


def _run_sources(sources, selected, fix, want_diff, jobs, progress, cache_dir=None,
                 timeout: float | None = None, fix_texts: bool = False) -> list:
    """[(Report, [Output])] for each source file, in order. Two passes over the files, by
    `jobs` forked processes: a survey without libcst (which codemods may have work in each
    file, and its part of the project model), then, once the model is joined here, the
    codemods where they have work. The workers are forked once, before the model exists:
    each file reaches its worker with the parts of the files its queries may read
    (`Project.subproject`), sent once for a run of files that share them, so a worker holds
    one closure's parts, never the whole model. (A worker's peak memory is that of the
    biggest file it parses, so the run's is `jobs` times that.) A file whose worker fails
    (crashes, or outlives `timeout` seconds) is that file's error."""
    if not sources:
        return []
    cache = None
    if cache_dir is not None:
        from graphfix.source.cache import SourceCache

        cache = SourceCache.open(cache_dir, selected.transforms)
    workers = min(jobs or 1, len(sources))
    # The bar counts files checked: the survey before it is the short part.
    tick = progress(len(sources)) if progress is not None else None
    _JOB.clear()
    _JOB.update(selected=selected, fix=fix, want_diff=want_diff, cache=cache, parts=None,
                project=None, paths=dict(sources), fix_texts=fix_texts)
    with contextlib.ExitStack() as stack:
        try:
            # (a run the cache answers whole, a warm check, forks no workers to read it)
            surveys = []
            for item in sources if cache is not None else ():
                survey = _cached_survey(item)
                if survey is None:
                    break
                surveys.append(survey)
            pool = None
            if len(surveys) < len(sources):
                pool = stack.enter_context(_Workers(workers, timeout, _failed_pass(selected)))
                surveys = pool.map(_survey_one, sources)
            from graphfix.source.project import PackedParts, Project

            project = Project(PackedParts({label: survey.part
                                           for (label, _), survey in zip(sources, surveys)
                                           if survey.part is not None}))
            items = [(label, path, survey.work,
                      project.context_digest(label) if survey.work else "")
                     for (label, path), survey in zip(sources, surveys)]
            answered = cache is not None and all(_cached_result(item) for item in items)
            if answered or pool is None:
                pool = stack.enter_context(_Workers(1 if answered else workers, timeout,
                                                    _failed_pass(selected)))
            states: dict[int, dict] = {}  # one state a closure (workers are sent it once)

            def state(item) -> dict | None:
                if not item[2]:  # no work: its file reads no other file's part
                    return None
                parts = project.subproject(item[0])
                return states.setdefault(id(parts), {"parts": parts})

            return pool.map(_source_one, items, tick, state=state, prepare=_prepare_sources)
        finally:
            _JOB.clear()
            if cache is not None:
                cache.prune()  # (at most once a day: entries no run used for 30 days)


def _project():
    """The project model of the file at hand, built from the parts it came with (once for
    a run of files that came with the same parts)."""
    from graphfix.source.project import Project

    parts = _JOB.get("parts")
    if parts is None:
        return None
    if _JOB.get("project_of") is not parts:
        paths = _JOB["paths"]
        _JOB["project"] = Project(parts.unpacked(), lambda label: _source_code(paths[label]))
        _JOB["project_of"] = parts
    return _JOB["project"]


def _work_in_project(project, label: str, work: tuple[str, ...], selected: Selected
                     ) -> tuple[str, ...]:
    """The transforms of a file's survey that still have work in it once the project model
    is known (`SourceTriggers.in_project`: update-ops, where a batch norm reaches it)."""
    from graphfix.source.prefilter import in_project

    if not work or project is None:
        return work
    transforms = {t.name: t for t, _ in selected.transforms}
    view = project.view(label)
    return tuple(name for name in work if in_project(transforms[name], view))


def _failed_pass(selected: Selected):
    """What a pass goes on with for a file whose worker failed: its survey sends it to the
    codemods (which fail on it again, or say why it is skipped), its scan found nothing,
    its codemods' result is the failure."""
    every = tuple(t.name for t, _ in selected.transforms if t.codemod is not None)

    def failed(function, item, error: str):
        if function is _survey_one:
            return _Survey(work=every, parsed=False)
        return Report(failed=[{"path": item[0], "error": error}]), []

    return failed


class _Workers:
    """`workers` forked processes for all the passes of a run (one: this process). What a
    pass learned after they were forked travels with the items that need it. With workers,
    a file's work never takes the run down:
    an exception, a worker that dies (libcst's parser can crash the process) or one that
    outlives `timeout` seconds on one item is that item's failure, given to `failed(function,
    item, error)` for the value the pass goes on with; a dead or stopped worker is replaced."""

    def __init__(self, workers: int, timeout: float | None = None, failed=None):
        self.workers, self.timeout = max(1, workers), timeout
        self.failed = failed if failed is not None else _raise_failure
        self.running: list[_Worker] = []

    def __enter__(self) -> _Workers:
        if self.workers > 1:  # (one job runs here: no fork, and what it imports is kept)
            self.running = [_Worker() for _ in range(self.workers)]
        return self

    def __exit__(self, *exc) -> None:
        for worker in self.running:
            worker.stop(gently=exc[0] is None)
        self.running = []

    def map(self, function, items: list, tick=None, state=lambda item: None,
            prepare=None) -> list:
        """`[function(item) for item in items]`, each after `_JOB.update(state(item))`, in
        order, whatever worker ran it; a failed item gives `failed(function, item, error)`.
        `prepare()`, if given, runs once in each forked worker before its first item of the
        map (what every item needs, such as imports): the per-item time limit counts from
        its end, so a worker's start-up is no one file's time. (One job runs here, untimed
        and unprepared: a warm run imports only what its items need.)"""
        import collections
        import time

        calls = [(function, state(item), item) for item in items]
        if not self.running:
            return [_ticked(self._here(call), tick) for call in calls]
        # Imported only with workers running: a warm run, all cached, forks none.
        from multiprocessing.connection import wait

        results: list = [None] * len(calls)
        waiting = collections.deque(range(len(calls)))
        chunk = max(1, min(16, len(calls) // (self.workers * 4)))
        while True:
            for worker in self.running:
                if not worker.in_flight and waiting:
                    taken = [waiting.popleft() for _ in range(min(chunk, len(waiting)))]
                    worker.send(taken, [worker.unless_sent(calls[i]) for i in taken],
                                prepare)
            busy = [w for w in self.running if w.in_flight]
            if not busy:
                return results
            now = time.monotonic()
            timed = [w.since for w in busy if w.prepared is prepare]
            limit = None if self.timeout is None or not timed else max(
                0.0, min(timed) + self.timeout - now)
            ready = wait([w.connection for w in busy], limit)
            for worker in busy:
                if worker.connection in ready:
                    answer = worker.receive()
                    if answer is _PREPARED:
                        worker.prepared = prepare
                        continue
                    if answer is not None:
                        ok, value = answer
                        index = worker.in_flight.popleft()
                        results[index] = value if ok else self.failed(function, items[index],
                                                                      value)
                        _ticked(None, tick)
                        continue
                    error = worker.crash_reason()
                elif (self.timeout is not None and worker.prepared is prepare
                      and time.monotonic() - worker.since > self.timeout):
                    error = f"took longer than {self.timeout:g} s (--timeout-per-file)"
                else:
                    continue
                index = worker.in_flight.popleft()
                waiting.extendleft(reversed(worker.in_flight))  # the rest of its chunk
                worker.stop(gently=False)
                self.running[self.running.index(worker)] = _Worker()
                results[index] = self.failed(function, items[index], error)
                _ticked(None, tick)


    def _here(self, call):
        """One call in this process (one job): an exception is still the item's failure;
        a crash or a stall is not bounded here (`--jobs 2` or more isolates them)."""
        try:
            return _call(call)
        except Exception as exc:
            return self.failed(call[0], call[2], f"internal error: {type(exc).__name__}: {exc}")


def _raise_failure(function, item, error):
    raise RuntimeError(f"{getattr(function, '__name__', function)}: {error}")


class _Worker:
    """One forked process of `_Workers`, and the indices of the items it is running."""

    def __init__(self):
        import collections
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs,), daemon=True)
        self.process.start()
        theirs.close()
        self.in_flight: collections.deque[int] = collections.deque()
        self.since = 0.0  # when its current item began
        self.last_state = None  # the state it was sent last (`unless_sent`)
        self.prepared = None  # the `prepare` it has run (its map's, or None)

    def unless_sent(self, call):
        """`call` without its state where it has none or the state is the one this worker
        was sent last (it keeps it: a closure's parts travel once for a run of its files,
        however many files without work come between them)."""
        function, state, item = call
        if state is None or state is self.last_state:  # (None: the item needs none)
            return function, None, item
        self.last_state = state
        return call

    def send(self, indices: list[int], calls: list, prepare=None) -> None:
        """Items to run, after `prepare()` where this worker has not run it yet (it then
        answers `_PREPARED` first)."""
        import time

        self.in_flight.extend(indices)
        self.since = time.monotonic()
        self.connection.send((None if prepare is self.prepared else prepare, calls))

    def receive(self):
        """(ok, value) of its current item, or `_PREPARED`; None if it died."""
        import time

        try:
            answer = self.connection.recv()
        except (EOFError, OSError):
            return None
        self.since = time.monotonic()
        return _PREPARED if answer == _PREPARED else answer

    def crash_reason(self) -> str:
        import signal

        self.process.join(5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"graphfix's worker reading it crashed ({name}); not parsed"
        return f"graphfix's worker reading it stopped (exit code {code}); not parsed"

    def stop(self, *, gently: bool) -> None:
        if gently and self.process.is_alive():
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


def _serve(connection) -> None:
    """A worker's loop: calls in, one (ok, result or error) out per call, until told to end.
    Ctrl-C is the parent's to handle (it stops the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        prepare, calls = message
        if prepare is not None:
            prepare()  # (a failure here is each item's, below)
            connection.send(_PREPARED)
        for call in calls:
            try:
                answer = (True, _call(call))
            except Exception as exc:
                answer = (False, f"internal error: {type(exc).__name__}: {exc}")
            try:
                connection.send(answer)
            except Exception as exc:  # a result that cannot be pickled
                connection.send((False, f"internal error: {type(exc).__name__}: {exc}"))


# A worker's answer that it has run its map's `prepare`: its items' clock starts now.
_PREPARED = "prepared"


def _prepare_sources() -> None:
    """What every file of the codemod pass needs, imported once in each worker before its
    first file is timed: libcst and the run's codemods."""
    try:
        _codemods(_JOB["selected"])
    except Exception:  # the file that needs a broken codemod reports it
        pass


def _call(call):
    function, state, item = call
    if state:
        _JOB.update(state)
    return function(item)


def _ticked(result, tick):
    if tick is not None:
        tick()
    return result


def _codemods(selected: Selected, names=None) -> list:
    """[(codemod class, options)] of the run's transforms that have a source surface (of
    those `names`, if given); this imports libcst: only for a file that must be parsed."""
    return [(t.source_codemod(), o) for t, o in selected.transforms
            if t.codemod is not None and (names is None or t.name in names)]


def _survey_one(item) -> _Survey:
    """Which codemods may have work in one file, and which facts it may hold or want."""
    label, path = item
    try:
        raw = path.read_bytes()
    except OSError:
        return _Survey()  # failed later, with its reason
    code = _code_text(path, raw)
    if code is None:
        return _Survey()  # skipped later, with its reason
    cache = _JOB["cache"]
    key = cache.survey_key(label, raw) if cache is not None else None
    if key is not None:
        cached = cache.load_survey(key)
        survey = _Survey.from_json(cached) if cached is not None else None
        if survey is not None:
            return survey
    survey = _survey_code(code, [t for t, _ in _JOB["selected"].transforms])
    if key is not None:
        cache.store_survey(key, survey.to_json())
    return survey


def _cached_survey(item) -> _Survey | None:
    """The survey of a source file (`item`: label, path) the cache holds, if it does."""
    label, path = item
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    cached = _JOB["cache"].load_survey(_JOB["cache"].survey_key(label, raw))
    return _Survey.from_json(cached) if cached is not None else None


def _survey_code(code: str, transforms: list[type[Transform]]) -> _Survey:
    """The survey of one file's code (see `_Survey`) for `transforms`: the central
    pre-filter (`graphfix.source.prefilter`), then what the scanning rules with work want."""
    from graphfix.source.prefilter import prefilter

    found = prefilter(code, transforms)
    work = tuple(t.name for t in found.work)
    if not found.parsed:  # the codemods (libcst) say why it is skipped
        return _Survey(work=work, parsed=False)
    return _Survey(work=work, part=_part(code, found.syntax))


def _part(code: str, syntax) -> bytes | None:
    """The file's part of the project model, packed, from the pre-filter's parse if it made
    one."""
    from graphfix.source.project import file_part, pack_part, part_of_code
    from graphfix.source.syntax import beyond_size_limits

    if syntax is not None:
        return pack_part(file_part(syntax.tree, code))
    if beyond_size_limits(code) is not None:
        return None
    part = part_of_code(code)
    return None if part is None else pack_part(part)


def _source_code(path: Path) -> str | None:
    """A source file's code as the codemods see it; None if it cannot be read."""
    try:
        return _code_text(path, path.read_bytes())
    except OSError:
        return None


def _code_text(path: Path, raw: bytes) -> str | None:
    """The Python code the codemods see in a source file (a notebook's cells as one module);
    None where there is none (not decodable, not a notebook)."""
    from graphfix.source.notebooks import NotebookError, notebook_code
    from graphfix.source.syntax import SourceDecodeError, decode_source

    try:
        return notebook_code(raw) if path.suffix == NOTEBOOK_SUFFIX else decode_source(raw)[0]
    except (SourceDecodeError, NotebookError):
        return None


def _source_one(item) -> tuple[Report, list[Output]]:
    label, path, work, context = item
    report, outputs = Report(), []
    try:
        _run_source(label, path, _JOB["selected"], _JOB["fix"], report, outputs,
                    _JOB["want_diff"], _JOB["cache"], work, context, _JOB["fix_texts"])
    except Exception as exc:  # a codemod's bug must not hide the other files' results
        report = Report(failed=[{"path": label,
                                 "error": f"internal error: {type(exc).__name__}: {exc}"}])
        outputs = []
    return report, outputs


def _graph_target(label: str, path: Path, out: str | None, in_place: bool, count: int) -> Path:
    """Where a fixed graph goes: back to `path`, to `out`, or into the directory `out` (for
    several graphs, or one file and `out` a directory that is not a SavedModel)."""
    if in_place or out is None:
        return path
    target = Path(out)
    if count > 1:
        return target / path.name
    if path_problem(target) is None and target.is_dir() and not path.is_dir() \
            and not graphio.is_graph_path(target):
        return target / path.name
    return target


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while a graph is read, indexed and
    transformed: the index and the findings are millions of small objects in no cycle,
    which the collector would walk again and again; reference counting still frees them.
    The one speed trick left (docs/benchmarks.md, "Speed tricks": it alone pays more than
    15% of `graphfix fix` on the 1M-node graph)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _run_graph(label, path, selected, fix, report, outputs, out, in_place, want_diff, count):
    try:
        graph_file = graphio.load(path)
    except graphio.InputError as exc:
        report.failed.append({"path": label, "error": str(exc).removeprefix(f"{path}: ")})
        return
    before = None
    if want_diff:
        before = [type(g)() for g, _ in graph_file.graph_defs()]
        for copy, (g, _) in zip(before, graph_file.graph_defs()):
            copy.CopyFrom(g)
    try:
        for graph_def, meta in graph_file.graph_defs():
            findings, changes, index = apply_to_graph(graph_def, meta, label, selected, fix=fix)
            report.findings.extend(findings)
            report.changes.extend(changes)
            outputs.extend(rewritten_files(changes, want_diff))
            if not fix:
                lines = placement.summary(index)
                report.notes.append(f"{label}: placement: " + "; ".join(lines))
    except (GraphError, ValueError) as exc:
        report.failed.append({"path": label, "error": str(exc)})
        return
    except kernels.NoGpuKernelsError:
        raise  # this TensorFlow, not this graph: the command says so and stops
    except Exception as exc:  # a transform's bug must not hide the other inputs' results
        report.failed.append({"path": label, "error": f"internal error: {type(exc).__name__}: {exc}"})
        return
    changed = fix and any(c.path == label for c in report.changes)
    (report.changed_paths if changed else report.unchanged_paths).append(label)
    if fix:
        diff = []
        if before is not None:
            for old, (new, _) in zip(before, graph_file.graph_defs()):
                diff.extend(graph_diff(old, new))
        target = _graph_target(label, path, out, in_place, count)
        if changed or target != path:
            outputs.append(Output(label, target, graph_file=graph_file, diff=diff))


def _cached_result(item) -> bool:
    """Whether the cache holds what `_run_source` would give for `item`."""
    label, path, work, context = item
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    code = _code_text(path, raw)
    key = _JOB["cache"].result_key(label, raw, code, work, context)
    cached = _JOB["cache"].load_result(key) if key is not None else None
    return _answers(cached, _JOB["fix"], _JOB["fix_texts"] and _has_text(path, code))


def _has_text(path: Path, code: str | None) -> bool:
    """Whether a source's fix can be given as text: a Python file, decoded (a notebook's
    findings count lines within their cell)."""
    return code is not None and path.suffix != NOTEBOOK_SUFFIX


def _answers(cached, fix: bool, fix_text: bool) -> bool:
    """Whether a cached result (`graphfix.source.cache.CachedResult`, None: a miss) is what
    `_run_source` would give: a check's findings, with the text `fix` would write where
    `fix_text` wants it and a finding is fixable; for a fix, a file it leaves as it is."""
    if cached is None:
        return False
    if fix:
        return cached.nothing_to_fix
    return not fix_text or cached.fixed is not None or not any(
        finding.fixable for finding in cached.findings)


def _run_source(label, path, selected, fix, report, outputs, want_diff, cache, work,
                context="", fix_texts=False):
    """Check or fix one source file with the codemods that have `work` in it (the survey's;
    the project model may leave fewer, asked only where the cache does not answer: what it
    says follows from the parts the key holds, `context`: `Project.context_digest`).
    `fix_texts` (a check): a Python file with a fixable finding also gives the output `fix`
    would write (`run`)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        report.failed.append({"path": label, "error": f"cannot read: {exc.strerror or exc}"})
        return
    code = _code_text(path, raw)
    fix_text = fix_texts and _has_text(path, code)
    key = cache.result_key(label, raw, code, work, context) if cache is not None else None
    cached = cache.load_result(key) if key is not None else None
    if _answers(cached, fix, fix_text):
        report.cached_paths.append(label)
        if cached.skipped is not None:
            report.skipped.append({"path": label, "reason": cached.skipped})
        else:
            report.findings.extend(cached.findings)
            report.unchanged_paths.append(label)
            if fix_text:
                outputs.extend(_fixed_output(label, path, raw, cached.fixed))
        return
    # The model, where the cache does not answer and the survey left work (a file without
    # is sent no parts); a file that cannot be decoded is a project of its own.
    project = _project() if code is not None and work else None
    if project is not None:
        work = _work_in_project(project, label, work, selected)
    if code is not None and not work:
        # No codemod has work here (the pre-checks, the model): libcst never sees it.
        if key is not None:
            cache.store_result(key, [], None)
        report.unchanged_paths.append(label)
        return
    from graphfix.source.notebooks import run_notebook
    from graphfix.source.run import run_source

    codemods = _codemods(selected, None if code is None else work)
    view = project.view(label) if project else None
    fixed = None  # the text `fix` would write (fix_text, a fixable finding)
    if fix_text:
        result, fixed = _checked_and_fixed(raw, label, codemods, view)
    else:
        run_one = run_notebook if path.suffix == NOTEBOOK_SUFFIX else run_source
        result = run_one(raw, label, codemods, fix=fix, project=view)
    result.read = None  # (the tree: the collection below frees it)
    # libcst's tree of the file, its metadata and the codemods that read them are left in
    # reference cycles (tens of thousands of objects for a large file): only a full
    # collection frees them, and one seldom comes, so a process that parsed many files held
    # the garbage of several at once; its peak grew with the number of files it was given.
    gc.collect()
    # A fix that changed nothing found what check finds (every codemod saw the file as it
    # is); one that changed the file, or could not write it back, is not check's result.
    if key is not None and not (fix and (result.changed or result.skipped)):
        cache.store_result(key, result.findings, result.skipped, fixed)
    if result.skipped:
        report.skipped.append({"path": label, "reason": result.skipped})
        return
    report.findings.extend(result.findings)
    if fix and result.changed:
        report.changed_paths.append(label)
        for finding in result.findings:
            if finding.fixable:
                report.changes.append(Change(label, finding.transform, finding.message,
                                             line=finding.line, cell=finding.cell))
        diff = result.unified_diff(*_diff_labels(label)) if want_diff else []
        outputs.append(Output(label, path, data=result.new_bytes, diff=diff))
    else:
        report.unchanged_paths.append(label)
        outputs.extend(_fixed_output(label, path, raw, fixed))


def _checked_and_fixed(raw: bytes, label: str, codemods: list, project
                       ) -> tuple[Any, str | None]:
    """What a check of one Python file gives, and the text `fix` would write for it (None:
    no finding is fixable), with one run of each codemod where that can be: a rule finds
    the same whether it fixes or not and edits only what it reports fixable, so the codemods
    run fixing, and the findings of those up to the first that reports a fixable one (each
    read the file as it is) are the check's; the codemods after it read the fixed file, so
    they are asked once more, not fixing (the file as it is). A fix that fails leaves the
    check's findings, without a text (as a `fix` run of its own would fail on the file)."""
    from graphfix.source.run import run_source
    from graphfix.source.syntax import SourceResult

    try:
        fixing = run_source(raw, label, codemods, fix=True, project=project)
    except Exception:
        return run_source(raw, label, codemods, fix=False, project=project), None
    first = next((f.transform for f in fixing.findings if f.fixable), None)
    if first is None:  # nothing was edited: every codemod read the file as it is
        return fixing, None
    names = [codemod.transform().name for codemod, _ in codemods]
    upto = names.index(first) + 1
    findings = [f for f in fixing.findings if f.transform in names[:upto]]
    if upto < len(codemods):  # (the file as first read: not parsed again)
        findings += run_source(raw, label, codemods[upto:], fix=False, project=project,
                               read=fixing.read).findings
    fixing.read = None
    checked = SourceResult(label, fixing.code, fixing.code, findings,
                           encoding=fixing.encoding)
    return checked, fixing.new_code if fixing.changed else fixing.code


def _fixed_output(label: str, path: Path, raw: bytes, fixed: str | None) -> list[Output]:
    """The output `fix` would write for a Python file whose bytes are `raw`, given its text
    (`fixed`; None: not known); none where that is the file's own."""
    from graphfix.source.syntax import decode_source

    if fixed is None:
        return []
    code, encoding = decode_source(raw)
    return [] if fixed == code else [Output(label, path, data=fixed.encode(encoding))]


def preflight(outputs: list[Output], *, force: bool = False,
              reports: Sequence[tuple[str, Path]] = ()) -> None:
    """Refuse, with an InputError naming the file, before anything is written: an output
    whose directory is missing or cannot be written, a read-only file (unless `force`), a
    FIFO or directory in a file's place, a SavedModel copy into a directory it may not
    replace (`graphfile.check_saved_model_copy`), two outputs (the reports included: each
    (what it is, its path)) to one file. A symlink is written through
    (`graphfix.storage.writable_target`)."""
    seen: dict[str, str] = {}
    for label, target, real in _real_targets(outputs, force, reports):
        if real in seen:
            raise graphio.InputError(f"{target}: both {seen[real]} and {label} would be "
                                     "written to it")
        seen[real] = label


def _real_targets(outputs, force, reports):
    """(what is written, its target, the real path it changes) for each output and
    report."""
    try:
        for output in outputs:
            graph_file = output.graph_file
            if graph_file is None:
                real = writable_target(output.target, force=force)
            elif graph_file.kind != "savedmodel":
                real = writable_target(output.target, force=force)
            elif os.path.realpath(output.target) == os.path.realpath(graph_file.path):
                real = writable_target(output.target / graph_file.proto_name, force=force)
            else:
                real = graphio.check_saved_model_copy(graph_file, output.target, force=force)
            yield output.label, output.target, os.path.realpath(real)
        for label, report_path in reports:
            real = writable_target(report_path, force=force)
            yield label, report_path, os.path.realpath(real)
    except RefusedWrite as exc:
        raise graphio.InputError(str(exc)) from None


def _one_per_file(outputs: list[Output]) -> list[Output]:
    """`outputs` without the fixed sources that repeat an earlier one: the same file reached
    twice (by a symlink beside it in a tree), fixed to the same bytes."""
    kept, written = [], {}
    for output in outputs:
        if output.graph_file is None:
            real = os.path.realpath(output.target)
            if written.get(real, None) == output.data:
                continue
            written.setdefault(real, output.data)
        kept.append(output)
    return kept


def write_outputs(outputs: list[Output], *, force: bool = False,
                  reports: Sequence[tuple[str, Path, bytes]] = ()) -> None:
    """Write every output and each of the `reports` (what it is, as "the --report file",
    its path, its bytes): all staged beside their targets, then renamed into place together
    (`graphfix.storage.StagedWrites`), or, where one cannot be written, none; InputError
    naming the first that fails. `preflight`'s checks come first."""
    outputs = _one_per_file(outputs)
    preflight(outputs, force=force, reports=[(label, path) for label, path, _ in reports])
    with StagedWrites() as staged:
        for output in outputs:
            try:
                if output.graph_file is not None:
                    graphio.stage(output.graph_file, output.target, staged, force=force)
                else:
                    staged.add(writable_target(output.target, force=force), output.data)
            except OSError as exc:
                raise graphio.InputError(f"{output.target}: cannot write: "
                                         f"{exc.strerror or exc}") from None
        for _, report_path, data in reports:
            try:
                staged.add(writable_target(report_path, force=force), data)
            except OSError as exc:
                raise graphio.InputError(f"{report_path}: cannot write: "
                                         f"{exc.strerror or exc}") from None
        try:
            staged.commit()
        except OSError as exc:
            raise graphio.InputError(f"{exc.filename or 'output'}: cannot write: "
                                     f"{exc.strerror or exc}") from None
