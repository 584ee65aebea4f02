"""What a run reports: findings, changes, skipped and failed inputs, and the exit code; and
what verify reports (`Check`), with what a transform's check of a run watches (`Watch`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Iterable, Literal

if TYPE_CHECKING:
    from graphfix.graph.index import GraphIndex

Severity = Literal["error", "warning", "info"]
# Most severe first: `error` (TF would fail, or the bug's damage is certain), `warning` (it
# works, but is the known bug pattern), `info` (worth knowing).
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


def at_least(findings: list, severity: str) -> list:
    """The findings of `severity` or more severe (`--severity warning`: errors and warnings)."""
    shown = set(SEVERITIES[:SEVERITIES.index(severity) + 1])
    return [f for f in findings if f.severity in shown]

# How a graph transform fixes what it found: called by `fix` (never by `check`) with the
# index of the graph, which it edits, returning the changes it made (none, if nothing needed
# it). See `graphfix.registry.Transform.graph`.
Edit = Callable[["GraphIndex"], Iterable["Change"]]


class _Record:
    """Equality and repr over a record's `_fields` (findings and changes are compared by
    tests and by API users, and printed when they differ)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    __hash__ = None  # equal by value, and mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes):
        """A copy with `changes` to its fields."""
        return type(self)(**{name: getattr(self, name) for name in self.__slots__} | changes)


class Replacement(_Record):
    """One piece of a source fix as text: the `length` characters from `offset` of the
    unfixed file (from `start` to `end`, (line, column) from 1, the end being the character
    just after) become `text`. Offsets and columns count Unicode code points of the decoded
    file; a file's replacements apply together, each at its place in the unfixed file."""

    _fields = ("offset", "length", "start", "end", "text")
    __slots__ = _fields

    def __init__(self, offset: int, length: int, start: tuple[int, int], end: tuple[int, int],
                 text: str):
        self.offset = offset
        self.length = length
        self.start = start
        self.end = end
        self.text = text

    def to_json(self) -> dict:
        return {"offset": self.offset, "length": self.length,
                "start": {"line": self.start[0], "col": self.start[1]},
                "end": {"line": self.end[0], "col": self.end[1]}, "text": self.text}


class Finding(_Record):
    """One problem in one input. `line`/`col` for sources, `node` for graphs; in a notebook,
    `cell` (counted from 1 over every cell) and `line` within that cell.

    A finding is fixable when it is made with its fix, `edit`: a graph transform's `Edit`
    (see `Edit`), or the edits a source rule reports it with (`SourceCodemod.report(...,
    fix=...)`, which the rule's base class makes). There is no flag to say it apart from
    the edit: a finding made without one is reported, not fixed. The edit is how, not
    what: findings are equal whatever their edits, and a finding keeps its `fixable` where
    its edit is dropped (the findings `check` gives, and a source rule's once it ran: the
    edit holds the graph's index or the rule's tree). A source finding `check` reports as
    JSON or SARIF carries its fix as text, `replacements` (see
    `graphfix.cli.replacements`); not compared either."""

    _fields = ("path", "transform", "message", "fixable", "line", "col", "node", "severity",
               "cell")
    __slots__ = ("path", "transform", "message", "_fixable", "line", "col", "node",
                 "severity", "cell", "edit", "details", "replacements")

    def __init__(self, path: str, transform: str, message: str,
                 line: int | None = None, col: int | None = None, node: str | None = None,
                 severity: Severity = "error", cell: int | None = None,
                 edit: Edit | tuple | None = None, details: dict | None = None,
                 replacements: list[Replacement] | None = None):
        self.edit = edit
        self._fixable = edit is not None
        self.path = path
        self.transform = transform
        self.message = message
        self.line = line
        self.col = col
        self.node = node
        self.severity = severity
        self.cell = cell
        # The evidence behind the message, for JSON readers (a graph finding: the nodes it
        # is about, the device they ask for); not compared: the message says the same.
        self.details = {} if details is None else details
        self.replacements = [] if replacements is None else replacements

    @property
    def fixable(self) -> bool:
        """Whether `fix` fixes it: it was made with its edit."""
        return self._fixable

    def replace(self, **changes) -> Finding:
        """A copy with `changes` to its fields (fixable as this one: a new `edit` is not a
        field)."""
        if "fixable" in changes or "edit" in changes:
            raise TypeError("a finding is fixable by the edit it is made with")
        copy = object.__new__(Finding)
        for name in self.__slots__:
            setattr(copy, name, changes.pop(name) if name in changes else getattr(self, name))
        if changes:
            raise TypeError(f"Finding has no field {', '.join(changes)}")
        return copy

    def without_edit(self) -> Finding:
        """This finding without its edit, fixable as it was made."""
        copy = self.replace()
        copy.edit = None
        return copy

    def not_fixed(self, why: str) -> Finding:
        """This finding as one `fix` leaves after all (a notebook whose fix would join two
        cells), saying `why` in its message."""
        copy = self.replace(message=f"{self.message}; {why}")
        copy.edit, copy._fixable = None, False
        return copy

    @classmethod
    def as_recorded(cls, record: dict) -> Finding:
        """A finding from graphfix's own record of one (`to_json`'s fields: the source
        cache's entry, a finding made of others at one site by `check --trace`), fixable as
        the record says: the record is of findings that were made with their edits or
        without."""
        fields = dict(record)
        fixable = bool(fields.pop("fixable"))
        finding = cls(**fields)
        finding._fixable = fixable
        return finding

    def location(self) -> str:
        if self.node is not None:
            return f"{self.path}@{self.node}"
        if self.cell is not None:  # ruff's form: nb.ipynb:cell 3:2:1
            return f"{self.path}:cell {self.cell}:{self.line or 1}:{self.col or 1}"
        if self.line is not None:
            return f"{self.path}:{self.line}:{self.col or 1}"
        return self.path

    def to_text(self) -> str:
        """`where: severity: transform: message`, the compilers' form editors and CI log
        matchers read (`train.py:3:9: error: variables-to-cpu: ...`)."""
        tail = " (fixable)" if self.fixable else ""
        return f"{self.location()}: {self.severity}: {self.transform}: {self.message}{tail}"

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "cell": self.cell,
            "line": self.line,
            "col": self.col,
            "node": self.node,
            "transform": self.transform,
            "message": self.message,
            "fixable": self.fixable,
            "severity": self.severity,
            "details": self.details,
        }


class Change(_Record):
    """One edit a fix made. `node` for graphs, `line` for sources (and `cell` in a notebook)."""

    _fields = ("path", "transform", "description", "node", "line", "details", "cell")
    __slots__ = _fields

    def __init__(self, path: str, transform: str, description: str, node: str | None = None,
                 line: int | None = None, details: dict | None = None, cell: int | None = None):
        self.path = path
        self.transform = transform
        self.description = description
        self.node = node
        self.line = line
        self.details = {} if details is None else details
        self.cell = cell

    def to_text(self) -> str:
        where = f"@{self.node}" if self.node else (f":{self.line}" if self.line else "")
        if self.cell is not None:
            where = f":cell {self.cell}{where}"
        return f"{self.path}{where}: {self.transform}: {self.description}"

    def to_json(self) -> dict:
        out = {
            "path": self.path,
            "node": self.node,
            "cell": self.cell,
            "line": self.line,
            "transform": self.transform,
            "description": self.description,
        }
        out.update(self.details)
        return out


class IntendedChange(_Record):
    """Values a fix changes on purpose, as its transform declares them
    (`graphfix.registry.Transform.intended_change`): `verify --compare` expects the fixed
    graph's values of `nodes` (variables, or ops whose outputs are fetched) to differ from
    the original's, and says which ("equal except the 4 moving statistics update-ops now
    updates"). `what` names them in that sentence."""

    _fields = ("transform", "what", "nodes")
    __slots__ = _fields

    def __init__(self, transform: str, what: str, nodes: Iterable[str]):
        self.transform = transform
        self.what = what
        self.nodes = tuple(nodes)


@dataclasses.dataclass
class Check:
    """One check's verdict of a verify run; `detail` is one line, `message` TF's whole error
    where it gave one, `names` the nodes the detail counts, by what they are (in JSON where
    there are some). verify makes its own (placement, run, compare) and asks each transform
    for the check of its bug (`graphfix.registry.Transform.verify_check`)."""

    name: str
    passed: bool
    detail: str = ""
    message: str = ""
    names: dict[str, list[str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Watch:
    """What a verify run observes for a transform's check
    (`graphfix.registry.Transform.verify_watch`): the variables read before the first step
    and after the last, the nodes whose outputs every step fetches, and whether the first
    step is traced (which nodes ran, and where)."""

    variables: frozenset[str] = frozenset()
    outputs: tuple[str, ...] = ()
    trace: bool = False


class Changes(list):
    """The changes a fix made (a list of `Change`), plus the renames callers must follow."""

    @property
    def renames(self) -> dict[str, str]:
        """Old tensor name -> new one, for every feed or output a fix moved (e.g. a fed
        variable `emb:0` is now fed as `emb/feed:0`)."""
        out: dict[str, str] = {}
        for change in self:
            out.update(change.details.get("renames", {}))
        return out


# The repository, as pyproject.toml's `project.urls` names it (a test keeps them equal): the
# transforms' pages linked from JSON `docs` and SARIF `helpUri` are its files.
REPOSITORY = "https://github.com/graphfix/graphfix"
DOCS_BASE = f"{REPOSITORY}/blob/main/"


def docs_url(transform: str) -> str:
    """Where a transform's page is: docs/transforms/NAME.md (JSON `docs`, SARIF `helpUri`)."""
    return f"{DOCS_BASE}docs/transforms/{transform}.md"


def finding_record(finding: Finding) -> dict:
    """A finding as the reports give it (JSON, the HTML page): its fields, its transform's
    docs page and its fix as text replacements (empty where there is none as text: graphs,
    notebooks, findings not fixable)."""
    return {**finding.to_json(), "docs": docs_url(finding.transform),
            "replacements": [r.to_json() for r in finding.replacements]}


class Report:
    """Everything one command found, changed, skipped and failed on, in input order. Every
    field is a list (a fresh one by default); `__slots__` names them all."""

    __slots__ = ("findings", "changes", "skipped", "failed", "changed_paths", "unchanged_paths",
                 "notes", "cached_paths")

    def __init__(self, findings: list[Finding] | None = None,
                 changes: list[Change] | None = None, skipped: list[dict] | None = None,
                 failed: list[dict] | None = None, changed_paths: list[str] | None = None,
                 unchanged_paths: list[str] | None = None, notes: list[str] | None = None,
                 cached_paths: list[str] | None = None):
        self.findings = [] if findings is None else findings
        self.changes = [] if changes is None else changes
        self.skipped = [] if skipped is None else skipped
        self.failed = [] if failed is None else failed
        self.changed_paths = [] if changed_paths is None else changed_paths
        self.unchanged_paths = [] if unchanged_paths is None else unchanged_paths
        self.notes = [] if notes is None else notes
        # sources read from the cache
        self.cached_paths = [] if cached_paths is None else cached_paths

    def exit_code(self, *, fixing: bool) -> int:
        """0 clean, 1 findings (check) or changes (fix), 2 any error: Fixit's bitmask."""
        if self.failed:
            return 2
        if fixing:
            return 1 if self.changes else 0
        return 1 if self.findings else 0

    def summary(self) -> dict:
        return {
            "findings": len(self.findings),
            "fixable": sum(f.fixable for f in self.findings),
            "changes": len(self.changes),
            "files_changed": len(self.changed_paths),
            "files_unchanged": len(self.unchanged_paths),
            "skipped": len(self.skipped),
            "failed": len(self.failed),
            "cached": len(self.cached_paths),
        }

    def to_json(self, *, fixing: bool) -> dict:
        summary = self.summary()
        summary["exit_code"] = self.exit_code(fixing=fixing)
        return {
            "findings": [finding_record(f) for f in self.findings],
            "changes": [c.to_json() for c in self.changes],
            "skipped": self.skipped,
            "failed": self.failed,
            "notes": self.notes,
            "summary": summary,
        }
