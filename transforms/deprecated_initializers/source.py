"""deprecated-initializers, source surface: the rename of each old name, as the file spells it.

A stdlib-tree rule (`graphfix.source.astrule.AstRule`): the finding is a reference and its
fix the name's text replaced, so the file is never given to libcst.
"""

from __future__ import annotations

import ast

from graphfix.source.astrule import AstRule, TextEdit
from graphfix.source.examples import Example
from graphfix.source.vocabulary import DEPRECATED_INITIALIZERS, canonical_tf_name


class DeprecatedInitializersRule(AstRule):
    """Each reference to a deprecated initializer name of TF's becomes the name that replaced
    it (`DEPRECATED_INITIALIZERS`); an import of one (`from tensorflow import X`) is renamed
    with its uses."""

    DESCRIPTION = "Rename TF 1.x's deprecated initializers to the names that replaced them."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        init = tf.global_variables_initializer()
        names = [v.name for v in tf.global_variables()]
        """,
        """\
        def initialize_all_variables():
            return None


        init = initialize_all_variables()
        message = "tf.initialize_all_variables() is deprecated"
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow as tf

            a = tf.Variable(1)
            init_a = tf.initialize_all_variables()
            """,
            fixed="""\
            import tensorflow as tf

            a = tf.Variable(1)
            init_a = tf.global_variables_initializer()
            """,
            says="tf.initialize_all_variables is deprecated: use tf.global_variables_initializer, its current name"),
    )

    def visit_Module(self, node: ast.Module) -> None:
        imported = self._imported_old_names()  # the name an import binds -> (alias, old)
        import_fixes: dict[ast.alias, TextEdit] = {}
        used: set[ast.alias] = set()
        found = []  # (node, old name, spelled, fix), reported in source order
        for reference in self.nodes(ast.Attribute, ast.Name):
            # Only `x.OLD` and a name an import of OLD binds can be reported (below): the
            # rest are not resolved (a module-level alias, `init = tf.X`, is fixed where it
            # is assigned).
            if isinstance(reference, ast.Attribute):
                if reference.attr not in DEPRECATED_INITIALIZERS:
                    continue
            elif reference.id not in imported:
                continue
            old = self.tf_canonical(reference)
            if old not in DEPRECATED_INITIALIZERS:
                continue
            new = DEPRECATED_INITIALIZERS[old]
            if self._is_fallback(reference, new):
                continue
            if isinstance(reference, ast.Attribute):
                if reference.attr != old:
                    continue  # reached through an alias of the function itself
                fix: tuple[TextEdit, ...] = (self._renamed(reference, old, new),)
                spelled = self.code(reference)
            else:
                alias, _ = imported[reference.id]
                used.add(alias)
                import_fix = import_fixes.setdefault(alias, self._renamed(alias, old, new))
                fix = ((self._renamed(reference, old, new), import_fix)
                       if alias.asname is None else (import_fix,))
                spelled = _alias_text(alias)
            found.append((reference, old, spelled, fix))
        for alias, old in imported.values():
            if alias not in used:  # imported, never used here: the import is the finding
                new = DEPRECATED_INITIALIZERS[old]
                found.append((alias, old, _alias_text(alias), self._renamed(alias, old, new)))
        found.sort(key=lambda item: self.position(item[0]))
        for reference, old, spelled, fix in found:
            self._report(reference, old, spelled, fix)

    def _imported_old_names(self) -> dict[str, tuple[ast.alias, str]]:
        """`from tensorflow[.compat.v1] import X [as Y]` of an old name X: the name it binds."""
        found = {}
        for statement in self.nodes(ast.ImportFrom):
            if statement.module is None or statement.level:
                continue
            for alias in statement.names:
                old = alias.name
                if (old in DEPRECATED_INITIALIZERS
                        and canonical_tf_name(f"{statement.module}.{old}") == old):
                    found[alias.asname or old] = (alias, old)
        return found

    def _is_fallback(self, reference: ast.AST, new: str) -> bool:
        """Whether `reference` is the fallback of a `try:` that calls the new name first
        (`try: tf.global_variables_initializer().run() except: tf.initialize_all_variables()
        .run()`): code that runs on TF before 0.12 on purpose, not the bug."""
        child, node = reference, self.parent(reference)
        while node is not None and not isinstance(node, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef, ast.Module)):
            if isinstance(node, ast.Try) and child in node.handlers:
                return any(isinstance(other, (ast.Attribute, ast.Name))
                           and self.tf_canonical(other) == new
                           for statement in node.body for other in ast.walk(statement))
            child, node = node, self.parent(node)
        return False

    def _renamed(self, node: ast.Attribute | ast.Name | ast.alias, old: str, new: str
                 ) -> TextEdit:
        """The edit that renames the reference (`tf.X`, `X`) or import alias (`X as Y`)."""
        start, end = self.span(node)
        if isinstance(node, ast.Attribute):  # the name after the dot ends the attribute
            return TextEdit(end - len(old), end, new)
        return TextEdit(start, start + len(old), new)  # the name starts a name and an alias

    def _report(self, node: ast.AST, old: str, spelled: str, fix) -> None:
        """A warning at `node`, which names `old` as the file spells it (`tf1.X`, `X as Y`)."""
        new = DEPRECATED_INITIALIZERS[old]
        replacement = (spelled[: -len(old)] + new if spelled.endswith(old)  # `tf1.X`, `X`
                       else spelled.replace(f"{old} as ", f"{new} as ", 1))  # `X as Y`
        self.report(node, f"{spelled} is deprecated: use {replacement}, its current name (TF 1.x "
                          f"warns that {old} is deprecated and will be removed; TF 2 keeps "
                          "both names in tf.compat.v1 only)", fix=fix, severity="warning")


def _alias_text(alias: ast.alias) -> str:
    """`X` or `X as Y`, as an import names it (without the comma after it)."""
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
