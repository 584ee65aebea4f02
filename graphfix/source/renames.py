"""A rename rule as data, tf_upgrade_v2's habit: a table of TF's old names, each with the
name that replaced it and what becomes of its arguments, read by one rule.

A transform whose fix is a rename subclasses `RenameRule` with its table, `RENAMES`, and
the words of its finding, `MESSAGE`; the rule finds every reference that resolves to an
old name through the file's imports and aliases (`tf.X`, `tf.compat.v1.X`, `tf1.X`, `X`
after `from tensorflow import X`), called or not, and renames it in the spelling the file
uses (an import `from tensorflow import X` with its uses; an import `as` another name keeps
that name). Left alone, as code that uses an old name on purpose: a reference in the
`except` of a `try:` that uses the new name first (a fallback for an older TF), and one in
a branch of a version check (`if tf.__version__ < ...:`, `if LooseVersion(tf.__version__)
...`, `if hasattr(tf, "NEW"): ... else: ...`, `if TF_VERSION <= 0.10:` of a module-level
name bound to the version, as a statement or a conditional expression), whose old-TF
branch renaming would break.

A stdlib-tree rule (`graphfix.source.astrule.AstRule`): the finding is a reference and its
fix the name's text replaced, so the file is never given to libcst.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from typing import ClassVar

from graphfix.source.astrule import AstRule, TextEdit
from graphfix.source.vocabulary import canonical_tf_name


@dataclasses.dataclass(frozen=True)
class Rename:
    """One row of a table: the name that replaced an old one (as the vocabulary spells
    names: the same module, another last part) and, where a call's arguments change with
    it, its keywords renamed (old keyword -> new keyword); the rest are passed as they
    were. A plain string in a table is a `Rename` with the same arguments."""

    new: str
    keywords: tuple[tuple[str, str], ...] = ()


# Attributes that say which TF runs: a test reading one picks code for a TF version.
_VERSION_ATTRIBUTES = frozenset({"__version__", "VERSION", "GIT_VERSION"})


class RenameRule(AstRule):
    """Base class of a rename rule: `RENAMES` (old name -> `Rename` or the new name) and
    `MESSAGE`, formatted with `spelled` (the old name as the file says it: `tf1.X`, `X as
    Y`), `replacement` (the same with the new name), `old` and `new`."""

    RENAMES: ClassVar[Mapping[str, Rename | str]] = {}
    MESSAGE: ClassVar[str] = "{spelled} is deprecated: use {replacement}"
    SEVERITY: ClassVar[str] = "warning"

    def _row(self, old: str) -> Rename:
        row = self.RENAMES[old]
        return Rename(row) if isinstance(row, str) else row

    def visit_Module(self, node: ast.Module) -> None:
        self._version_names = _names_bound_to_a_version(node)
        last_parts = {old.rsplit(".", 1)[-1] for old in self.RENAMES}
        imported = self._imported_old_names()  # the name imports bind -> [(alias, old)]
        found = []  # (node, old name, spelled, fix), reported in source order
        uses: dict[str, list] = {}  # an imported name -> the entries of `found` that use it
        kept: set[str] = set()  # imported names a use keeps (ignored, or on purpose)
        for reference in self.nodes(ast.Attribute, ast.Name):
            # Only `x.OLD` and a name an import of OLD binds can be reported (below): the
            # rest are not resolved (a module-level alias, `init = tf.X`, is fixed where it
            # is assigned).
            if isinstance(reference, ast.Attribute):
                if reference.attr not in last_parts:
                    continue
            elif reference.id not in imported:
                continue
            old = self.tf_canonical(reference)
            if old not in self.RENAMES:
                continue
            if isinstance(reference, ast.Attribute):
                if reference.attr != _last(old) or self._on_purpose(reference, old):
                    continue  # (reached through an alias of the function itself)
                found.append([reference, old, self.code(reference), self._renamed_use(
                    reference, old)])
                continue
            bound = reference.id
            if self._on_purpose(reference, old) or self.suppressed(reference):
                if any(alias.asname is None for alias, _ in imported[bound]):
                    kept.add(bound)  # this use keeps the old name: so must its imports
                continue
            alias, _ = imported[bound][-1]
            entry = [reference, old, _alias_text(alias),
                     self._renamed_use(reference, old) if alias.asname is None
                     else self._keywords_renamed(reference, old)]
            found.append(entry)
            uses.setdefault(bound, []).append(entry)
        for bound, aliases in imported.items():
            # Every import that binds the name is renamed with its uses (`try: from
            # tensorflow.compat.v1 import X except ImportError: from tensorflow import X`),
            # unless a use keeps the old name, or, for an import this file never uses,
            # another file may import it from here.
            renames = tuple(self._renamed(alias, old) for alias, old in aliases)
            unused = bound not in uses
            fixable = bound not in kept and not (unused and self.project.imported_by_others())
            for entry in uses.get(bound, ()):
                entry[3] = entry[3] + renames if fixable else ()
            if unused:
                for alias, old in aliases:
                    if not self._on_purpose(alias, old):
                        found.append([alias, old, _alias_text(alias),
                                      renames if fixable else ()])
        found.sort(key=lambda item: self.position(item[0]))
        for reference, old, spelled, fix in found:
            self._report(reference, old, spelled, fix or None)

    def _imported_old_names(self) -> dict[str, list[tuple[ast.alias, str]]]:
        """`from tensorflow[.compat.v1] import X [as Y]` of an old name X: the name each
        binds -> every such import that binds it, in source order."""
        found: dict[str, list[tuple[ast.alias, str]]] = {}
        for statement in self.nodes(ast.ImportFrom):
            if statement.module is None or statement.level:
                continue
            for alias in statement.names:
                old = canonical_tf_name(f"{statement.module}.{alias.name}")
                if old in self.RENAMES and _last(old) == alias.name:
                    found.setdefault(alias.asname or alias.name, []).append((alias, old))
        return found

    # -- code that uses an old name on purpose ---------------------------------------------

    def _on_purpose(self, reference: ast.AST, old: str) -> bool:
        """Whether `reference` (a use or an import of `old`) is code for an older TF, kept
        on purpose: the fallback of a `try:` that uses the new name first (`try:
        tf.global_variables_initializer().run() except: tf.initialize_all_variables().run()`,
        the same with imports), or in a branch of a version check (`_checks_version`)."""
        new = self._row(old).new
        in_function = False  # (a `try:` around a definition catches nothing of its calls)
        child, node = reference, self.parent(reference)
        while node is not None:
            if isinstance(node, ast.Try) and child in node.handlers and not in_function:
                if any(self._names(other, new)
                       for statement in node.body for other in ast.walk(statement)):
                    return True
            if (isinstance(node, (ast.If, ast.IfExp)) and child is not node.test
                    and self._checks_version(node.test, (old, new))):
                return True
            in_function |= isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            child, node = node, self.parent(node)
        return False

    def _names(self, node: ast.AST, name: str) -> bool:
        """Whether `node` is a reference to, or an import of, TF's `name`."""
        if isinstance(node, ast.ImportFrom):
            return node.module is not None and not node.level and any(
                canonical_tf_name(f"{node.module}.{alias.name}") == name
                for alias in node.names)
        return isinstance(node, (ast.Attribute, ast.Name)) and self.tf_canonical(node) == name

    def _checks_version(self, test: ast.expr, names: tuple[str, ...]) -> bool:
        """Whether an `if`'s test picks code by the TF it runs on: it reads a version
        (`tf.__version__`, `tf.VERSION`, `LooseVersion(tf.__version__)`), or asks
        `hasattr(..., "NAME")` of the old name or the new; a module-level name bound to a
        version (`TF_VERSION = float(tf.__version__[:3])`, then `if TF_VERSION <= 0.10:`)
        reads it too."""
        spelled = {_last(name) for name in names}
        for node in ast.walk(test):
            if _reads_a_version(node, self._version_names):
                return True
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "hasattr" and len(node.args) == 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in spelled):
                return True
        return False

    # -- the fix ------------------------------------------------------------------------------

    def _renamed(self, node: ast.Attribute | ast.Name | ast.alias, old: str) -> TextEdit:
        """The edit that renames the reference (`tf.X`, `X`) or import alias (`X as Y`)."""
        start, end = self.span(node)
        before, after = _last(old), _last(self._row(old).new)
        if isinstance(node, ast.Attribute):  # the name after the dot ends the attribute
            return TextEdit(end - len(before), end, after)
        return TextEdit(start, start + len(before), after)  # the name starts a name, an alias

    def _renamed_use(self, reference: ast.Attribute | ast.Name, old: str
                     ) -> tuple[TextEdit, ...]:
        return (self._renamed(reference, old), *self._keywords_renamed(reference, old))

    def _keywords_renamed(self, reference: ast.AST, old: str) -> tuple[TextEdit, ...]:
        """Where `reference` is called, the edits of the keywords its row renames."""
        keywords = dict(self._row(old).keywords)
        call = self.parent(reference)
        if not keywords or not (isinstance(call, ast.Call) and call.func is reference):
            return ()
        edits = []
        for keyword in call.keywords:
            if keyword.arg in keywords:
                start, _ = self.span(keyword)
                edits.append(TextEdit(start, start + len(keyword.arg), keywords[keyword.arg]))
        return tuple(edits)

    def _report(self, node: ast.AST, old: str, spelled: str, fix) -> None:
        """A finding at `node`, which names `old` as the file spells it (`tf1.X`, `X as Y`)."""
        before, after = _last(old), _last(self._row(old).new)
        if f"{before} as " in spelled:  # `X as Y`
            replacement = spelled.replace(f"{before} as ", f"{after} as ", 1)
        else:  # `tf1.X`, `X`, `(tf.X)`: the name is the last thing said
            head, _, tail = spelled.rpartition(before)
            replacement = head + after + tail
        self.report(node, self.MESSAGE.format(spelled=spelled, replacement=replacement,
                                              old=old, new=self._row(old).new),
                    fix=fix, severity=self.SEVERITY)


def _reads_a_version(node: ast.AST, version_names: frozenset[str]) -> bool:
    """Whether `node` is `X.__version__` (`X.VERSION`, ...), such a name imported bare, or
    a name `version_names` holds."""
    if isinstance(node, ast.Attribute):
        return node.attr in _VERSION_ATTRIBUTES
    return isinstance(node, ast.Name) and (node.id in _VERSION_ATTRIBUTES
                                           or node.id in version_names)


def _names_bound_to_a_version(module: ast.Module) -> frozenset[str]:
    """The module-level names assigned a value that reads TF's version (`TF_VERSION =
    float('.'.join(tf.__version__.split('.')[:2]))`), or reads another such name
    (`OLD_TF = TF_VERSION < 1.0`), at the module's top level or in its top-level `if`/`try`
    blocks; a name also assigned anything else is not one."""
    assignments: dict[str, list[ast.expr]] = {}
    statements = list(module.body)
    while statements:
        statement = statements.pop()
        if isinstance(statement, (ast.If, ast.Try)):
            statements.extend(ast.iter_child_nodes(statement))
        elif isinstance(statement, (ast.ExceptHandler,)):
            statements.extend(statement.body)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value:
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target])
            for target in targets:
                if isinstance(target, ast.Name):
                    assignments.setdefault(target.id, []).append(statement.value)
    found: set[str] = set()
    grew = True
    while grew:  # (a name bound to a name bound to a version: to a fixed point)
        grew = False
        for name, values in assignments.items():
            if name not in found and all(
                    any(_reads_a_version(node, frozenset(found)) for node in ast.walk(value))
                    for value in values):
                found.add(name)
                grew = True
    return frozenset(found)


def _last(name: str) -> str:
    """The last part of a dotted name (`train.Saver` -> `Saver`)."""
    return name.rsplit(".", 1)[-1]


def _alias_text(alias: ast.alias) -> str:
    """`X` or `X as Y`, as an import names it (without the comma after it)."""
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
