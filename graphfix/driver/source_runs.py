"""Source runs: the files of a run checked or fixed by the codemods with work in them.

Two passes over the files by one `WorkerPool` (`run_sources`): a survey without libcst
(which codemods may have work in each file, its part of the project model), then the
codemods, each file sent with the parts of the project model its queries may read. What
every worker needs is the run's `SourceJob`, set before the workers fork (never pickled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from pathlib import Path
from typing import Any, NamedTuple

from graphfix.driver.outputs import Output, _diff_labels
from graphfix.driver.pool import WorkerPool
from graphfix.driver.selection import Selected
from graphfix.findings import Change, Report
from graphfix.registry import Transform
from graphfix.source.files import NOTEBOOK_SUFFIX


class SourceFile(NamedTuple):
    """A source file of the run: its label (as given, or found in a directory given) and
    its path."""

    label: str
    path: Path


class SourceWork(NamedTuple):
    """A source file with what its survey and the project model say of it: the transforms
    whose codemods may have work in it (in run order) and the digest of the parts its
    queries may read (`Project.context_digest`; "" without work)."""

    label: str
    path: Path
    work: tuple[str, ...]
    context: str


@dataclasses.dataclass
class SourceJob:
    """What every worker of a source run needs: the run's settings, set before the workers
    fork, and the project model of the files at hand (`parts`, adopted with the items that
    need them; `project`, built from them once for a run of files that share them)."""

    selected: Selected
    fix: bool
    want_diff: bool
    cache: Any  # graphfix.source.cache.SourceCache, or None: no cache
    fix_texts: bool
    paths: dict[str, Path]  # each source's path by its label
    parts: Any = None  # the parts of the files at hand's closure (`Project.subproject`)
    project: Any = None  # the model built from `project_of`
    project_of: Any = None


# The run's job, set in the parent before the pool forks (not pickled); None between runs.
_job: SourceJob | None = None




class Survey:
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
    def from_json(cls, doc: dict) -> Survey | None:
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


def run_sources(sources: list[SourceFile], selected: Selected, fix: bool, want_diff: bool,
                jobs: int | None, progress, cache_dir: Path | None = None,
                timeout: float | None = None, fix_texts: bool = False
                ) -> list[tuple[Report, list[Output]]]:
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
    global _job
    _job = SourceJob(selected, fix, want_diff, cache, fix_texts, paths=dict(sources))
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
                pool = stack.enter_context(WorkerPool(workers, timeout, _failed_pass(selected),
                                                      adopt=_adopt_parts))
                surveys = pool.map(_survey_one, sources)
            from graphfix.source.project import PackedParts, Project

            project = Project(PackedParts({label: survey.part
                                           for (label, _), survey in zip(sources, surveys)
                                           if survey.part is not None}))
            items = [SourceWork(label, path, survey.work,
                                project.context_digest(label) if survey.work else "")
                     for (label, path), survey in zip(sources, surveys)]
            answered = cache is not None and all(_cached_result(item) for item in items)
            if answered or pool is None:
                pool = stack.enter_context(WorkerPool(1 if answered else workers, timeout,
                                                      _failed_pass(selected),
                                                      adopt=_adopt_parts))

            def state(item: SourceWork):
                # One object a closure (`Project.subproject`): a worker is sent it once.
                # No work: its file reads no other file's part.
                return project.subproject(item.label) if item.work else None

            return pool.map(_source_one, items, tick, state=state, prepare=_prepare_sources)
        finally:
            _job = None
            if cache is not None:
                cache.prune()  # (at most once a day: entries no run used for 30 days)


def _project():
    """The project model of the file at hand, built from the parts it came with (once for
    a run of files that came with the same parts)."""
    from graphfix.source.project import Project

    parts = _job.parts
    if parts is None:
        return None
    if _job.project_of is not parts:
        paths = _job.paths
        _job.project = Project(parts.unpacked(), lambda label: _source_code(paths[label]))
        _job.project_of = parts
    return _job.project


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
            return Survey(work=every, parsed=False)
        return Report(failed=[{"path": item.label, "error": error}]), []

    return failed


def _adopt_parts(parts) -> None:
    """A worker's (or this process's) part of the run's state for the items that follow:
    the parts of the project model their queries may read."""
    _job.parts = parts


def _prepare_sources() -> None:
    """What every file of the codemod pass needs, imported once in each worker before its
    first file is timed: libcst and the run's codemods."""
    try:
        _codemods(_job.selected)
    except Exception:  # the file that needs a broken codemod reports it
        pass


def _codemods(selected: Selected, names=None) -> list:
    """[(codemod class, options)] of the run's transforms that have a source surface (of
    those `names`, if given); this imports libcst: only for a file that must be parsed."""
    return [(t.source_codemod(), o) for t, o in selected.transforms
            if t.codemod is not None and (names is None or t.name in names)]


def _survey_one(item: SourceFile) -> Survey:
    """Which codemods may have work in one file, and which facts it may hold or want."""
    label, path = item
    try:
        raw = path.read_bytes()
    except OSError:
        return Survey()  # failed later, with its reason
    code = _code_text(path, raw)
    if code is None:
        return Survey()  # skipped later, with its reason
    cache = _job.cache
    key = cache.survey_key(label, raw) if cache is not None else None
    if key is not None:
        cached = cache.load_survey(key)
        survey = Survey.from_json(cached) if cached is not None else None
        if survey is not None:
            return survey
    survey = _survey_code(code, [t for t, _ in _job.selected.transforms])
    if key is not None:
        cache.store_survey(key, survey.to_json())
    return survey


def _cached_survey(item: SourceFile) -> Survey | None:
    """The survey of a source file (`item`: label, path) the cache holds, if it does."""
    label, path = item
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    cached = _job.cache.load_survey(_job.cache.survey_key(label, raw))
    return Survey.from_json(cached) if cached is not None else None


def _survey_code(code: str, transforms: list[type[Transform]]) -> Survey:
    """The survey of one file's code (see `Survey`) for `transforms`: the central
    pre-filter (`graphfix.source.prefilter`), then what the scanning rules with work want."""
    from graphfix.source.prefilter import prefilter

    found = prefilter(code, transforms)
    work = tuple(t.name for t in found.work)
    if not found.parsed:  # the codemods (libcst) say why it is skipped; the project model
        # reads what it can (`graphfix.source.project.part.parsed`: Python 2 prints)
        return Survey(work=work, parsed=False, part=_part(code, None))
    return Survey(work=work, part=_part(code, found.syntax))


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


def _source_one(item: SourceWork) -> tuple[Report, list[Output]]:
    label, path, work, context = item
    report, outputs = Report(), []
    try:
        _run_source(label, path, _job.selected, _job.fix, report, outputs,
                    _job.want_diff, _job.cache, work, context, _job.fix_texts)
    except Exception as exc:  # a codemod's bug must not hide the other files' results
        report = Report(failed=[{"path": label,
                                 "error": f"internal error: {type(exc).__name__}: {exc}"}])
        outputs = []
    return report, outputs


def _cached_result(item: SourceWork) -> bool:
    """Whether the cache holds what `_run_source` would give for `item`."""
    label, path, work, context = item
    try:
        raw = path.read_bytes()
    except OSError:
        return False
    code = _code_text(path, raw)
    key = _job.cache.result_key(label, raw, code, work, context)
    cached = _job.cache.load_result(key) if key is not None else None
    return _answers(cached, _job.fix, _job.fix_texts and _has_text(path, code))


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
