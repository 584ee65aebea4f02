"""The central pre-filter: which source rules may have work in a file, before libcst.

Each transform declares its trigger vocabulary once, as a `SourceTriggers` (for the files it
has work in, `Transform.source_triggers`). From that one declaration this module computes, for all
the run's rules of a file together, the two cheap looks that come before libcst:

1. the text: the words a rule needs (its `words`, the last names of its `calls`, each group
   of `all_of`), searched in the file's text; a file no rule's words trigger on is never
   parsed;
2. the syntax: one stdlib `ast` parse (`Syntax`) shared by every rule the text let through,
   in which some call must be spelled with the last name of one of a rule's `calls` (the
   stdlib parser sees spellings, not what they resolve to: `tf1.get_variable` and a
   helper's `get_variable` alike), the code must name one of its `names` (read, called or
   imported: not only in a string or comment), and the rule's `where` predicate, if it
   declares one, must hold.

Both are conservative: a file they turn away holds nothing the rule's codemod finds.
Plain Python, no libcst: the run's survey imports it without loading libcst.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple

from graphfix.source.vocabulary import last_names

if TYPE_CHECKING:
    from graphfix.registry import Transform
    from graphfix.source.project import FileView
    from graphfix.source.syntax import Syntax


class _TriggerFields(NamedTuple):
    calls: frozenset[str]
    names: frozenset[str]
    words: tuple[str, ...]
    all_of: tuple[tuple[str, ...], ...]
    where: Callable[["Syntax"], bool] | str | None
    in_project: Callable[["FileView"], bool] | str | None


class SourceTriggers(_TriggerFields):
    """What a file must show for a rule to have work in it (or, as a scan's triggers, to
    hold facts its scan reads). Every part given must match; an empty declaration lets
    every file through.

    - `calls`: canonical TF names (`graphfix.source.vocabulary`: `get_variable`,
      `train.ClusterSpec`, `slim.batch_norm`); the text must have one's last name and the
      file must call something spelled with it.
    - `names`: canonical TF names the code must name one of (as a name, an attribute or an
      import: `tf.all_variables` read, called or imported alike), by its last name: for a
      rule whose finding is a reference, not a call.
    - `words`: text of which at least one must appear (`"run("`, `"'ps'"`).
    - `all_of`: groups of words, each of which must have one in the text too.
    - `where`: a predicate on the file's `Syntax` for a construct a call list cannot say
      (variables-to-cpu: a `with device(...)` given a GPU string), or its
      `"module:function"` relative to the transform's package, imported on first use. It
      must be conservative as the rest: False means the codemod finds nothing there.
    - `in_project`: a predicate on the file's view of the project model
      (`graphfix.source.project.FileView`), asked once the run's model is built, for work
      that depends on other files (update-ops: a batch norm that reaches the file); a
      `"module:function"` as `where`. Conservative as the rest.
    """

    # (a named tuple, not a frozen dataclass: `dataclasses` imports `inspect`, a tenth of
    # the graph path's start-up, and every transform declares one of these)
    __slots__ = ()

    def __new__(cls, calls: Iterable[str] = frozenset(), names: Iterable[str] = frozenset(),
                words: Iterable[str] = (), all_of: Iterable[Iterable[str]] = (),
                where: Callable[["Syntax"], bool] | str | None = None,
                in_project: Callable[["FileView"], bool] | str | None = None):
        return super().__new__(cls, frozenset(calls), frozenset(names), tuple(words),
                               tuple(tuple(g) for g in all_of), where, in_project)

    @property
    def call_names(self) -> frozenset[str]:
        """The last names of `calls`: how the stdlib parser and the text see them spelled."""
        return last_names(self.calls)

    @property
    def named(self) -> frozenset[str]:
        """The last names of `names`, as the text and the stdlib parser see them."""
        return last_names(self.names)

    def in_text(self, text: str) -> bool:
        """The text pre-filter: whether `text` has the words this declaration needs."""
        anywhere = (*self.words, *sorted(self.call_names | self.named))
        if anywhere and not any(word in text for word in anywhere):
            return False
        return all(any(word in text for word in group) for group in self.all_of)

    def needs_syntax(self) -> bool:
        """Whether the stdlib parse can say more than the text did."""
        return bool(self.calls) or bool(self.names) or self.where is not None

    def in_syntax(self, syntax: "Syntax", package: str | None = None) -> bool:
        """The syntax pre-check, for a file whose text passed: a call spelled with one of
        `calls`' last names, one of `names`' named, and `where`. (`package`: where a `where`
        string is relative to.)"""
        from graphfix.source.syntax import tail_name  # (not on the graph path)

        names = self.call_names
        if names and not any(tail_name(call.func) in names for call in syntax.calls):
            return False
        if self.names and self.named.isdisjoint(syntax.identifiers):
            return False
        if self.where is None:
            return True
        return bool(_predicate(self.where, package)(syntax))


NO_TRIGGERS = SourceTriggers()


def as_triggers(declared) -> SourceTriggers | None:
    """A declaration as a `SourceTriggers`. A plug-in written before it may still give the
    earlier form, a tuple of words (one must appear) or of such tuples (each must match):
    it means the same here."""
    if declared is None or isinstance(declared, SourceTriggers):
        return declared
    groups = tuple(declared)
    if groups and isinstance(groups[0], tuple):
        return SourceTriggers(all_of=groups)
    return SourceTriggers(words=groups)


def _triggers(transform: type["Transform"]) -> SourceTriggers:
    return as_triggers(transform.source_triggers) or NO_TRIGGERS


def _predicate(where, package: str | None) -> Callable[["Syntax"], bool]:
    if not isinstance(where, str):
        return where
    module_name, _, function_name = where.partition(":")
    return getattr(importlib.import_module(module_name, package=package), function_name)


def triggered_by(transform: type["Transform"], text: str) -> bool:
    """Whether a source `text` may hold work for `transform`'s codemod (the text filter)."""
    return _triggers(transform).in_text(text)


class Prefiltered:
    """What the pre-filter says of one file for the run's rules (see `prefilter`)."""

    __slots__ = ("work", "syntax", "parsed")

    def __init__(self, work, syntax, parsed):
        self.work: list[type[Transform]] = work  # rules that may have work in it, in run order
        self.syntax: Syntax | None = syntax  # the shared parse, where one was needed
        self.parsed: bool = parsed  # False: Python cannot parse it (libcst then says why)


def prefilter(code: str, transforms: Iterable[type["Transform"]]) -> Prefiltered:
    """For the rules (`transforms` with a codemod) of one file: the text pass, then, only
    where some rule's text triggered, one `ast` parse that every such rule's syntax check
    reads. A check that raises (a third-party rule's bug) lets the file through: the codemod
    has the last word."""
    sources = [t for t in transforms if t.codemod is not None]
    triggered = [t for t in sources if triggered_by(t, code)]
    if not triggered:
        return Prefiltered([], None, True)
    from graphfix.source.syntax import Syntax

    syntax = Syntax.parse(code)
    if syntax is None:  # the codemods (libcst) say why it is skipped
        return Prefiltered(triggered, None, False)
    work = [t for t in triggered if _in_syntax(t, syntax)]
    return Prefiltered(work, syntax, True)


def in_project(transform: type["Transform"], view: "FileView") -> bool:
    """Whether the project model leaves `transform`'s codemod work in the file `view` is
    of (`SourceTriggers.in_project`); a check that raises lets the file through."""
    check = _triggers(transform).in_project
    if check is None:
        return True
    try:
        return bool(_predicate(check, transform.__module__)(view))
    except Exception:
        return True


def _in_syntax(transform: type["Transform"], syntax: "Syntax") -> bool:
    triggers = _triggers(transform)
    if not triggers.needs_syntax():
        return True
    try:
        return triggers.in_syntax(syntax, transform.__module__)
    except Exception:
        return True


def device_nearby(view: "FileView") -> bool:
    """Whether the file, or one its imports connect it to, names a device (`tf.device`):
    without one, no stage of a model is placed anywhere (colocate-gradients' `in_project`;
    here, not beside the rule, so that asking it loads no libcst)."""
    return any("device" in code for code in view.connected_code().values())
