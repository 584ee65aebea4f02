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
        imported = self._imported_old_names()  # the name imports bind -> [(alias, old)]
        found = []  # (node, old name, spelled, fix), reported in source order
        uses: dict[str, list] = {}  # an imported name -> the entries of `found` that use it
        kept: set[str] = set()  # imported names a use keeps (ignored, or a fallback)
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
            if isinstance(reference, ast.Attribute):
                if reference.attr != old or self._is_fallback(reference, new):
                    continue  # (reached through an alias of the function itself)
                found.append([reference, old, self.code(reference),
                              (self._renamed(reference, old, new),)])
                continue
            bound = reference.id
            if self._is_fallback(reference, new) or self.suppressed(reference):
                if any(alias.asname is None for alias, _ in imported[bound]):
                    kept.add(bound)  # this use keeps the old name: so must its imports
                continue
            alias, _ = imported[bound][-1]
            entry = [reference, old, _alias_text(alias),
                     (self._renamed(reference, old, new),) if alias.asname is None else ()]
            found.append(entry)
            uses.setdefault(bound, []).append(entry)
        for bound, aliases in imported.items():
            # Every import that binds the name is renamed with its uses (`try: from
            # tensorflow.compat.v1 import X except ImportError: from tensorflow import X`),
            # unless a use keeps the old name, or, for an import this file never uses,
            # another file may import it from here.
            renames = tuple(self._renamed(alias, old, DEPRECATED_INITIALIZERS[old])
                            for alias, old in aliases)
            unused = bound not in uses
            fixable = bound not in kept and not (unused and self.project.imported_by_others())
            for entry in uses.get(bound, ()):
                entry[3] = entry[3] + renames if fixable else ()
            if unused:
                for alias, old in aliases:
                    if not self._is_fallback(alias, DEPRECATED_INITIALIZERS[old]):
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
                old = alias.name
                if (old in DEPRECATED_INITIALIZERS
                        and canonical_tf_name(f"{statement.module}.{old}") == old):
                    found.setdefault(alias.asname or old, []).append((alias, old))
        return found

    def _is_fallback(self, reference: ast.AST, new: str) -> bool:
        """Whether `reference` (a use or an import) is the fallback of a `try:` that calls
        or imports the new name first (`try: tf.global_variables_initializer().run() except:
        tf.initialize_all_variables().run()`, `try: from tensorflow import
        global_variables_initializer as init except ImportError: from tensorflow import
        initialize_all_variables as init`): code that runs on TF before 0.12 on purpose,
        not the bug."""
        def names_new(other: ast.AST) -> bool:
            if isinstance(other, ast.ImportFrom):
                return other.module is not None and not other.level and any(
                    canonical_tf_name(f"{other.module}.{alias.name}") == new
                    for alias in other.names)
            return (isinstance(other, (ast.Attribute, ast.Name))
                    and self.tf_canonical(other) == new)

        child, node = reference, self.parent(reference)
        while node is not None and not isinstance(node, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef, ast.Module)):
            if isinstance(node, ast.Try) and child in node.handlers:
                return any(names_new(other)
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
        if f"{old} as " in spelled:  # `X as Y`
            replacement = spelled.replace(f"{old} as ", f"{new} as ", 1)
        else:  # `tf1.X`, `X`, `(tf.X)`: the name is the last thing said
            head, _, tail = spelled.rpartition(old)
            replacement = head + new + tail
        self.report(node, f"{spelled} is deprecated: use {replacement}, its current name (TF 1.x "
                          f"warns that {old} is deprecated and will be removed; TF 2 keeps "
                          "both names in tf.compat.v1 only)", fix=fix, severity="warning")


def _alias_text(alias: ast.alias) -> str:
    """`X` or `X as Y`, as an import names it (without the comma after it)."""
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
