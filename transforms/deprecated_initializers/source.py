"""deprecated-initializers, source surface: the rename of each old name, as the file spells it."""

from __future__ import annotations

from functools import partial

import libcst as cst
from libcst.helpers import get_full_name_for_node

from graphfix.source.codemod import Example, SourceCodemod
from graphfix.source.fixes import Replace
from graphfix.source.vocabulary import DEPRECATED_INITIALIZERS, canonical_tf_name


class DeprecatedInitializersCodemod(SourceCodemod):
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

    def visit_Module(self, node: cst.Module) -> None:
        imported = self._imported_old_names()  # the name an import binds -> (alias, old)
        import_fixes: dict[cst.ImportAlias, Replace] = {}
        used: set[cst.ImportAlias] = set()
        found = []  # (node, old name, spelled, fix), reported in source order
        for reference in self.nodes(cst.Attribute, cst.Name):
            # Only `x.OLD` and a name an import of OLD binds can be reported (below): the
            # rest are not resolved (a module-level alias, `init = tf.X`, is fixed where it
            # is assigned).
            if isinstance(reference, cst.Attribute):
                if reference.attr.value not in DEPRECATED_INITIALIZERS:
                    continue
            elif reference.value not in imported or not self._is_reference(reference):
                continue
            old = self.tf_canonical(reference)
            if old not in DEPRECATED_INITIALIZERS:
                continue
            new = DEPRECATED_INITIALIZERS[old]
            if self._is_fallback(reference, new):
                continue
            if isinstance(reference, cst.Attribute):
                if reference.attr.value != old:
                    continue  # reached through an alias of the function itself
                fix: tuple[Replace, ...] = (Replace(reference, partial(_renamed, new)),)
                spelled = self.code(reference)
            else:
                alias, _ = imported[reference.value]
                used.add(alias)
                import_fix = import_fixes.setdefault(alias, Replace(alias, partial(_renamed, new)))
                fix = ((Replace(reference, partial(_renamed, new)), import_fix)
                       if alias.asname is None else (import_fix,))
                spelled = _alias_text(alias)
            found.append((reference, old, spelled, fix))
        for alias, old in imported.values():
            if alias not in used:  # imported, never used here: the import is the finding
                new = DEPRECATED_INITIALIZERS[old]
                found.append((alias, old, _alias_text(alias),
                              Replace(alias, partial(_renamed, new))))
        found.sort(key=lambda item: self.position(item[0]))
        for reference, old, spelled, fix in found:
            self._report(reference, old, spelled, fix)

    def _imported_old_names(self) -> dict[str, tuple[cst.ImportAlias, str]]:
        """`from tensorflow[.compat.v1] import X [as Y]` of an old name X: the name it binds."""
        found = {}
        for statement in self.nodes(cst.ImportFrom):
            if (statement.module is None or statement.relative
                    or isinstance(statement.names, cst.ImportStar)):
                continue
            module = get_full_name_for_node(statement.module)
            for alias in statement.names:
                if not isinstance(alias.name, cst.Name):
                    continue
                old = alias.name.value
                if old in DEPRECATED_INITIALIZERS and canonical_tf_name(f"{module}.{old}") == old:
                    bound = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else old
                    found[bound] = (alias, old)
        return found

    def _is_fallback(self, reference: cst.CSTNode, new: str) -> bool:
        """Whether `reference` is the fallback of a `try:` that calls the new name first
        (`try: tf.global_variables_initializer().run() except: tf.initialize_all_variables()
        .run()`): code that runs on TF before 0.12 on purpose, not the bug."""
        child, node = reference, self.parent(reference)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
            if isinstance(node, cst.Try) and child in node.handlers:
                return any(self.tf_canonical(other) == new and self._inside(other, node.body)
                           for other in self.nodes(cst.Attribute, cst.Name))
            child, node = node, self.parent(node)
        return False

    def _inside(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        while node is not None and node is not ancestor:
            node = self.parent(node)
        return node is ancestor

    def _is_reference(self, name: cst.Name) -> bool:
        """Whether a Name is an expression of its own: not an attribute's name (`x.attr`), not
        part of an import, a definition's name or a keyword argument's."""
        parent = self.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, (cst.ImportAlias, cst.FunctionDef, cst.ClassDef, cst.Arg,
                               cst.Param, cst.AsName)):
            return isinstance(parent, cst.Arg) and parent.value is name
        return True

    def _report(self, node: cst.CSTNode, old: str, spelled: str, fix) -> None:
        """A warning at `node`, which names `old` as the file spells it (`tf1.X`, `X as Y`)."""
        new = DEPRECATED_INITIALIZERS[old]
        replacement = (spelled[: -len(old)] + new if spelled.endswith(old)  # `tf1.X`, `X`
                       else spelled.replace(f"{old} as ", f"{new} as ", 1))  # `X as Y`
        self.report(node, f"{spelled} is deprecated: use {replacement}, its current name (TF 1.x "
                          f"warns that {old} is deprecated and will be removed; TF 2 keeps "
                          "both names in tf.compat.v1 only)", fix=fix, severity="warning")


def _renamed(new: str, updated: cst.CSTNode) -> cst.CSTNode:
    """The reference (`tf.X`, `X`) or import alias (`X as Y`) with X renamed `new`."""
    if isinstance(updated, cst.Attribute):
        return updated.with_changes(attr=cst.Name(new))
    if isinstance(updated, cst.ImportAlias):
        return updated.with_changes(name=cst.Name(new))
    return cst.ensure_type(updated, cst.Name).with_changes(value=new)


def _alias_text(alias: cst.ImportAlias) -> str:
    """`X` or `X as Y`, as an import names it (without the comma after it)."""
    name = cst.ensure_type(alias.name, cst.Name).value
    return name if alias.asname is None else (
        f"{name} as {cst.ensure_type(alias.asname.name, cst.Name).value}")

