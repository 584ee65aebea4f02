"""The project model: a run's Python sources as one program, built once per run.

Each file gives a *part*, read by the stdlib's parser (no libcst) and cached with the file's
survey (by its content and graphfix's code): what it imports, the units it defines (each
top-level function and class, each method of such a class, and the module body), the names each unit refers to, and the
facts the rules ask about (the batch norms it builds). `Project` joins the parts: it
resolves imports inside the run (packages and `__init__`, relative imports, `from a import
b`, `import a.b as c`, re-exports, a script importing a sibling of its folder, as a
`sys.path.append` next to it does) and references to the units they name (same file,
imported modules, a class's methods and its bases', `self.method`, `super().method`, a
method of an instance the unit makes, the subclasses' own where a base's method called on
`self` is abstract, a method called on a call chained on `self`), and answers the rules' queries
(`FileView`). A fact about file B reaches file A only along those edges: what A's code
refers to (transitively), and what refers to the unit a finding is in (its callers, up to
a fixed point); never because both files are in one run.

Plain Python: the survey builds parts in the workers without loading libcst.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections import deque
from collections.abc import Callable, Iterable

from graphfix.source.project.cluster import cluster_programs
from graphfix.source.project.facts import (
    attribute_instances,
    COLLECTION_WORDS,
    REUSE_WORDS,
    TOWER_WORDS,
    calls_under_update_ops,
    collection_facts,
    default_untaken_functions,
    fills_list_from_callback,
    flag_branches,
    lists_tied_to_update_ops,
    may_pass_taking,
    name_switches,
    names_function,
    names_passed,
    reuse_facts,
    scope_function_batch_norms,
    scope_uses,
    tower_facts,
    training_switches,
    truth_passed,
    truth_passed_to_instances,
    update_ops_hooks,
)
from graphfix.source.project.feeds import FeedFacts, feed_facts, name_reads
from graphfix.source.project.names import AstTfNames
from graphfix.source.project.part import (
    MODULE_BODY,
    PART_FORMAT,
    PackedParts,
    file_part,
    pack_part,
    parsed,
    part_json,
    part_of_code,
    unpack_part,
)
from graphfix.source.vocabulary import REUSED_UNDER_REUSE

__all__ = ["MODULE_BODY", "PART_FORMAT", "FileView", "PackedParts", "Project", "file_part",
           "pack_part", "part_of_code", "unit_at", "unpack_part"]

# Words without which a file says nothing about feed keys (conservative, as the pre-filter).
_FEED_WORDS = ("Variable", "variable", "assign", "global_step", "minimize", "apply_gradients",
               "compute_gradients", "optimize_loss", "create_train_op", "Monitored")


def unit_at(part: dict, line: int) -> str:
    """The innermost unit of a file's part whose code holds `line` (a method before its
    class)."""
    found, start = MODULE_BODY, -1
    for name, unit in part["units"].items():
        for first, last in unit["spans"]:
            if first <= line <= last and first > start:
                found, start = name, first
    return found


class Project:
    """The sources of one run, joined: `parts` by label (the path as the run names it).
    Queries go through `view(label)`; every answer follows imports and references."""

    def __init__(self, parts: dict[str, dict | None] | PackedParts,
                 code_of: Callable[[str], str | None] | None = None):
        # (PackedParts: the run's process that joins the parts and queries none)
        self.parts = parts if isinstance(parts, PackedParts) else {
            label: part for label, part in parts.items() if part is not None}
        # A file's code, for the facts read only when a rule asks (`feeds`); None: unknown.
        self._read_code = code_of or (lambda label: None)
        self._codes: dict[str, str | None] = {}
        self._feeds: dict[str, dict] = {}
        self._reads: dict[str, dict] = {}
        self._reuse: dict[str, dict] = {}
        self._towers: dict[str, dict] = {}
        self._passed: dict[str, list[list]] = {}  # see `names_passed`
        self._branches: dict[str, list[list]] = {}
        self._collections: dict[str, dict] = {}
        self._switches: dict[str, list[list]] = {}
        self._attributes: dict[str, dict[str, dict[str, str]]] = {}  # see `attribute_instances`
        self._name_switches: dict[str, list[list]] = {}
        self._defaults_untaken: dict[str, list[str]] = {}
        self._scope_batch_norms: dict[str, list[list]] = {}  # see `frozen_where_scoped`
        self._cache_guards: dict[str, list[tuple[int, int]]] = {}  # see `FileView._cache_guarded`
        self._called_units: dict[tuple[str, str], bool] = {}  # see `called`
        self._trees: dict[str, tuple[ast.Module, AstTfNames] | None] = {}  # see `_trees_naming`
        self._by_path: dict[str, str] = {}  # a file's real path -> its label
        for label in self.parts:
            self._by_path.setdefault(os.path.realpath(label), label)
        self._resolved: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        self._edges: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        self._callers: dict[tuple[str, str], set[tuple[str, str]]] | None = None
        self._subclasses: dict[tuple[str, str], set[tuple[str, str]]] | None = None
        self._modules: dict[tuple[str, str, int], str | None] = {}
        self._folders: dict[str, str] = {}  # a label -> the real folder it is in
        # a dotted name -> {folder: (label, is a package's __init__)}: see `_found_above`
        self._module_index: dict[str, dict[str, tuple[str, bool]]] | None = None
        self._components: dict[str, frozenset[str]] | None = None
        self._closures: dict[str, frozenset[str]] | None = None  # see `closure`
        self._digests: dict[frozenset[str], str] = {}  # by closure
        self._part_digests: dict[str, bytes] = {}  # by label: each part serialized once
        # by closure:
        self._subprojects: dict[frozenset[str], dict[str, dict] | PackedParts] = {}

    @classmethod
    def of_code(cls, label: str, code: str) -> Project:
        """The project of one file alone (the Python API's `check_source`)."""
        return cls({label: part_of_code(code)}, {label: code}.get)

    def view(self, label: str) -> FileView:
        """The model as the rules of file `label` ask it."""
        return FileView(self, label)

    def with_code(self, label: str, code: str) -> FileView:
        """The view of `label` in a copy of the project where its part is read from
        `code` (the file as an earlier rule's fix left it)."""
        def code_of(name: str) -> str | None:
            return code if name == label else self._code_of(name)

        return Project({**self.parts, label: part_of_code(code)}, code_of).view(label)

    def _code_of(self, label: str) -> str | None:
        if label not in self._codes:
            self._codes[label] = self._read_code(label)
        return self._codes[label]

    def _facts_of(self, cache: dict, label: str, read: Callable, empty,
                  words: Iterable[str] | None = None):
        """What `read(tree, AstTfNames(tree))` says of file `label`, read from its code when
        first asked and kept in `cache` (few files are asked, and a reading walks the whole
        tree); `empty` where the file is not the project's, does not parse, or names none of
        `words` (when given)."""
        if label not in cache:
            facts = empty
            code = self._code_of(label) if label in self.parts else None
            if code is not None and (words is None or any(word in code for word in words)):
                tree = parsed(code)
                if tree is not None:
                    facts = read(tree, AstTfNames(tree))
            cache[label] = facts
        return cache[label]

    def feeds(self, label: str) -> dict:
        """What file `label` says about the names a feed key may hold
        (`graphfix.source.project.feeds`)."""
        return self._facts_of(self._feeds, label, feed_facts, {
            "attributes": {}, "updated": [], "monitored": [], "names": [], "trains": []},
            _FEED_WORDS)

    def reads(self, label: str) -> dict:
        """What file `label` reads in optimizers' arguments and elsewhere
        (`graphfix.source.project.feeds.name_reads`). Not behind `feeds`' words: a file that
        puts a learning rate on a loss's path need name no variable, assign or train
        method."""
        return self._facts_of(self._reads, label, name_reads,
                              {"steering": [], "graph_reads": []})

    def reuse(self, label: str) -> dict:
        """Where file `label`'s code runs under a variable scope that reuses, and what it
        calls there (`graphfix.source.project.facts.reuse_facts`)."""
        return self._facts_of(self._reuse, label, reuse_facts, {"regions": [], "calls": []},
                              REUSE_WORDS)

    def towers(self, label: str) -> dict:
        """File `label`'s own tower code and what it calls there
        (`graphfix.source.project.facts.tower_facts`)."""
        return self._facts_of(self._towers, label, tower_facts, {"spans": [], "calls": []},
                              TOWER_WORDS)

    def names_passed(self, label: str) -> list[list]:
        """The names file `label`'s calls of the project's code give as arguments
        (`graphfix.source.project.facts.names_passed`; asked only of a file whose tower or
        reusing code calls some)."""
        return self._facts_of(self._passed, label, names_passed, [])

    def flag_branches(self, label: str) -> list[list]:
        """The branches of file `label`'s units that one value of a flag takes
        (`graphfix.source.project.facts.flag_branches`; asked only where a call under reuse
        gives a flag)."""
        return self._facts_of(self._branches, label, flag_branches, [])

    def collections(self, label: str) -> dict:
        """What file `label` adds to collections of its own and reads from collections
        (`graphfix.source.project.facts.collection_facts`)."""
        return self._facts_of(self._collections, label, collection_facts, {
            "moving_averages": [], "read": [], "reads_any": False}, COLLECTION_WORDS)

    def training_switches(self, label: str) -> list[list]:
        """File `label`'s batch norms that train only where their function is told to
        (`graphfix.source.project.facts.training_switches`)."""
        return self._facts_of(self._switches, label, training_switches, [])

    def builds_batch_norm(self, label: str, at: int, entries: set[tuple[str, str]]) -> bool:
        """Whether the batch norm at line `at` of file `label` may be built, and train, in
        a program: its unit is a module body, a class's, one of `entries` (the code the
        train op is built in and its callers), or a function or method some code calls
        (`called`); and where its training flag is a parameter defaulting to False
        (`training_switches`) or has none, some code may call its function with it set; and
        where it is built only for some names of a list its function takes
        (`name_switches`), some code may pass one. A function of a script that only branches its flag defaults do
        not take call (`default_untaken_functions`), and no other file names, is not built:
        a run is judged with its flag defaults, as an `importlib` import of a name built
        from them is."""
        part = self.parts[label]
        unit = unit_at(part, at)
        if (label, unit) not in entries and not self.called((label, unit)):
            return False
        if self.frozen_where_scoped(label, at):
            return False
        if (label, unit) not in entries and unit in self._facts_of(
                self._defaults_untaken, label, default_untaken_functions, [], ("==", " in ")
        ) and not any(names_function(tree, names, unit)
                      for tree, names in self._trees_naming(label, unit, but=label)):
            return False
        for line, function, parameter, position, landing in self.training_switches(label):
            if line != at:
                continue
            of_class = part["units"].get(unit, {}).get("class")
            if function == "__call__" and of_class:  # called through its instances
                if not self._instances_may_train(label, of_class, parameter, position):
                    return False
            elif not self._may_train(label, function, parameter, position, landing, False):
                return False
        for line, function, parameter, position, how, strings in self._facts_of(
                self._name_switches, label, name_switches, [], ("for",)):
            if line == at and not any(
                    may_pass_taking(tree, names, function, parameter, position, how, strings)
                    for tree, names in self._trees_naming(label, function)):
                return False
        return True

    def frozen_where_scoped(self, label: str, at: int) -> bool:
        """Whether the batch norm at line `at` of file `label` is one a function's arg_scope
        gives the layers (`scope_function_batch_norms`: mobilenet's `training_scope`) and
        every use of that function in the code connected to the file enters its scope with
        batch norm frozen inside it (`scope_uses`: the DetectionTeamUCAS detectors'
        `mobilenetv2_scope`), through functions that only return its call: no layer under
        it trains."""
        functions = [function for line, function in self._facts_of(
            self._scope_batch_norms, label, scope_function_batch_norms, [], ("arg_scope",))
            if line == at]
        pending, seen = functions[:1], set()
        while pending:
            function = pending.pop()
            if function in seen:
                continue
            seen.add(function)
            if len(seen) > 4:
                return False
            for tree, names in self._trees_naming(label, function):
                unfrozen, wrappers = scope_uses(tree, names, function)
                if unfrozen:
                    return False
                pending += wrappers
        return bool(seen)

    def _may_train(self, label: str, function: str, parameter: str, position: int | None,
                   landing: list[int], default_trains: bool, depth: int = 0) -> bool:
        """Whether code connected to file `label` may call `function` with its training
        flag `parameter` set (`graphfix.source.project.facts.truth_passed`), following a
        flag its callers take as a parameter of their own to their callers (a model built
        with `build_graph(istrain=False)` only): a function so reached that no code calls
        may be run from outside (an entry point), so it may."""
        calls, forwards = 0, []
        for tree, names in self._trees_naming(label, function):
            passes, seen, forwarded = truth_passed(tree, names, function, parameter,
                                                   position, landing, default_trains)
            if passes:
                return True
            calls += seen
            forwards += [(tree, names, *f) for f in forwarded]
        if depth and not calls:
            return True
        if forwards and depth >= 3:
            return True
        return any(self._may_train(label, caller, flag, at, lands, trains, depth + 1)
                   for _, _, caller, flag, at, lands, trains in forwards)

    def _instances_may_train(self, label: str, cls: str, parameter: str,
                             position: int | None) -> bool:
        """`_may_train` for the training flag of class `cls`'s `__call__`: whether code
        connected to file `label` may call an instance of it, or of a subclass, with the
        flag set (`graphfix.source.project.facts.truth_passed_to_instances`), following a
        flag the calls' functions take as a parameter of their own to their callers."""
        classes = frozenset(name for _, name in [(label, cls), *self.subclasses((label, cls))])
        trees = {id(t[0]): t for name in sorted(classes) for t in self._trees_naming(label, name)}
        forwards = []
        for tree, names in trees.values():
            passes, _, forwarded = truth_passed_to_instances(tree, names, classes, parameter,
                                                             position, False)
            if passes:
                return True
            forwards += forwarded
        return any(self._may_train(label, caller, flag, at, lands, trains, 1)
                   for caller, flag, at, lands, trains in forwards)

    def called(self, unit: tuple[str, str]) -> bool:
        """Whether some code may call a function or method: a module body or a class is
        run anyway, and so is a method Python or a library base calls itself (a dunder; a
        method of a class with a base outside the project: Keras' `call`); else another
        unit refers to it (the reference graph, less a class's edges to its own methods),
        or the code of the files connected to its file names it other than where it is
        defined (a call the model does not resolve: a method of an instance held in an
        attribute, a layer chained on a parameter, a callback)."""
        if unit not in self._called_units:
            self._called_units[unit] = self._is_called(unit)
        return self._called_units[unit]

    def _is_called(self, unit: tuple[str, str]) -> bool:
        label, name = unit
        part = self.parts[label]
        of_unit = part["units"].get(name, {})
        if of_unit.get("kind") not in ("function", "method"):
            return True
        short = name.rsplit(".", 1)[-1]
        of_class = of_unit.get("class")
        if short.startswith("__") or (of_class and any(
                not self.resolve(label, base) for base in
                part["units"][of_class].get("bases", ()) if base != "object")):
            return True
        for source in self.callers(unit) - {unit}:
            if source != (label, of_class) and unit in self.references(*source):
                return True
            if source == (label, of_class) and any(
                    unit in self.resolve_in(label, of_class, ref)
                    for ref in part["units"][of_class]["refs"]):
                return True
        return any(names_function(tree, names, short)
                   for tree, names in self._trees_naming(label, short))

    def _trees_naming(self, label: str, name: str, but: str | None = None
                      ) -> list[tuple[ast.Module, AstTfNames]]:
        """The trees (with their TF names) of the files connected to `label` by imports
        whose code names `name` (file `but` left out), each parsed once a run."""
        found = []
        for other in sorted(self.connected(label)):
            code = self._code_of(other) if other != but else None
            if code is None or name not in code:
                continue
            if other not in self._trees:
                tree = parsed(code)
                self._trees[other] = None if tree is None else (tree, AstTfNames(tree))
            if self._trees[other] is not None:
                found.append(self._trees[other])
        return found

    # -- modules ---------------------------------------------------------------------------

    def _file(self, path: str) -> str | None:
        return self._by_path.get(path)

    def _module_file(self, folder: str, parts: list[str]) -> str | None:
        """The project file of module `parts` under `folder` (`a/b.py`, `a/b/__init__.py`)."""
        base = os.path.join(folder, *parts)
        return self._file(base + ".py") or self._file(os.path.join(base, "__init__.py"))

    def module(self, label: str, module: str, level: int = 0) -> str | None:
        """The project file that `import module` (`from .module`, at `level`) in `label`
        names; None if it is not in the run. Absolute imports are looked for beside the
        file, then in each folder above it (a package's root, a script's `sys.path`)."""
        key = (label, module, level)
        if key not in self._modules:
            self._modules[key] = self._find_module(label, module, level)
        return self._modules[key]

    def _folder(self, label: str) -> str:
        """The real folder file `label` is in."""
        if label not in self._folders:
            self._folders[label] = os.path.dirname(os.path.realpath(label))
        return self._folders[label]

    def _find_module(self, label: str, module: str, level: int) -> str | None:
        folder = self._folder(label)
        parts = [p for p in module.split(".") if p]
        if level:
            for _ in range(level - 1):
                folder = os.path.dirname(folder)
            if not parts:
                return self._file(os.path.join(folder, "__init__.py"))
            return self._module_file(folder, parts)
        if not parts:
            return None
        return (self._found_above(folder, ".".join(parts))
                or self._found_in_source_folder(".".join(parts), folder))

    def _found_above(self, folder: str, module: str) -> str | None:
        """The file of `module` beside `folder`'s files, else in the nearest folder above
        (`a/b.py` before `a/b/__init__.py` in one folder), found in an index of where each
        dotted name is a project file: most imports name no project file at all."""
        where = self._modules_named(module)
        while True:
            if folder in where:
                return where[folder][0]
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            folder = parent

    def _found_in_source_folder(self, module: str, folder: str) -> str | None:
        """The file of a dotted `module` that an importer in `folder` finds in no folder
        above it: in the folder of the run whose package (an `__init__.py` beside the
        modules) holds it, a source folder the script's `sys.path` is given from outside
        (`python/pkg/v2/blocks.py` for `import pkg.v2.blocks`, a repository's `python/`
        or `src/`), the nearest to `folder` where several do; None where none does, two
        are as near, or `module` is no package's (a bare name is too common to guess)."""
        found = self._source_folder_files(module, folder)
        return found[0] if found else None

    def _source_folder_files(self, module: str, folder: str) -> tuple[str, str] | None:
        """(the file, its top package's `__init__`) of `_found_in_source_folder`: both a
        query about the importer reads (`closure`)."""
        top = module.split(".", 1)[0]
        if not top or top == module:
            return None
        where = self._modules_named(module)
        packages = self._modules_named(top)
        found = {holder: (labels[0], packages[holder][0]) for holder, labels in where.items()
                 if packages.get(holder, (None, False))[1]}
        if not found:
            return None
        shared = {holder: len(os.path.commonpath([holder, folder])) for holder in found}
        nearest = [holder for holder in found if shared[holder] == max(shared.values())]
        return found[nearest[0]] if len(nearest) == 1 else None

    def _modules_named(self, module: str) -> dict[str, tuple[str, bool]]:
        """{folder: (label, whether it is a package's `__init__`)} of the project files
        that are module `module` seen from that folder."""
        if self._module_index is None:
            self._module_index = {}
            for path, label in self._by_path.items():
                folder_of, name = os.path.split(path)
                stem = name[:-3] if name.endswith(".py") else None
                if stem is None:
                    continue
                dotted = [] if stem == "__init__" else [stem]
                while True:
                    if dotted:
                        found = self._module_index.setdefault(".".join(dotted), {})
                        kept = found.get(folder_of)
                        # (`a/b.py` before `a/b/__init__.py`, as `_module_file` looks)
                        if kept is None or (stem != "__init__" and kept[1]):
                            found[folder_of] = (label, stem == "__init__")
                    parent, last = os.path.split(folder_of)
                    if parent == folder_of or not last:
                        break
                    dotted.insert(0, last)
                    folder_of = parent
        return self._module_index.get(module, {})

    # -- references ------------------------------------------------------------------------

    def resolve(self, label: str, name: str, seen: frozenset = frozenset()
                ) -> frozenset[tuple[str, str]]:
        """The units (label, unit name) a dotted `name` read in `label` may refer to: a
        function or class of the file (a class's method, its own or a base's: `Model.build`),
        the module body for its other globals, through imports what the imported module
        defines (a module named whole: all its units)."""
        key = (label, name)
        if key in self._resolved:
            return self._resolved[key]
        if key in seen:
            return frozenset()
        seen = seen | {key}
        part = self.parts.get(label)
        found: set[tuple[str, str]] = set()
        if part is not None:
            head, _, rest = name.partition(".")
            if head in part["aliases"]:
                found |= self.resolve(label, part["aliases"][head], seen)
            elif head in part["units"] and head != MODULE_BODY:
                member = (self.member((label, head), rest.split(".")[0])
                          if rest and part["units"][head]["kind"] == "class" else None)
                found.add(member or (label, head))
            elif head in part["globals"]:
                found.add((label, MODULE_BODY))
            else:
                entries = [e for e in part["imports"] if e[0] == head]
                for _, module, imported, level in entries:
                    found |= self._through_import(label, module, imported, level, rest, seen)
                if not entries:
                    for _, module, _, level in (e for e in part["imports"] if e[0] == "*"):
                        target = self.module(label, module, level)
                        if target is not None:
                            found |= self.resolve(target, name, seen)
        result = frozenset(found)
        self._resolved[key] = result
        return result

    def _through_import(self, label, module, imported, level, rest, seen):
        if imported is None:  # `import a.b.c [as x]`: x.rest, or a.rest for `import a`
            chain = [*module.split("."), *[p for p in rest.split(".") if p]]
            return self._in_module_chain(label, chain, len(module.split(".")), level, seen)
        chain = [*[p for p in module.split(".") if p], imported,
                 *[p for p in rest.split(".") if p]]
        return self._in_module_chain(label, chain, len([p for p in module.split(".") if p]),
                                     level, seen)

    def _in_module_chain(self, label, chain, known, level, seen):
        """What `chain` (module parts, then names) names: the longest module prefix (at
        least `known` parts) in the project, then the name after it in that module."""
        for cut in range(len(chain), known - 1, -1):
            if cut == 0 and not level:
                continue
            target = self.module(label, ".".join(chain[:cut]), level)
            if target is None:
                continue
            rest = chain[cut:]
            if not rest:
                return frozenset((target, unit) for unit in self.parts[target]["units"])
            return self.resolve(target, ".".join(rest), seen)
        return frozenset()

    def resolve_in(self, label: str, unit: str, name: str) -> frozenset[tuple[str, str]]:
        """`resolve`, for `name` read in `unit` of `label`: in a method, `self.build` is
        the method its class or a base defines and `super().build` a base's; `model.build`
        where the unit binds `model = Model(...)` is the class's method; a name (or a
        dotted name's head) that is one of the unit's parameters is none of the project's."""
        part = self.parts.get(label)
        of_unit = part["units"].get(unit) if part is not None else None
        head, _, rest = name.partition(".")
        if of_unit is not None and rest:
            attribute = rest.split(".")[0]
            if head == "super" and of_unit.get("class"):
                found = {self.member(base, attribute)
                         for base in self.bases((label, of_unit["class"]))}
                return frozenset(found - {None})
            made = of_unit.get("instances", {}).get(head)
            if made is not None:
                receiver = of_unit.get("class") is not None and of_unit.get(
                    "params", [None])[:1] == [head]
                found = set()
                for target in self.resolve(label, made):
                    if self._kind(target) != "class":
                        continue
                    own = self.member(target, attribute)
                    found.add(own)
                    if receiver and (own is None or self._abstract(own)):
                        # (a template method: `self.setup()` in a base's `__init__` runs
                        # the subclass's `setup`, whichever subclass `self` is)
                        found.update(self.member(sub, attribute)
                                     for sub in self.subclasses(target))
                if found - {None}:
                    return frozenset(found - {None})
        if of_unit is not None and head in (*of_unit.get("params", ()),
                                            *of_unit.get("kwonly", ())):
            # A parameter holds what the caller gives, never the module's name it shadows
            # (`def inputs(train, ...)` reading `train` beside a function `train`).
            return frozenset()
        return self.resolve(label, name)

    def resolve_through_attribute(self, label: str, unit: str, name: str
                                  ) -> frozenset[tuple[str, str]]:
        """The methods `name` read in a method of `label` may be where it calls a method on
        an attribute of the method's own object (`self._model.compute_loss`) that the class,
        or a base, binds once to an instance of one of the project's classes
        (`self._model = lanenet.LaneNet(cfg)`: `facts.attribute_instances`); none for any
        other name."""
        part = self.parts.get(label)
        of_unit = part["units"].get(unit) if part is not None else None
        parts = name.split(".")
        if (of_unit is None or not of_unit.get("class") or len(parts) < 3
                or of_unit.get("params", [None])[:1] != [parts[0]]):
            return frozenset()
        attribute, method = parts[1], parts[2]
        owner = (label, of_unit["class"])
        if self.member(owner, attribute) is not None:
            return frozenset()  # (a method of the class, not an attribute it binds)
        for cls in [owner, *self.ancestors(owner)]:
            callee = self._facts_of(self._attributes, cls[0], attribute_instances,
                                   {}).get(cls[1], {}).get(attribute)
            if callee is not None:
                return frozenset(
                    found for target in self.resolve(cls[0], callee)
                    if self._kind(target) == "class"
                    for found in [self.member(target, method)] if found is not None)
        return frozenset()

    def ancestors(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        """The project's classes a class derives from, directly or not, nearest first
        (recursion-safe)."""
        found: list[tuple[str, str]] = []
        queue = deque(self.bases(cls))
        while queue:
            base = queue.popleft()
            if base not in found and base != cls:
                found.append(base)
                queue.extend(self.bases(base))
        return found

    def _abstract(self, unit: tuple[str, str]) -> bool:
        return bool(self.parts[unit[0]]["units"][unit[1]].get("abstract"))

    def subclasses(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        """The project's classes that derive from a class, directly or not."""
        if self._subclasses is None:
            self._subclasses = {}
            for label in sorted(self.parts):
                for name, unit in self.parts[label]["units"].items():
                    if unit["kind"] == "class":
                        for base in self.bases((label, name)):
                            self._subclasses.setdefault(base, set()).add((label, name))
        found: set[tuple[str, str]] = set()
        queue = deque([cls])
        while queue:
            for sub in sorted(self._subclasses.get(queue.popleft(), ())):
                if sub not in found and sub != cls:
                    found.add(sub)
                    queue.append(sub)
        return sorted(found)

    def _kind(self, unit: tuple[str, str]) -> str:
        return self.parts[unit[0]]["units"][unit[1]]["kind"]

    def bases(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        """The project's classes a class derives from, directly (its bases as it spells
        them, resolved where it is written)."""
        label, name = cls
        return sorted(target for base in self.parts[label]["units"][name].get("bases", ())
                      for target in self.resolve(label, base)
                      if self._kind(target) == "class" and target != cls)

    def member(self, cls: tuple[str, str], attribute: str, seen: frozenset = frozenset()
               ) -> tuple[str, str] | None:
        """The method unit `attribute` of a class is, its own or the first base's (depth
        first, as Python's order for single inheritance); None if no project class in its
        bases defines it (recursion-safe)."""
        label, name = cls
        if f"{name}.{attribute}" in self.parts[label]["units"]:
            return label, f"{name}.{attribute}"
        for base in self.bases(cls):
            if base not in seen:
                found = self.member(base, attribute, seen | {cls})
                if found is not None:
                    return found
        return None

    def references(self, label: str, unit: str, leaving_out: frozenset[str] = frozenset()
                   ) -> frozenset[tuple[str, str]]:
        """The units one unit refers to (its edges in the reference graph); a class
        refers to its methods. `leaving_out`: names it reads whose units are not counted
        (a branch not taken: `_run_by_call`)."""
        key = (label, unit)
        if key not in self._edges or leaving_out:
            part = self.parts.get(label)
            found: set[tuple[str, str]] = set()
            if part is not None and unit in part["units"]:
                for name in part["units"][unit]["refs"]:
                    if name not in leaving_out:
                        found |= self.resolve_in(label, unit, name)
                if part["units"][unit]["kind"] == "class":
                    found.update((label, method) for method in part["units"]
                                 if method.startswith(f"{unit}."))
            found.discard(key)
            if leaving_out:
                return frozenset(found)
            self._edges[key] = frozenset(found)
        return self._edges[key]

    def units(self, label: str) -> list[tuple[str, str]]:
        part = self.parts.get(label)
        return [] if part is None else [(label, unit) for unit in part["units"]]

    def reached(self, starts: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Every unit that `starts` refer to, transitively (recursion-safe), and `starts`."""
        seen = set(starts)
        queue = deque(sorted(seen))
        while queue:
            for target in sorted(self.references(*queue.popleft())):
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
        return seen

    def callers(self, unit: tuple[str, str]) -> set[tuple[str, str]]:
        """Every unit that refers to `unit`, transitively, and `unit`."""
        if self._callers is None:
            self._callers = {}
            for label in sorted(self.parts):
                for source in self.units(label):
                    for target in self.references(*source):
                        self._callers.setdefault(target, set()).add(source)
        seen = {unit}
        queue = deque([unit])
        while queue:
            for source in sorted(self._callers.get(queue.popleft(), ())):
                if source not in seen:
                    seen.add(source)
                    queue.append(source)
        return seen

    # -- what a file's result depends on ---------------------------------------------------

    def _component_of(self, label: str) -> frozenset[str]:
        """The files connected to `label` by imports, either way (empty: not in the run)."""
        if self._components is None:
            def import_edges(label_: str):
                for _, module, imported, level in self.parts[label_]["imports"]:
                    targets = {self.module(label_, module, level)}
                    if imported not in (None, "*"):
                        targets.add(self.module(label_, f"{module}.{imported}".strip("."),
                                                level))
                    yield from ((label_, target) for target in targets - {None})

            self._components = _joined(self.parts, (edge for label_ in sorted(self.parts)
                                                    for edge in import_edges(label_)))
        return self._components.get(label, frozenset())

    def connected(self, label: str) -> set[str]:
        """The files connected to `label` by imports, either way, transitively, and it."""
        return set(self._component_of(label)) or {label}

    def closure(self, label: str) -> frozenset[str]:
        """Every file a query about `label` may read, `label` included: the files an import
        in any of them may name (the module, its package's `__init__`, every file below the
        package or module it names; in the importing file's folder and in every folder
        above), and the files whose imports may name any of them, transitively. A superset
        of `connected`, which follows only what the imports name exactly: the project of
        these files alone (`subproject`) answers every query about `label` as this one."""
        if self._closures is None:
            self._closures = _closures(self)
        return self._closures.get(label, frozenset({label}))

    def subproject(self, label: str) -> dict[str, dict] | PackedParts:
        """The parts of `closure(label)`, by label, held as this project holds them: the
        whole model of `label`'s queries (one mapping for all the files of one closure)."""
        closure = self.closure(label)
        if closure not in self._subprojects:
            members = sorted(closure)
            self._subprojects[closure] = (
                self.parts.subset(members) if isinstance(self.parts, PackedParts)
                else {m: self.parts[m] for m in members if m in self.parts})
        return self._subprojects[closure]

    def context_digest(self, label: str) -> str:
        """A digest of every part a query about `label` may read (`closure`): what its
        cached result depends on besides its own content."""
        closure = self.closure(label)
        if closure not in self._digests:
            digest = hashlib.sha256()
            for member in sorted(closure):
                digest.update(member.encode("utf-8", "surrogateescape"))
                digest.update(self._part_digest(member))
            self._digests[closure] = digest.hexdigest()
        return self._digests[closure]

    def _part_digest(self, label: str) -> bytes:
        """The digest of one file's part (None: it has none), computed once a run: a part
        is in many closures, and serializing it is most of a warm run's digest time."""
        if label not in self._part_digests:
            text = (self.parts.json(label) if isinstance(self.parts, PackedParts)
                    and label in self.parts else part_json(self.parts.get(label)))
            self._part_digests[label] = hashlib.sha256(text).digest()
        return self._part_digests[label]


def _joined(labels: Iterable[str], edges: Iterable[tuple[str, str]]
            ) -> dict[str, frozenset[str]]:
    """Each label's set of the `labels` that `edges` join, either way, transitively."""
    parent = {label: label for label in labels}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[root(b)] = root(a)
    members: dict[str, set[str]] = {}
    for label in parent:
        members.setdefault(root(label), set()).add(label)
    sets = {r: frozenset(m) for r, m in members.items()}
    return {label: sets[root(label)] for label in parent}


def _closures(project: Project) -> dict[str, frozenset[str]]:
    """`Project.closure` of every file of `project`, by label (one frozenset a closure)."""
    below: dict[str, dict[str, list[str]]] = {}  # dotted name -> {folder: files at or below}
    for path, label in project._by_path.items():
        folder, name = os.path.split(path)
        if not name.endswith(".py"):
            continue
        dotted = [] if name == "__init__.py" else [name[:-3]]
        while True:
            for cut in range(1, len(dotted) + 1):
                below.setdefault(".".join(dotted[:cut]), {}).setdefault(folder, []).append(
                    label)
            parent, last = os.path.split(folder)
            if parent == folder or not last:
                break
            dotted.insert(0, last)
            folder = parent

    def named(folders: list[str], dotted: str) -> list[str]:
        if not dotted:
            return []
        where = below.get(dotted, {})
        return [label for folder in folders for label in where.get(folder, ())]

    def edges():
        for label in sorted(project.parts):
            yield from import_edges(label)

    def import_edges(label: str):
        # (label, a file one of its imports may name), for each
        above = [project._folder(label)]
        while os.path.dirname(above[-1]) != above[-1]:
            above.append(os.path.dirname(above[-1]))
        for _, module, imported, level in project.parts[label]["imports"]:
            folders = above[min(level - 1, len(above) - 1):][:1] if level else above
            module = module.strip(".")
            targets = set()
            if imported is None:  # `import a.b`: anything below `a.b`
                targets.update(named(folders, module))
            else:  # `from a import b`: `a` itself, and anything below `a.b`
                if module:
                    exact = project._modules_named(module)
                    targets.update(exact[where][0] for where in folders if where in exact)
                else:
                    targets.add(project._file(os.path.join(folders[0], "__init__.py")))
                if imported != "*":
                    targets.update(named(folders, f"{module}.{imported}".strip(".")))
            if not level:  # (what `Project.module` finds in a source folder, no folder above)
                for dotted in (module, f"{module}.{imported}" if imported not in (None, "*")
                               else ""):
                    targets.update(project._source_folder_files(dotted, above[0]) or ())
            yield from ((label, target) for target in targets - {None})

    return _joined(project.parts, edges())


def _called(project: Project, targets: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The functions and methods that calling `targets` runs: a function or method itself,
    a class its `__init__` (its own or a base's). Module bodies are not called."""
    found = set()
    for target in targets:
        kind = project._kind(target)
        if kind in ("function", "method"):
            found.add(target)
        elif kind == "class":
            found.add(project.member(target, "__init__"))
    return found - {None}


def _called_functions(project: Project, starts: Iterable[tuple[str, str]], placed_too: bool,
                      through_attributes: bool = False) -> set[tuple[str, str]]:
    """`starts`, the functions and methods they call (only where no device scope of theirs
    places them, unless `placed_too`), and the ones those call so, transitively
    (recursion-safe); `through_attributes`: the methods called on attributes of `self`
    too (`Project.resolve_through_attribute`)."""
    seen: set[tuple[str, str]] = set()
    queue = deque(sorted(starts))
    while queue:
        label, unit = queue.popleft()
        if (label, unit) in seen:
            continue
        seen.add((label, unit))
        unit_of = project.parts[label]["units"][unit]
        for name in unit_of["refs" if placed_too else "free"]:
            targets = project.resolve_in(label, unit, name)
            if through_attributes:
                targets |= project.resolve_through_attribute(label, unit, name)
            for target in sorted(_called(project, targets)):
                if target not in seen:
                    queue.append(target)
    return seen


class _AttributeKinds:
    """What the files connected to one file by imports assign to an attribute name (the
    `attributes` of `FileView.feed_facts`) and whether only optimizers' arguments read it,
    read when first asked of a name, in the files whose text mentions it: a feed's keys ask
    about a few names of a whole package."""

    def __init__(self, project: Project, label: str):
        self.project = project
        self.labels = sorted(project.connected(label))
        self._kinds: dict[str, set[str]] = {}
        self._steering: dict[str, bool] = {}
        self._quiet: dict[str, bool] = {}

    def get(self, name: str, default=()) -> set[str]:
        if name not in self._kinds:
            kinds: set[str] = set()
            for label in self._mentioning(name):
                kinds.update(self.project.feeds(label)["attributes"].get(name, ()))
            self._kinds[name] = kinds
        return self._kinds[name] or set(default)

    def fetch_quiet(self, name: str, chain: frozenset[str] = frozenset()) -> bool:
        """Whether fetching what the connected files assign to attribute `name` writes no
        variable: it is assigned somewhere, never a value that may write one, and every
        attribute those values read is likewise (`fetched` of `graphfix.source.project.feeds`;
        a cycle of names counts as writing)."""
        if not chain and name in self._quiet:
            return self._quiet[name]
        entries = [facts[name] for label in self._mentioning(name)
                   if name in (facts := self.project.feeds(label).get("fetched", {}))]
        quiet = bool(entries) and not any(e["writes"] for e in entries) and all(
            read not in chain and self.fetch_quiet(read, chain | {name})
            for e in entries for read in e["reads"])
        if not chain:
            self._quiet[name] = quiet
        return quiet

    def steering_only(self, name: str) -> bool:
        """Whether the connected files read `name` in an optimizer's arguments and nowhere
        that may put it on a loss's path (`steering`, `graph_reads` of
        `graphfix.source.project.feeds`): a variable so read is one no optimizer updates."""
        if name not in self._steering:
            steering = elsewhere = False
            for label in self._mentioning(name):
                reads = self.project.reads(label)
                steering |= name in reads["steering"]
                elsewhere |= name in reads["graph_reads"]
            self._steering[name] = steering and not elsewhere
        return self._steering[name]

    def _mentioning(self, name: str) -> list[str]:
        mention = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
        return [label for label in self.labels
                if (code := self.project._code_of(label)) is not None and mention.search(code)]


def _run_by_call(project: Project, start: tuple[str, str], flags: dict[str, bool]
                 ) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """The units a call of `start` runs: `start` and the units it refers to, transitively,
    but no module body (a function that reads a module's name does not run the module's
    code: that ran at import) and nothing named only in a branch that the call's `flags`
    (keyword: literal value, given by the call) do not take (`Project.flag_branches`:
    `Model(reuse_variables=True)` never runs the `else:` of its `if
    self.reuse_variables:`, a flag keeps its name as it is passed on). Each unit with the
    line ranges of its code so left unrun."""
    out: dict[tuple[str, str], list[tuple[int, int]]] = {}
    queue = deque([start])
    while queue:
        label, unit = key = queue.popleft()
        if key in out or unit == MODULE_BODY:
            continue
        part = project.parts.get(label)
        unrun: list[tuple[int, int]] = []
        names: set[str] = set()
        if flags and part is not None and unit in part["units"]:
            for line, first, last, flag, taken, only in project.flag_branches(label):
                # (a class reads what its methods read: theirs are its own)
                if flags.get(flag, taken) != taken and unit_at(part, line) in (
                        unit, *(m for m in part["units"] if m.startswith(f"{unit}."))):
                    names.update(only)
                    if first is not None:
                        unrun.append((first, last))
        out[key] = unrun
        queue.extend(sorted(project.references(label, unit, frozenset(names))))
    return out


def _spans_run(spans: list[list[int]], unrun: list[tuple[int, int]]
               ) -> list[tuple[int, int]]:
    """A unit's line spans without the line ranges left unrun."""
    pieces = [tuple(span) for span in spans]
    for first, last in unrun:
        pieces = [piece for a, b in pieces
                  for piece in ([(a, b)] if b < first or last < a
                                else [(a, first - 1), (last + 1, b)])
                  if piece[0] <= piece[1]]
    return pieces


class FileView:
    """The project model as one file's rules ask it."""

    def __init__(self, project: Project, label: str, stale: bool = False):
        self.project, self.label = project, label
        self.stale = stale  # the file changed since its part was read (see `stale_copy`)
        self._strict_regions: list[tuple[int, int]] | None = None  # see `reuses_at`

    def stale_copy(self) -> FileView:
        """This view, marked as read before the file changed: the rule that asks it reads
        the file's part anew (`SourceCodemod.project`)."""
        return FileView(self.project, self.label, stale=True)

    @property
    def part(self) -> dict | None:
        return self.project.parts.get(self.label)

    def variables_created_by(self, callee: str, placed_too: bool = False,
                             line: int | None = None
                             ) -> tuple[str, str, int, str | None] | None:
        """The first variable a call of `callee` (a dotted name as this file spells it, at
        `line`: `self.build` in a method is its class's) creates in the project's functions
        and methods (a class's: its `__init__`), through the ones they call, where no device
        scope of theirs places it (so the caller's does; `placed_too`: anywhere), as
        (path, name, line, dtype named or None); None if it creates none, or `callee` is no
        function, method or class of the project. A call where reuse is on already
        (`reuses_at(line)`) creates only what `tf.Variable` and its kind make: the
        get_variable family (`REUSED_UNDER_REUSE`) gives back what an earlier call made."""
        part = self.part
        if part is None:
            return None
        unit = unit_at(part, line) if line is not None else MODULE_BODY
        reusing = line is not None and self.reuses_at(line)
        starts = _called(self.project, self.project.resolve_in(self.label, unit, callee))
        return self._first_variable(starts, placed_too, reusing)

    def variables_placed_in_callees(self, callee: str, line: int
                                    ) -> list[tuple[str, str, str, int, str | None]]:
        """The variables a call of `callee` at `line` reaches, as `variables_created_by`
        follows it, that a device scope of the function making them places, as (path, code
        of that file, name, line, dtype named or None), this file's first, then by path and
        line: for a rule that reads those scopes itself (one naming only a job and a task
        keeps the caller's device type, as TF merges device specs)."""
        part = self.part
        if part is None:
            return []
        reusing = self.reuses_at(line)
        starts = _called(self.project, self.project.resolve_in(self.label, unit_at(part, line),
                                                               callee))
        found = []
        for label, unit in _called_functions(self.project, starts, False):
            code = self.project._code_of(label)
            for name, at, dtype, placed in self.project.parts[label]["units"][unit][
                    "variables"]:
                if placed and code is not None and not (reusing and name in REUSED_UNDER_REUSE):
                    found.append((label, code, name, at, dtype))
        return sorted(found, key=lambda f: (f[0] != self.label, f[0], f[3]))

    def variables_created_through_attributes(self, callee: str, line: int
                                             ) -> tuple[str, str, int, str | None] | None:
        """`variables_created_by`, following also the methods called on attributes of an
        object's own (`self._model.compute_loss(...)` where the class bound `self._model =
        LaneNet(cfg)` once: `Project.resolve_through_attribute`), in `callee` and in what
        it calls."""
        part = self.part
        if part is None:
            return None
        unit = unit_at(part, line)
        targets = (self.project.resolve_in(self.label, unit, callee)
                   | self.project.resolve_through_attribute(self.label, unit, callee))
        return self._first_variable(_called(self.project, targets), False,
                                    self.reuses_at(line), through_attributes=True)

    def code_run_by(self, callee: str, line: int) -> list[tuple[str, str, list[tuple[int, int]]]]:
        """The project's functions and methods a call of `callee` at `line` runs (resolved
        as `variables_created_through_attributes` resolves it) and the ones they call,
        under a device scope of theirs or not, methods called on attributes of an object's
        own too: as (label, that file's code, the unit's spans of lines), by label and
        first line; none where `callee` is none of the project's."""
        part = self.part
        if part is None:
            return []
        unit = unit_at(part, line)
        targets = (self.project.resolve_in(self.label, unit, callee)
                   | self.project.resolve_through_attribute(self.label, unit, callee))
        found = []
        for label, name in _called_functions(self.project, _called(self.project, targets), True,
                                             through_attributes=True):
            code = self.project._code_of(label)
            spans = [(first, last) for first, last in self.project.parts[label]["units"][name][
                "spans"]]
            if code is not None and spans:
                found.append((label, code, spans))
        return sorted(found, key=lambda f: (f[0], f[2][0]))

    def _first_variable(self, starts: Iterable[tuple[str, str]], placed_too: bool,
                        reusing: bool, through_attributes: bool = False
                        ) -> tuple[str, str, int, str | None] | None:
        """`variables_created_by`'s answer for a call that runs `starts`."""
        found = []
        for label, unit in _called_functions(self.project, starts, placed_too,
                                             through_attributes):
            for name, line, dtype, placed in self.project.parts[label]["units"][unit][
                    "variables"]:
                if reusing and name in REUSED_UNDER_REUSE:
                    continue
                if placed_too or not placed:
                    found.append((label != self.label, label, line, name, dtype))
        if not found:
            return None
        _, label, line, name, dtype = min(found, key=lambda f: f[:3])
        return label, name, line, dtype

    def creates_only_through_caches(self, callee: str, line: int) -> bool:
        """Whether every variable a call of `callee` at `line` creates, as
        `variables_created_by` follows it, is made under a get-or-create test of a cache
        (`if name not in _params: _params[name] = tf.Variable(...)`, tflib's `lib.param`):
        a second call of the function asks for the same names and gets the first call's
        variables back, creating none. False where it creates none, or any elsewhere."""
        part = self.part
        if part is None:
            return False
        reusing = self.reuses_at(line)
        starts = _called(self.project, self.project.resolve_in(self.label, unit_at(part, line),
                                                               callee))
        made = [(label, at) for label, unit in _called_functions(self.project, starts, False)
                for name, at, _, placed in self.project.parts[label]["units"][unit]["variables"]
                if not placed and not (reusing and name in REUSED_UNDER_REUSE)]
        return bool(made) and all(self._cache_guarded(label, at) for label, at in made)

    def _cache_guarded(self, label: str, line: int) -> bool:
        """Whether `line` of file `label` lies in the body of an `if KEY not in CACHE:`."""
        cache = self.project._cache_guards
        if label not in cache:
            code = self.project._code_of(label)
            tree = None if code is None else parsed(code)
            cache[label] = [] if tree is None else [
                (node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno)
                for node in ast.walk(tree) if isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.NotIn)]
        return any(first <= line <= last for first, last in cache[label])

    def _callees(self, callee: str, line: int) -> list[tuple[tuple[str, str], int]]:
        """The project functions and methods a call of `callee` at `line` runs first (a
        class: its `__init__`), each with how many parameters come before the call's first
        argument (1 for a method's `self`)."""
        part = self.part
        if part is None:
            return []
        project, found = self.project, []
        for target in sorted(project.resolve_in(self.label, unit_at(part, line), callee)):
            kind = project._kind(target)
            if kind == "class":
                target = project.member(target, "__init__")
            elif kind not in ("function", "method"):
                continue
            if target is not None:
                found.append((target, 0 if kind == "function" else 1))
        return found

    def _parameter(self, target: tuple[str, str], shift: int, given: int | str) -> str | None:
        """The parameter of function `target` an argument binds: `given` a position among
        the call's arguments or a keyword."""
        unit = self.project.parts[target[0]]["units"][target[1]]
        params = unit.get("params", [])
        if isinstance(given, int):
            return params[given + shift] if given + shift < len(params) else None
        return given if given in params or given in unit.get("kwonly", []) else None

    def reuse_arguments(self, callee: str, line: int, given: Iterable[int | str]
                        ) -> set[int | str]:
        """Of a call's arguments (`given`: positions and keywords), those that the
        project function or method it calls passes on as a `reuse=` (`def tower(x,
        initialized): ... build(x, reuse=initialized)`): given True, the call reuses what
        an earlier one made."""
        found: set[int | str] = set()
        for target, shift in self._callees(callee, line):
            reused = set(self.project.parts[target[0]]["units"][target[1]].get(
                "reuse_params", ()))
            found.update(g for g in given if self._parameter(target, shift, g) in reused)
        return found

    def variables_created_through_objects(
            self, callee: str, line: int, passed: Iterable[tuple[int | str, str]]
    ) -> tuple[str, str, int, str | None, str] | None:
        """`variables_created_by` for the objects a call of `callee` at `line` is given:
        `passed` holds its arguments that are names, as (position or keyword, name). Where
        the unit at `line` binds such a name once to an instance of one of the project's
        classes (`net = Net(...)`), the methods of that class the function calls on the
        parameter it binds (`def tower(x, net): net.loss(x)`) run in the call. The answer
        ends with the method as the function spells it (`net.loss`)."""
        part = self.part
        if part is None:
            return None
        project = self.project
        unit = unit_at(part, line)
        instances = part["units"][unit].get("instances", {})
        reusing = self.reuses_at(line)
        for given, name in passed:
            made = instances.get(name)
            if made is None:
                continue
            classes = [c for c in project.resolve_in(self.label, unit, made)
                       if project._kind(c) == "class"]
            for target, shift in self._callees(callee, line):
                parameter = self._parameter(target, shift, given)
                if parameter is None or not classes:
                    continue
                for ref in project.parts[target[0]]["units"][target[1]]["free"]:
                    head, _, attribute = ref.partition(".")
                    if head != parameter or not attribute:
                        continue
                    method = attribute.split(".")[0]
                    starts = {project.member(c, method) for c in classes} - {None}
                    first = self._first_variable(starts, False, reusing)
                    if first is not None:
                        return (*first, f"{parameter}.{method}")
        return None

    def imported_by_others(self) -> bool:
        """Whether another file of the run imports this file's module (`import m`, `from m
        import x`, `from m import *`): a name this file binds may be read there, so a
        rename here would break it."""
        project = self.project
        return any(project.module(other, module, level) == self.label
                   or (imported not in (None, "*") and project.module(
                       other, f"{module}.{imported}".strip("."), level) == self.label)
                   for other in project.connected(self.label) if other != self.label
                   for _, module, imported, level in project.parts[other]["imports"])

    def tf_name_of_import(self, qualified: str) -> str | None:
        """The TF qualified name that a qualified name through a project module stands for
        (`helpers.tf1.Variable` -> `tensorflow.compat.v1.Variable`, where helpers.py does
        `import tensorflow.compat.v1 as tf1`); None if it stands for none."""
        return self._tf_through(self.label, qualified, 0)

    def tf_name_of_star(self, name: str) -> str | None:
        """The TF qualified name that a name no statement of this file binds stands for
        through its `from module import *` of the project's modules, followed as Python
        does (`tf` in resnet.py, whose `from hyper_parameters import *` brings the
        `import tensorflow as tf` of hyper_parameters.py); None if it stands for none."""
        return self._tf_of_star(self.label, name, set())

    def _tf_of_star(self, label: str, name: str, seen: set[str]) -> str | None:
        part = self.project.parts.get(label)
        if part is None or label in seen or name.startswith("_"):
            return None
        seen.add(label)
        for bound, module, _, level in part["imports"]:
            target = self.project.module(label, module, level) if bound == "*" else None
            if target is None or self.project.parts.get(target) is None:
                continue
            found = self.project.parts[target]["tf"].get(name)
            if found is None:
                found = self._tf_of_star(target, name, seen)
            if found is not None:
                return found
        return None

    def _tf_through(self, label: str, qualified: str, depth: int) -> str | None:
        if depth > 5:
            return None
        level = len(qualified) - len(qualified.lstrip("."))
        parts = qualified[level:].split(".")
        for cut in range(len(parts) - 1, 0, -1):
            target = self.project.module(label, ".".join(parts[:cut]), level)
            if target is None:
                continue
            name, rest = parts[cut], parts[cut + 1:]
            part = self.project.parts[target]
            if name in part["tf"]:
                return ".".join([part["tf"][name], *rest])
            for bound, module, imported, from_level in part["imports"]:
                if bound == name and imported not in (None, "*"):
                    prefix = "." * from_level + (f"{module}." if module else "")
                    return self._tf_through(target, f"{prefix}{imported}"
                                            + "".join(f".{r}" for r in rest), depth + 1)
            return None
        return None

    def connected_code(self) -> dict[str, str]:
        """The code of this file and of the files its imports connect it to, either way
        (`Project.connected`), by path, for a rule that reads a fact no part holds (which
        models make sparse or unshared variables) once it has work; unreadable ones left
        out."""
        codes = {label: self.project._code_of(label)
                 for label in sorted(self.project.connected(self.label))}
        return {label: code for label, code in codes.items() if code is not None}

    def first_call(self, names: frozenset[str]) -> str | None:
        """Where (`path:line`: the first line, of the first file in path order) this file
        or one its imports connect it to (`connected_code`) calls one of TF's `names`
        (canonical, as `graphfix.source.vocabulary` spells them); None if none does."""
        for path, code in self.connected_code().items():
            if not any(name.rsplit(".", 1)[-1] in code for name in names):
                continue
            try:
                tree = ast.parse(code)
            except (SyntaxError, ValueError):
                continue
            tf_names = AstTfNames(tree)
            lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and tf_names.canonical(node.func) in names]
            if lines:
                return f"{path}:{min(lines)}"
        return None

    def feed_facts(self) -> dict:
        """What the files connected to this one by imports (either way, this one
        included) say about the names a feed key may hold (`graphfix.source.project.feeds`),
        merged: {"attributes": {name: set of kinds}, "updated", "monitored", "names": sets}."""
        merged: dict = {"attributes": {}, "updated": set(), "monitored": set(), "names": set()}
        for label in sorted(self.project.connected(self.label)):
            facts = self.project.feeds(label)
            for name, kinds in facts["attributes"].items():
                merged["attributes"].setdefault(name, set()).update(kinds)
            for key in ("updated", "monitored", "names"):
                merged[key].update(facts[key])
        return merged

    def reusing_regions(self) -> list[tuple[int, int, str, int | None]]:
        """The regions of this file whose code runs under a variable scope that reuses, as
        (first line, last line, why, strict), in line order (`strict`: the line from which
        on reuse is on already on the first pass, None where it is not; see
        `graphfix.source.project.facts.reuse_facts`): its own (`Project.reuse`), and the
        code of its units that code under such a scope calls, in this file or one connected
        to it by imports, transitively (a tower loop's `tower_loss(scope)` in train.py
        runs model.py's `inference` under the loop's reuse), but not a module's body, nor
        a branch a flag given by the call does not take (`_run_by_call`)."""
        project, own = self.project, self.label
        found = [tuple(region) for region in project.reuse(own)["regions"]]
        said: dict[tuple[str, str], tuple[str, bool]] = {}  # a unit: its first call's
        runs: dict[tuple, dict] = {}
        for label in sorted(project.connected(own)):
            part = project.parts.get(label)
            if part is None:
                continue
            for line, callee, why, strict, flags in project.reuse(label)["calls"]:
                for target in sorted(project.resolve_in(label, unit_at(part, line), callee)):
                    key = (target, tuple(sorted(flags.items())))
                    if key not in runs:
                        runs[key] = _run_by_call(project, target, flags)
                    for reached, unrun in sorted(runs[key].items()):
                        said.setdefault(reached, (f"called at {label}:{line} under {why}",
                                                  strict))
                        if reached[0] != own:
                            continue
                        why_here, strict_here = said[reached]
                        for first, last in _spans_run(
                                project.parts[own]["units"][reached[1]]["spans"], unrun):
                            found.append((first, last, why_here,
                                          first if strict_here else None))
        return sorted(set(found), key=lambda r: (r[0], r[1], r[2], r[3] or 0))

    def tower_code(self) -> list[tuple[int, int]]:
        """The line ranges of this file whose code runs once per tower (`Project.towers`:
        a loop building a tower per pass, a tower function's device scope), and the code of
        its units that tower code calls, in this file or one connected to it by imports,
        transitively (the model function a tower loop in train.py calls), but not a
        module's body, nor a branch a flag given by the call does not take
        (`_run_by_call`). A variable made there is made once per tower."""
        project, own = self.project, self.label
        found = [tuple(span) for span in project.towers(own)["spans"]]
        runs: dict[tuple, dict] = {}
        for label in sorted(project.connected(own)):
            part = project.parts.get(label)
            if part is None:
                continue
            for line, callee, flags in project.towers(label)["calls"]:
                for target in sorted(project.resolve_in(label, unit_at(part, line), callee)):
                    key = (target, tuple(sorted(flags.items())))
                    if key not in runs:
                        runs[key] = _run_by_call(project, target, flags)
                    for reached, unrun in runs[key].items():
                        if reached[0] == own:
                            found.extend(_spans_run(
                                project.parts[own]["units"][reached[1]]["spans"], unrun))
        return sorted(set(found))

    def reusing_regions_through_objects(self) -> list[tuple[int, int, str, int | None]]:
        """`reusing_regions`, and the code of this file's methods that a call under a
        reusing scope runs on an object it gives the function it calls
        (`_methods_run_on_objects`: `tower_loss(scope, vgg)` under the tower loop's
        `reuse_variables()` runs `vgg.inference`, and what that calls), as `(first line,
        last line, why, strict)`."""
        project, own = self.project, self.label
        found = list(self.reusing_regions())
        for label, line, callee, why, strict in self._calls_giving_names(
                lambda label: [(c[0], c[1], c[2], c[3]) for c in project.reuse(label)["calls"]]):
            for first, last in self._run_on_objects(label, line, callee):
                found.append((first, last, f"called at {label}:{line} under {why}",
                              first if strict else None))
        return sorted(set(found), key=lambda r: (r[0], r[1], r[2], r[3] or 0))

    def tower_code_through_objects(self) -> list[tuple[int, int]]:
        """`tower_code`, and the code of this file's methods that tower code runs on an
        object it gives the function it calls (`_methods_run_on_objects`: the tower loop's
        `tower_loss(scope, vgg)`, with `vgg = VGG16(...)` made once before the loop, runs
        `vgg.inference` once per tower, and what that calls)."""
        project = self.project
        found = list(self.tower_code())
        for label, line, callee, _, _ in self._calls_giving_names(
                lambda label: [(c[0], c[1], None, None) for c in project.towers(label)["calls"]]):
            found.extend(self._run_on_objects(label, line, callee))
        return sorted(set(found))

    def _calls_giving_names(self, calls_of: Callable[[str], list[tuple]]
                            ) -> Iterable[tuple[str, int, str, str | None, bool | None]]:
        """(label, line, callee, why, strict) for each call `calls_of(label)` lists, in the
        files connected to this one, that gives names as arguments (`Project.names_passed`,
        read only of a file that lists calls)."""
        project = self.project
        for label in sorted(project.connected(self.label)):
            if label not in project.parts:
                continue
            calls = calls_of(label)
            if not calls:
                continue
            passing = {(line, callee) for line, callee, _ in project.names_passed(label)}
            for line, callee, why, strict in calls:
                if (line, callee) in passing:
                    yield label, line, callee, why, strict

    def _run_on_objects(self, label: str, line: int, callee: str) -> list[tuple[int, int]]:
        """The line ranges of this file that the methods a call of `callee` at `label:line`
        runs on the objects it is given (`_methods_run_on_objects`) run, and what those
        call, transitively (`_run_by_call`: no flag is known of them)."""
        project, own = self.project, self.label
        found: list[tuple[int, int]] = []
        for start in sorted(self._methods_run_on_objects(label, line, callee)):
            for reached, unrun in _run_by_call(project, start, {}).items():
                if reached[0] == own:
                    found.extend(_spans_run(project.parts[own]["units"][reached[1]]["spans"],
                                            unrun))
        return found

    def _methods_run_on_objects(self, label: str, line: int, callee: str
                                ) -> set[tuple[str, str]]:
        """The methods a call of `callee` at line `line` of file `label` runs on the objects
        it is given: where the unit making the call binds a name it passes once to an
        instance of one of the project's classes (`vgg = vgg16.VGG16(...)`), the methods
        of that class the function called calls on the parameter taking it (`def
        tower_loss(scope, vgg): ... vgg.inference(images)`). The project model's
        references stop at a parameter (`Project.resolve_in`): what it holds is the
        caller's."""
        project = self.project
        part = project.parts[label]
        unit = unit_at(part, line)
        instances = part["units"][unit].get("instances", {})
        caller = project.view(label)
        found: set[tuple[str, str]] = set()
        for at, spelled, passed in project.names_passed(label):
            if (at, spelled) != (line, callee):
                continue
            for given, name in passed:
                made = instances.get(name)
                classes = [] if made is None else [
                    c for c in project.resolve_in(label, unit, made)
                    if project._kind(c) == "class"]
                if not classes:
                    continue
                for target, shift in caller._callees(callee, line):
                    parameter = caller._parameter(target, shift, given)
                    if parameter is None:
                        continue
                    for ref in project.parts[target[0]]["units"][target[1]]["refs"]:
                        head, _, attribute = ref.partition(".")
                        if head == parameter and attribute:
                            method = attribute.split(".")[0]
                            found.update({project.member(c, method) for c in classes} - {None})
        return found

    def reuses_at(self, line: int) -> bool:
        """Whether code at `line` of this file runs, every time it runs, where reuse is on
        already (inside its own `with variable_scope(..., reuse=True)`, or after its
        `reuse_variables()`: a strict region of `Project.reuse`), so that the get_variable
        family finds the variables made before and creates none. AUTO_REUSE and
        `reuse=<expression>` create them the first time; a function that some callers call
        under reuse (`reusing_regions`) may be called by another that creates."""
        if self._strict_regions is None:  # (asked of every call that may create variables)
            self._strict_regions = [
                (max(first, strict), last) for first, last, _, strict
                in self.project.reuse(self.label)["regions"] if strict is not None]
        return any(first <= line <= last for first, last in self._strict_regions)

    def reuses_within(self, first: int, last: int) -> bool:
        """Whether any code of lines `first`..`last` of this file may run where a variable
        scope reuses: a region of `Project.reuse` (reuse=True, AUTO_REUSE, reuse=<expr>,
        after a `reuse_variables()`) overlaps them or holds them."""
        return any(start <= last and first <= end
                   for start, end, _, _ in self.project.reuse(self.label)["regions"])

    def feed_reader(self) -> FeedFacts | None:
        """The file read as feed-to-assign reads a feed key: `kind(key)` of a node of
        `tree`, through the file's scopes and what the files connected to it assign
        (`feed_facts`); None if its code is not known or cannot be parsed."""
        code = self.project._code_of(self.label)
        tree = parsed(code) if code is not None else None
        if tree is None:
            return None
        connected = _AttributeKinds(self.project, self.label)
        return FeedFacts(tree, AstTfNames(tree),
                         {"attributes": connected, "steering_only": connected.steering_only,
                          "quiet": connected.fetch_quiet})

    def cluster_reaching(self, line: int | None = None) -> tuple[str, int, int | None] | None:
        """The cluster with a ps job (path, line, ps task count or None) that code at `line`
        of this file (None: any of its code) runs with: made there, or by a unit whose
        program it is in (`graphfix.source.project.cluster`); None if no cluster's program
        holds it."""
        part = self.part
        if part is None:
            return None
        programs = cluster_programs(self.project).of
        units = [unit_at(part, line)] if line is not None else list(part["units"])
        found = [programs[(self.label, u)] for u in units if (self.label, u) in programs]
        return min(found) if found else None

    def gets_cluster(self, line: int) -> bool:
        """Whether the unit at `line` of this file makes a cluster with a ps job or calls
        the function that makes one: a cluster program's entry."""
        part = self.part
        return part is not None and (self.label, unit_at(part, line)) in cluster_programs(
            self.project).entries

    def ps_scopes(self) -> list[int]:
        """The lines of the file's device scopes on the ps job."""
        part = self.part
        return [] if part is None else list(part.get("ps_scopes", ()))

    def batch_norms(self) -> list[tuple[str, int]]:
        """The file's own batch norms that train and feed UPDATE_OPS: (name, line)."""
        part = self.part
        return [] if part is None else [tuple(b) for b in part["batch_norms"]]

    def unread_update_ops(self, line: int | None = None) -> list[tuple[str, int]]:
        """The file's lists of the UPDATE_OPS collection that nothing reads
        (`graphfix.source.project.facts.unread_update_ops`), as (name, line): those of the
        unit `line` is in (None: all of them)."""
        part = self.part
        found = [] if part is None else [tuple(u) for u in part.get("unread_update_ops", ())]
        if line is not None:
            unit = unit_at(part, line)
            found = [u for u in found if unit_at(part, u[1]) == unit]
        return found

    def batch_norms_reaching(self, line: int | None = None) -> list[tuple[str, str, int]]:
        """The batch norms of other files that code at `line` of this file (None: anywhere
        in it) may run with: those the file refers to (through its imports, transitively),
        and those of the code that refers to the unit `line` is in (its callers, which may
        build the model before they call it). (path, name, line), in path and line order."""
        part = self.part
        if part is None:
            return []
        project = self.project
        found = set()
        entries = self._entries(line)
        for label, unit in self._program(line):
            if label == self.label:
                continue
            unit_of = project.parts[label]
            for name, at in unit_of["batch_norms"]:
                if unit_at(unit_of, at) == unit and project.builds_batch_norm(
                        label, at, entries):
                    found.add((label, name, at))
        return sorted(found, key=lambda b: (b[0], b[2], b[1]))

    def lists_tied_elsewhere(self, function: str, parameter: str, position: int | None,
                             method: bool) -> tuple[int, bool]:
        """How many calls of `function` (a function or method of this file) the other files
        connected to this one have, and whether each passes as its list `parameter` one its
        caller ties to the update ops
        (`graphfix.source.project.facts.lists_tied_to_update_ops`)."""
        calls, tied = 0, True
        for tree, names in self.project._trees_naming(self.label, function, but=self.label):
            seen, each = lists_tied_to_update_ops(tree, names, function, parameter, position,
                                                  method)
            calls, tied = calls + seen, tied and each
        return calls, tied

    def called_under_update_ops_elsewhere(self, function: str) -> tuple[int, bool]:
        """How many calls of `function` (a function of this file) the other files connected
        to this one have, and whether each is made inside a block over the update ops
        (`graphfix.source.project.facts.calls_under_update_ops`)."""
        calls, under = 0, True
        for tree, names in self.project._trees_naming(self.label, function, but=self.label):
            seen, each = calls_under_update_ops(tree, names, function)
            calls, under = calls + seen, under and each
        return calls, under

    def update_ops_hook(self) -> tuple[str, str, int] | None:
        """(path, class, line) of the first session hook (`facts.update_ops_hooks`) of the
        files connected to this one that runs the UPDATE_OPS collection beside every step,
        and that some connected file makes (`RunUpdateOps()`, in tensorpack's default
        callbacks); None where there is none."""
        codes = self.connected_code()
        for label, code in codes.items():
            if "before_run" not in code or "UPDATE_OPS" not in code and "update_ops" not in code:
                continue
            tree = parsed(code)
            for name, line in update_ops_hooks(tree) if tree is not None else ():
                made = re.compile(rf"(?<!class )\b{re.escape(name)}\s*\(")
                if any(made.search(other) for other in codes.values()):
                    return label, name, line
        return None

    def fills_list_from_callback(self, callee: str, line: int, given: dict[str | int, str],
                                 into: str, callback: str) -> bool:
        """Whether the function `callee` names at `line` of this file (one of this file's
        or, through its imports, another's) calls the function passed as `callback` and
        adds to the list passed as `into` (`graphfix.source.project.facts.
        fills_list_from_callback`); False where the callee is not known."""
        elsewhere = self.function_elsewhere(callee, line)
        if elsewhere is not None:
            _, code, function, first = elsewhere
        else:
            code, function, first = self.project._code_of(self.label), callee, None
            if "." in callee:
                return False
        tree = parsed(code) if code is not None else None
        return tree is not None and fills_list_from_callback(tree, function, first, given,
                                                             into, callback)

    def batch_norms_built(self, line: int) -> list[tuple[str, int]]:
        """`batch_norms`, less those no code run with the train op at `line` builds
        training (`Project.builds_batch_norm`: a layer method nothing calls, a training
        flag defaulting to False that no call sets)."""
        entries = self._entries(line)
        return [b for b in self.batch_norms()
                if self.project.builds_batch_norm(self.label, b[1], entries)]

    def _entries(self, line: int | None) -> set[tuple[str, str]]:
        """The unit code at `line` is in and its callers (every unit of the file for
        None): they run, whoever calls them."""
        part = self.part
        if part is None:
            return set()
        if line is None:
            return set(self.project.units(self.label))
        return self.project.callers((self.label, unit_at(part, line)))

    def function_elsewhere(self, name: str, line: int) -> tuple[str, str, str, int] | None:
        """(path, code, function name, first line) of the function of another file of the
        project that `name`, read at `line` of this file, refers to (`assign_to_gpu` after
        `from common import assign_to_gpu`, `common.assign_to_gpu` after `import common`),
        with that file's code, for a rule that reads the function itself (a device
        function's test of op types); None where it names no top-level function of another
        file, names several, or that file's code is not known."""
        part = self.part
        if part is None:
            return None
        targets = self.project.resolve_in(self.label, unit_at(part, line), name)
        if len(targets) != 1:
            return None
        ((label, unit),) = targets
        if label == self.label or self.project._kind((label, unit)) != "function":
            return None
        code = self.project._code_of(label)
        if code is None:
            return None
        return label, code, unit, self.project.parts[label]["units"][unit]["spans"][0][0]

    def importers(self) -> list[str]:
        """The files of the run whose imports reach this one, directly or through others
        (the scripts that run its code), this one left out, in path order."""
        project, found = self.project, set()
        connected = sorted(project.connected(self.label))
        reaching = {self.label}
        while True:
            more = {label for label in connected if label not in reaching | found
                    and any(project.module(label, module, level) in reaching
                            or (imported not in (None, "*") and project.module(
                                label, f"{module}.{imported}".strip("."), level) in reaching)
                            for _, module, imported, level in project.parts[label]["imports"])}
            if not more:
                return sorted(found)
            found |= more
            reaching |= more

    def soft_placing_importer(self) -> str | None:
        """The first file (in path order) of those that import this one (`importers`)
        whose code configures a session with `allow_soft_placement=True`
        (`ConfigProto(allow_soft_placement=True)`, `config.allow_soft_placement = True`):
        TF runs this file's graph there moving what has no kernel on its device to the CPU.
        None if none does, or their code is not known."""
        for label in self.importers():
            code = self.project._code_of(label)
            if code is None or "allow_soft_placement" not in code:
                continue
            tree = parsed(code)
            if tree is not None and _sets_soft_placement(tree):
                return label
        return None

    def flag_default(self, name: str) -> tuple[object, str, int] | None:
        """(default, path, line) of command-line flag `name` as the files connected to this
        one by imports define it (`DEFINE_string("device_type", "gpu", ...)` in the script
        that runs this module, `add_argument("--device_type", default="gpu")`): what a
        flags object's attribute of that name holds unless the user says otherwise. None
        where no file defines it with a literal default, or two give different ones."""
        found = []
        for label in sorted(self.project.connected(self.label)):
            code = self.project._code_of(label)
            if code is None or name not in code and name.replace("_", "-") not in code:
                continue
            tree = parsed(code)
            if tree is not None:
                found += [(default, label, line)
                          for default, line in _flag_definitions(tree, name)]
        if not found or len({repr(default) for default, _, _ in found}) != 1:
            return None
        return found[0]

    def _program(self, line: int | None, whole_file: bool = True) -> set[tuple[str, str]]:
        """The units code at `line` of this file (None: anywhere in it) may run with: the
        code that refers to the unit `line` is in (its callers, which may build the model
        first), this file's units unless not `whole_file`, and what they all refer to
        (through imports, transitively)."""
        part, project = self.part, self.project
        units = project.units(self.label)
        starts = set(units) if whole_file or line is None else set()
        for here in ([(self.label, unit_at(part, line))] if line is not None else units):
            starts |= project.callers(here)
        return project.reached(starts)

    def unrun_collections(self, line: int | None = None) -> list[tuple[str, str, int, str | None]]:
        """The moving-average updates collected into a collection of the project's own that
        no code connected to this file by imports (`connected_code`) reads with
        `get_collection` (`Project.collections`), that code at `line` of this file (None:
        anywhere in it) may run with: those of the units its function calls, or its callers
        do (`batch_norms_reaching`'s program, this file's other units not in it). As (key, path, line, the module constant that spells the
        key or None), in path and line order; none where some code reads a collection whose
        key it does not spell out."""
        part = self.part
        if part is None:
            return []
        project = self.project
        connected = sorted(project.connected(self.label))
        added = [(label, m) for label in connected
                 for m in project.collections(label)["moving_averages"]]
        if not added:
            return []
        read: set[str] = set()
        for label in connected:
            facts = project.collections(label)
            if facts["reads_any"]:
                return []
            read.update(facts["read"])
        # (a hand-written batch norm of the train op's own file that its program never
        # calls is another model's: ethanhe42/context-cifar's cifar10.py keeps one beside
        # the model it trains)
        program = self._program(line, whole_file=False)
        found = set()
        for label, (key, at, constant) in added:
            if key not in read and (label, unit_at(project.parts[label], at)) in program:
                found.add((key, label, at, constant))
        return sorted(found, key=lambda m: (m[1], m[2], m[0]))


def _sets_soft_placement(tree: ast.Module) -> bool:
    """Whether a module passes `allow_soft_placement=True` or assigns True to an
    `allow_soft_placement` attribute."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if any(k.arg == "allow_soft_placement" and isinstance(k.value, ast.Constant)
                   and k.value.value is True for k in node.keywords):
                return True
        elif isinstance(node, ast.Assign):
            if (isinstance(node.value, ast.Constant) and node.value.value is True
                    and any(isinstance(t, ast.Attribute) and t.attr == "allow_soft_placement"
                            for t in node.targets)):
                return True
    return False


# Flag definitions: absl's / tf.app.flags' `DEFINE_string("name", default, help)` (and
# DEFINE_enum, DEFINE_integer, ...), argparse's `add_argument("--name", default=...)`.
_DEFINE = re.compile(r"DEFINE_\w+$")


def _flag_definitions(tree: ast.Module, name: str) -> Iterable[tuple[object, int]]:
    """(default, line) of each definition of flag `name` in a module, where the default is
    a literal."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if _DEFINE.match(called):
            flag = node.args[0] if node.args else keywords.get("name")
            default = node.args[1] if len(node.args) > 1 else keywords.get("default")
            spelled = flag.value if isinstance(flag, ast.Constant) else None
        elif called == "add_argument":
            options = [a.value for a in node.args
                       if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = keywords.get("dest")
            spelled = (dest.value if isinstance(dest, ast.Constant) else next(
                (o.lstrip("-").replace("-", "_") for o in options if o.startswith("--")),
                None))
            default = keywords.get("default")
        else:
            continue
        if spelled == name and isinstance(default, ast.Constant):
            yield default.value, node.lineno
