"""Transforms: the base class, typed parameters, and discovery by name.

A transform is one bug, fixed on every surface it applies to. Built-in transforms are the
modules of `graphfix.transforms`; others register through the `graphfix.transforms`
entry-point group (`name = "package.module:TransformClass"`). The CLI, the Python API and
`--set NAME.key=value` all read the same registry and the same declared parameters.
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, NamedTuple

from graphfix.errors import Error

if TYPE_CHECKING:
    from graphfix.findings import Check, Edit, Finding, IntendedChange, Watch
    from graphfix.graph.index import GraphIndex
    from graphfix.source.prefilter import SourceTriggers

ENTRY_POINT_GROUP = "graphfix.transforms"


class UsageError(Error, ValueError):
    """A call graphfix cannot carry out as written (unknown transform, bad parameter)."""


class Param:
    """A transform parameter, declared once: the CLI's `--set`, `[tool.graphfix]` and the API
    all read it, and `validate_settings` checks every value given against it."""

    __slots__ = ("name", "default", "help", "choices", "multiple", "kind", "minimum", "files")

    def __init__(self, name: str, default: Any, help: str,
                 choices: tuple[str, ...] | None = None, multiple: bool = False,
                 kind: type = str, minimum: int | None = None, files: tuple[str, ...] = ()):
        self.name = name
        self.default = default
        self.help = help
        self.choices = choices
        self.multiple = multiple  # repeatable: `--set t.key=a --set t.key=b` gives ["a", "b"]
        self.kind = kind
        self.minimum = minimum
        # A repeatable param of file paths may take files by their suffixes (".cc"): those
        # named on the command line, or (in a run with a graph) found beside the Python
        # sources given, are added to it rather than read as inputs
        # (`graphfix.driver.give_files_to_params`).
        self.files = files

    def __repr__(self) -> str:
        return f"Param({self.name!r}, default={self.default!r})"

    @property
    def default_value(self) -> Any:
        """What the transform reads where the param is not set (a repeatable one: [])."""
        return [] if self.multiple else self.default

    def validate(self, transform: str, given: Any) -> Any:
        """The value `given` stands for, as the transform reads it: `given` is text as typed
        on the command line, or a value of the param's `kind`; for a repeatable param, a
        list of those or one comma-separated text (empty items dropped); None, the default.
        UsageError, one line, for a value of another type, not among the `choices` or below
        the `minimum`."""
        if given is None:
            return self.default_value
        if not self.multiple:
            return self._validate_one(transform, given)
        items = given.split(",") if isinstance(given, str) else given
        if not isinstance(items, (list, tuple)):
            raise UsageError(f"{transform}.{self.name} takes a list of {self.kind.__name__}, "
                             f"not {given!r}")
        return [self._validate_one(transform, item) for item in items if item != ""]

    def _validate_one(self, transform: str, given: Any) -> Any:
        where = f"{transform}.{self.name}"
        value = given
        if isinstance(given, str) and self.kind is not str:
            try:
                value = self.kind(given)
            except ValueError:
                raise UsageError(f"{where} takes a {self.kind.__name__}, not {given!r}") from None
        elif not isinstance(given, self.kind) or (isinstance(given, bool)
                                                   and self.kind is not bool):
            raise UsageError(f"{where} takes a {self.kind.__name__}, not {given!r}")
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{where} must be one of {', '.join(self.choices)}, not {given!r}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"{where} must be at least {self.minimum}, not {value}")
        return value


class Context:
    """What a transform may read besides the graph or source: its options and the run.

    `explain` is False where nobody reads the findings' messages (`fix`): a transform may
    then skip work that only words them, such as asking TF's kernel registry (which loads
    the TF runtime) why a group cannot be placed. It must never change the edits.

    `soft_placement` is True where the graph is known to be placed with
    `allow_soft_placement=True` (a traced script whose every session on the graph asked
    for it: `graphfix.trace.Trace.soft_placement`); False for a graph file, whose session
    is not known."""

    def __init__(self, path: str, options: dict[str, Any], target_devices: tuple[str, ...] = (),
                 explain: bool = True, soft_placement: bool = False):
        self.path = path
        self.options = options
        self.target_devices = target_devices
        self.explain = explain
        self.soft_placement = soft_placement


class Transform:
    """Base class of every transform. Subclasses set `name`, `summary`, `params` and
    implement the surfaces they cover: `graph` for graphs and `codemod` (a
    `graphfix.source.codemod.SourceCodemod` or `graphfix.source.astrule.AstRule` subclass)
    for Python sources."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    # The source surface: a rule class (SourceCodemod, libcst's shape, or AstRule, the stdlib
    # tree's), or "module:Class" (relative to the transform's package) imported on first use,
    # so the graph path never loads libcst.
    codemod: ClassVar[type | str | None] = None
    # The source surface's trigger vocabulary (`graphfix.source.prefilter.SourceTriggers`),
    # declared once and read before libcst is imported (a run whose files are all filtered
    # out or cached never imports it): what a file must show for the codemod to have work
    # there. None: every file. What other files of the run say, the codemod asks the
    # project model (`SourceCodemod.project`, `graphfix.source.project`).
    source_triggers: ClassVar["SourceTriggers | None"] = None

    def graph(self, graph: "GraphIndex", ctx: Context) -> Iterable["Finding | Edit"]:
        """The findings for `graph`, in order, each fixable one carrying the `edit` that
        fixes it (`Finding(..., edit=...)`: a finding made without one is reported as not
        fixable); `check` reports the findings, `fix` calls their edits in order (an edit
        several findings carry, once) and then checks what they added
        (`GraphIndex.check_changes`).

        The findings are all read before any edit runs, so each describes the graph as it
        was given: an edit takes what it needs as arguments (`functools.partial`), not from
        a loop variable that has moved on by the time it is called. An edit yielded on its
        own, with no finding, is work `fix` does that `check` does not report (bookkeeping
        such as renamed feeds). The
        default finds nothing: a transform without it has no graph surface."""
        return ()

    def intended_change(self, original: "GraphIndex", fixed: "GraphIndex"
                        ) -> "IntendedChange | None":
        """What this transform's fix of `original` into `fixed` changes on purpose in the
        values a step computes (ruff marks a fix safe or unsafe; a graphfix fix says what it
        changes): `verify FIXED --compare ORIGINAL` lets those values differ and names them.
        None where the fix computes what the original did, or where it made no change here
        (the default: most fixes move ops, not numbers)."""
        return None

    def verify_watch(self, graph: "GraphIndex") -> "Watch | None":
        """What `verify` must observe of a run of `graph` for this transform's check
        (`verify_check`): variables, outputs, a traced step. None: nothing (the default),
        and then no check. Called once TF and the graph's custom-op libraries are loaded."""
        return None

    def verify_check(self, graph: "GraphIndex", run) -> "Check | None":
        """`verify`'s check of this transform's bug in a run of `graph` that observed what
        `verify_watch` asked: `run.variables_before` and `run.variables_after` (variable
        -> value), `run.devices` (node -> where the traced first step ran it),
        `run.observed` (tensor -> its value on each step), `run.steps`, and
        `run.rerun(nodes, configure)`, the same run again observing `nodes`' outputs with
        `configure(ConfigProto)` applied to its session ((error or None, its observed)).
        None: nothing to say of this graph."""
        return None

    @classmethod
    def source_codemod(cls) -> type | None:
        """The codemod class of the source surface (imported now if named lazily)."""
        if isinstance(cls.codemod, str):
            module_name, _, class_name = cls.codemod.partition(":")
            module = importlib.import_module(module_name, package=cls.__module__)
            cls.codemod = getattr(module, class_name)
        return cls.codemod

    @classmethod
    def surfaces(cls) -> list[str]:
        out = []
        if cls.graph is not Transform.graph:
            out.append("graph")
        if cls.codemod is not None:
            out.append("source")
        return out

    @classmethod
    def default_options(cls) -> dict[str, Any]:
        return {p.name: p.default_value for p in cls.params}


def _is_transform(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, Transform) and obj is not Transform and obj.name


def graphfix_code_folders() -> list[Path]:
    """The folders of graphfix's own code: the package and its built-in transforms (which lie
    outside the package in a development tree)."""
    import graphfix
    import graphfix.transforms

    folders = [Path(graphfix.__file__).resolve().parent,
               *(Path(p).resolve() for p in graphfix.transforms.__path__)]
    return list(dict.fromkeys(folders))


@cache
def all_transforms() -> dict[str, type[Transform]]:
    """Every known transform by name: built-ins first, then entry points."""
    import graphfix.transforms as package

    found: dict[str, type[Transform]] = {}
    for name in _module_names(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{name}")
        for obj in vars(module).values():
            if _is_transform(obj) and obj.__module__ == module.__name__:
                found[obj.name] = obj
    for ep in _entry_points():
        obj = ep.load()
        if not _is_transform(obj):
            raise UsageError(f"entry point {ep.name} = {ep.value} is not a graphfix Transform")
        found.setdefault(obj.name, obj)
    return found


def intended_changes(original: "GraphIndex", fixed: "GraphIndex") -> list["IntendedChange"]:
    """What every transform's fix means to change between `original` and `fixed`
    (`Transform.intended_change`): what `verify --compare` is told to expect."""
    found = (transform().intended_change(original, fixed)
             for transform in all_transforms().values())
    return [change for change in found if change is not None and change.nodes]


def verify_checks() -> list[Transform]:
    """The transforms that check a verify run (`Transform.verify_check`), one of each: what
    the API and the command line give `verify` (verification does not read the registry)."""
    return [transform() for transform in all_transforms().values()
            if transform.verify_check is not Transform.verify_check]


def _module_names(folders) -> list[str]:
    """The modules and packages in `folders`, sorted (what `pkgutil.iter_modules` finds, for
    a folder of plain files: without importing pkgutil, ~10 ms of every run)."""
    names = set()
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            stem, dot, suffix = entry.name.partition(".")
            if not stem.isidentifier():
                continue
            if entry.is_dir() and not dot and os.path.exists(os.path.join(entry.path, "__init__.py")):
                names.add(stem)
            elif entry.is_file() and suffix == "py" and stem != "__init__":
                names.add(stem)
    return sorted(names)


def _entry_points() -> list:
    """The installed `graphfix.transforms` entry points. importlib.metadata costs ~0.1-0.2 s
    to import (more than reading a small graph), so first look whether any installed
    distribution declares the group at all: a plain read of each `entry_points.txt`."""
    marker = f"[{ENTRY_POINT_GROUP}]".encode()
    for folder in sys.path:
        try:
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), "rb") as handle:
                    declared = marker in handle.read()
            except OSError:
                continue
            if declared:
                from importlib.metadata import entry_points

                return list(entry_points(group=ENTRY_POINT_GROUP))
    return []


def transform_of_codemod(codemod: type) -> type[Transform]:
    """The transform whose `codemod` is `codemod` (a class, or the "module:Class" naming it):
    how a codemod learns whose findings it reports. UsageError if no transform names it."""
    if codemod not in _OWNERS:
        for transform in all_transforms().values():
            named = transform.codemod
            if isinstance(named, str):
                from importlib.util import resolve_name

                module_name, _, class_name = named.partition(":")
                module_name = resolve_name(module_name, transform.__module__)
                if (module_name, class_name) != (codemod.__module__, codemod.__qualname__):
                    continue
            elif named is not codemod:
                continue
            _OWNERS[codemod] = transform
            break
        else:
            raise UsageError(f"no transform has {codemod.__qualname__} as its codemod")
    return _OWNERS[codemod]


_OWNERS: dict[type, type[Transform]] = {}


def get_transform(name: str) -> type[Transform]:
    """The transform called `name`; UsageError listing the known names otherwise."""
    known = all_transforms()
    if name not in known:
        raise UsageError(f"unknown transform {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def select(only: list[str] | None) -> list[type[Transform]]:
    """The transforms to run, in registry order (`only` restricts them by name)."""
    if only:
        return [get_transform(n) for n in only]
    return list(all_transforms().values())


class SettingName(NamedTuple):
    """A transform's setting, named once where code besides the transform reads it:
    `str()` spells it as `--set` does (`transform.key`)."""

    transform: str
    key: str

    def __str__(self) -> str:
        return f"{self.transform}.{self.key}"


# The custom-op libraries (`.so`) named by the user: stateful-custom-ops reads the ops'
# registrations from them, and verify (of a graph file or a traced script) loads them
# before it imports the graph (`--set stateful-custom-ops.op_library=`, `[tool.graphfix]`).
OP_LIBRARY = SettingName("stateful-custom-ops", "op_library")


def validate_settings(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{transform name: {param: value}}` as the transforms read it, each value checked and
    converted by its `Param.validate`: the one check of every setting, from the API, the
    CLI's `--set` and `[tool.graphfix]` alike. UsageError, one line, on an unknown transform
    or parameter or a bad value."""
    if not isinstance(settings, Mapping):
        raise UsageError(f"settings must map transform names to {{param: value}}, "
                         f"not {type(settings).__name__}")
    out: dict[str, dict[str, Any]] = {}
    for name, options in settings.items():
        transform = get_transform(name)
        if not isinstance(options, Mapping):
            raise UsageError(f"settings for {name} must map its parameters to values, "
                             f"not {type(options).__name__}")
        params = {p.name: p for p in transform.params}
        checked = out[name] = {}
        for key, value in options.items():
            if key not in params:
                raise UsageError(
                    f"{name} has no parameter {key!r}; it takes: {', '.join(params) or 'none'}"
                )
            checked[key] = params[key].validate(name, value)
    return out


def parse_settings(settings: list[str]) -> dict[str, dict[str, Any]]:
    """`["NAME.key=value", ...]` (the CLI's `--set`, in order) -> `{NAME: {key: value}}`,
    each checked by `validate_settings`. A repeatable parameter collects every value given
    (`--set t.key=a,b --set t.key=c`: `["a", "b", "c"]`); any other keeps the last."""
    out: dict[str, dict[str, Any]] = {}
    for setting in settings:
        target, eq, text = setting.partition("=")
        name, dot, key = target.partition(".")
        if not eq or not dot:
            raise UsageError(f"--set takes NAME.key=value, not {setting!r}")
        value = validate_settings({name: {key: text}})[name][key]
        options = out.setdefault(name, {})
        if next(p for p in get_transform(name).params if p.name == key).multiple:
            options.setdefault(key, []).extend(value)
        else:
            options[key] = value
    return out


def options_for(transform: type[Transform], settings: dict[str, dict[str, Any]]) -> dict:
    options = transform.default_options()
    options.update(settings.get(transform.name, {}))
    return options
