"""TF names as the stdlib's tree spells them: `graphfix.source.codemod.TfNames` for `ast`,
read by the project model's facts (no libcst)."""

from __future__ import annotations

import ast
from collections import deque

from graphfix.source.vocabulary import canonical_tf_name


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names (a subscript's value: `towers[i]` -> `towers`;
    `super().build` and `super(C, self).build` -> `super.build`, as libcst spells them)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super"):
        return "super"
    return None


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module):
    """The statements of `tree` (and the except handlers and match cases between them), in
    `ast.walk`'s breadth-first order, without walking the expressions, which hold none."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                queue.extend(v for v in value if isinstance(v, _HOLDS_STATEMENTS))


class AstTfNames:
    """The TF symbols one file's expressions name, through its imports and module-level
    aliases (`slim = tf.contrib.slim`): `graphfix.source.codemod.TfNames` for the stdlib
    tree. Imports anywhere in the file count (a function's own `import tensorflow as tf`)."""

    def __init__(self, tree: ast.Module):
        self.imports: dict[str, set[str]] = {}  # bound name -> qualified names it may hold
        # Every import statement of the file, in `ast.walk`'s order (read twice).
        self.import_nodes: list[ast.Import | ast.ImportFrom] = [
            node for node in _statements(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        for node in self.import_nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports.setdefault(alias.asname, set()).add(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self.imports.setdefault(top, set()).add(top)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.imports.setdefault(alias.asname or alias.name, set()).add(
                            f"{node.module}.{alias.name}")
        self.aliases: dict[str, str] = {}
        for statement in tree.body:
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and isinstance(statement.value, (ast.Name, ast.Attribute))):
                qualified = self.tf_qualified(statement.value)
                if qualified is not None:
                    self.aliases[statement.targets[0].id] = qualified

    def qualified(self, node: ast.AST) -> set[str]:
        """Every qualified name `node` may refer to, through imports and module aliases."""
        text = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if text is None:
            return set()
        head, _, rest = text.partition(".")
        tail = f".{rest}" if rest else ""
        found = {q + tail for q in self.imports.get(head, ())}
        if head in self.aliases and head not in self.imports:
            found.add(self.aliases[head] + tail)
        return found

    def tf_qualified(self, node: ast.AST) -> str | None:
        """The TF qualified name `node` refers to (`tensorflow.compat.v1.train.Saver`)."""
        found = sorted(self.qualified(node))
        for qualified in found:
            if canonical_tf_name(qualified) is not None:
                return qualified
        return None

    def canonical(self, node: ast.AST) -> str | None:
        """The TF symbol `node` names, as the vocabulary spells it (`slim.batch_norm`)."""
        qualified = self.tf_qualified(node)
        return canonical_tf_name(qualified) if qualified else None


def argument(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    """The argument `call` passes as `keyword=`, or at `position` (None: keyword only)."""
    for given in call.keywords:
        if given.arg == keyword:
            return given.value
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if position is not None and position < len(positional):
        return positional[position]
    return None
