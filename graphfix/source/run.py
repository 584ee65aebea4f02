"""One file's source rules run in the run's order, whatever their shape: `run_source`.

A stdlib-tree rule (`graphfix.source.astrule.AstRule`) reads CPython's tree of the code as
the rules before it left it, and its fix is text edits; a libcst rule
(`graphfix.source.codemod.SourceCodemod`) reads libcst's tree, parsed once and shared by
the libcst rules that follow one another unless a fix changes the code. libcst is imported
only for a file one of whose triggered rules is a libcst rule.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from graphfix.findings import Finding
from graphfix.source.astrule import AstRule
from graphfix.source.prefilter import triggered_by
from graphfix.source.syntax import (
    SourceDecodeError,
    SourceResult,
    beyond_parser_limits,
    decode_source,
    parse_python,
)

if TYPE_CHECKING:
    from graphfix.source.codemod import CodemodRun
    from graphfix.source.project import FileView

_LONE_LF = re.compile(r"(?<!\r)\n")


def _keep_newlines(old: str, new: str) -> str:
    """Lines a rule added end as the file's lines do (CRLF files stay CRLF)."""
    if "\r\n" in old and not _LONE_LF.search(old):
        return _LONE_LF.sub("\r\n", new)
    return new


def run_source(code: str | bytes, path: str, codemods: list[tuple[type, dict]], *, fix: bool,
               project: FileView | None = None, read: CodemodRun | None = None
               ) -> SourceResult:
    """Run rules (`AstRule` or `SourceCodemod` classes, each with its options) over one
    file's code, those whose trigger words it has, in order; never raises for bad code
    (see `skipped`).

    `code` may be the file's bytes: then its encoding (PEP 263 cookie, BOM) is honoured and
    `new_bytes` is the fixed file in that same encoding. Line endings are kept. `project`:
    the run's project model as this file's view (None: the file is a project of its own).
    (A run over files reads each rule's trigger words first, without any parse: see
    `graphfix.driver`.) `read`: an earlier result's `read` for the same `code`: libcst's
    tree and metadata as that run first had them, used instead of parsing the file again
    (the result's `read` is None where no libcst rule ran).
    """
    if (too_deep := beyond_parser_limits(code)) is not None:  # would crash or stall libcst
        return SourceResult(path, "", "", [], skipped=too_deep)
    encoding = "utf-8"
    if isinstance(code, bytes):
        raw = code
        try:
            code, encoding = decode_source(raw)
        except SourceDecodeError as exc:
            return SourceResult(path, "", "", [], skipped=str(exc))
    else:
        raw = None
    rules = [(rule, options) for rule, options in codemods
             if triggered_by(rule.transform(), code)]
    # Python's parser first: libcst reads code this Python does not (an f-string nested as
    # 3.12 allows, where this Python's tokenizer, which the token limit counts with, sees
    # strings), and code Python refuses is never rewritten.
    tree, reason = parse_python(code)
    if reason is not None:
        return SourceResult(path, code, code, [], skipped=reason, encoding=encoding)
    cst_run: CodemodRun | None = None
    if any(not issubclass(rule, AstRule) for rule, _ in rules):
        from graphfix.source.codemod import CodemodRun  # libcst: only where a rule needs it

        if read is not None:
            cst_run = read.again()
        else:
            cst_run, reason = CodemodRun.parse(raw if raw is not None else code, code)
            if reason is not None:
                return SourceResult(path, code, code, [], skipped=reason, encoding=encoding)
    first_read = cst_run  # (the file as libcst read it, for another run over it)
    findings: list[Finding] = []
    text: str | None = code  # the code as the rules so far left it (None: `cst_run`'s)
    changed = False  # whether a rule's fix changed the file
    for rule, options in rules:
        view = project.stale_copy() if project is not None and changed else project
        if issubclass(rule, AstRule):
            if text is None:
                text, tree = _keep_newlines(code, cst_run.code), None
            if tree is None:
                tree = ast.parse(text)
            instance = rule(path, options, fix=fix, project=view)
            new_text = instance.run(text, tree)
            findings.extend(f.without_edit() for f in instance.findings)
            if instance.edits:
                changed, text, tree, cst_run = True, new_text, None, None
        else:
            if cst_run is None:
                from graphfix.source.codemod import CodemodRun

                cst_run, reason = CodemodRun.parse(text, text)
                if reason is not None:  # (a fix before it made code libcst cannot read)
                    raise RuntimeError(f"{path}: an earlier rule's fix left code libcst "
                                       f"cannot read: {reason}")
            found, edited = cst_run.apply(rule, options, path, fix=fix, project=view)
            # (a finding's edits hold the rule's tree, which the rule made them in)
            findings.extend(f.without_edit() for f in found)
            if edited:
                changed, text, tree = True, None, None
    if changed and text is None:
        text = cst_run.code
    new_code = _keep_newlines(code, text) if changed else code
    result = SourceResult(path, code, new_code, findings, encoding=encoding)
    result.read = first_read
    if result.changed:
        try:
            result.new_bytes
        except UnicodeEncodeError as exc:
            return SourceResult(path, code, code, findings, encoding=encoding,
                                skipped=f"the fix needs {exc.object[exc.start:exc.end]!r}, "
                                        f"which {encoding} cannot encode")
    return result
