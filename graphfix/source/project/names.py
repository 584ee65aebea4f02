"""TF names as the stdlib's tree spells them (no libcst): `AstTfNames`, the project model's
facts' quick reading (every import of the file counts); the rules of TF name resolution said
once for both trees (`TfNameRules`: `graphfix.source.codemod.TfNames` over libcst's scope
analysis, `ScopedAstTfNames` over `Scopes`, libcst's scope reading for the stdlib tree), and
what a rule of either shape asks of them (`AsksTfNames`)."""

from __future__ import annotations

import ast
import builtins
import re
from collections import deque
from collections.abc import Callable, Iterable

from graphfix.source.syntax import node_kinds
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


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, *node_kinds("match_case"))
_MATCH_CAPTURES = node_kinds("MatchAs", "MatchStar")  # (`case [*rest, last]`)
_MATCH_MAPPING = node_kinds("MatchMapping")  # (`case {**rest}`)


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


# -- TF names as libcst's ScopeProvider reads them, for either tree ----------------------------


class TfNameRules:
    """How an expression names a TF symbol, said once for both trees: through the file's
    imports (`imported_names`, the tree's qualified names), its module-level aliases
    (`slim = tf.contrib.slim`), the project's modules that re-export TF (`from helpers import
    tf1`, `reexports`) and star imports of the project's modules (`star`). The one resolver
    every rule reads: `graphfix.source.codemod.TfNames` over libcst's scope analysis,
    `ScopedAstTfNames` over the stdlib tree's (`Scopes`)."""

    def __init__(self, reexports: Callable[[str], str | None] | None = None,
                 star: Callable[[str], str | None] | None = None):
        # An imported qualified name -> the TF name it stands for through the project's
        # modules (`helpers.tf1.Variable` where helpers.py imports compat.v1 as tf1):
        self._reexports = reexports
        # A name nothing in the file binds -> the TF name a `from module import *` of the
        # project's brings under it (`tf`, from a star-imported settings module):
        self._star = star
        self.aliases: dict[str, str] = {}  # module-level name -> the TF qualified name it holds

    # -- what a tree kind says --------------------------------------------------------------

    def imported_names(self, node) -> set[tuple[str, bool]]:
        """(qualified name, whether an import gives it) for each name `node` may refer to
        through imports and bindings alone (libcst's QualifiedNameProvider)."""
        raise NotImplementedError

    def attribute_chain(self, node) -> tuple[object, str | None, list[str]]:
        """(the leading name node, its name, the attribute names after it) of `a.b.c`;
        (None, None, ...) where the chain does not start with a name."""
        raise NotImplementedError

    # -- the rules ------------------------------------------------------------------------------

    def _add_aliases(self, assignments: Iterable[tuple[str, object]]) -> None:
        """Module-level `name = <name or attribute>` assignments, in order: each whose value
        is TF's becomes an alias (a later one may read an earlier one)."""
        for target, value in assignments:
            qualified = self.tf_qualified(value)
            if qualified is not None:
                self.aliases[target] = qualified

    def _through_alias(self, node) -> str | None:
        head, name, chain = self.attribute_chain(node)
        if (name is not None and name in self.aliases
                and {q for q, _ in self.imported_names(head)} <= {name}):
            return ".".join([self.aliases[name], *chain])
        return None

    def _through_star(self, node) -> str | None:
        """The TF name `node` names where its leading name is bound by no statement of the
        file, only (maybe) by a star import of one of the project's modules."""
        head, name, chain = self.attribute_chain(node)
        if self._star is None or name is None or self.imported_names(head):
            return None
        found = self._star(name)
        return ".".join([found, *chain]) if found is not None else None

    def _through_project(self, node) -> str | None:
        """The TF name an import from one of the project's modules stands for."""
        if self._reexports is None:
            return None
        for qualified in sorted(q for q, imported in self.imported_names(node) if imported):
            if qualified.split(".")[0] in ("tensorflow", "tf_slim"):
                continue
            found = self._reexports(qualified)
            if found is not None and canonical_tf_name(found) is not None:
                return found
        return None

    def qualified(self, node) -> set[str]:
        """Every qualified name `node` may refer to, through imports and module aliases."""
        found = {q for q, _ in self.imported_names(node)}
        for through in (self._through_alias(node), self._through_project(node),
                        self._through_star(node)):
            if through is not None:
                found.add(through)
        return found

    def tf_qualified(self, node) -> str | None:
        """The TF qualified name `node` refers to (`tensorflow.compat.v1.train.Saver`),
        also through a project module that imports it (`from helpers import tf1`)."""
        for qualified in sorted(q for q, _ in self.imported_names(node)):
            if canonical_tf_name(qualified) is not None:
                return qualified
        return (self._through_alias(node) or self._through_project(node)
                or self._through_star(node))

    def canonical(self, node) -> str | None:
        """The TF symbol `node` names, as the vocabulary spells it (`Variable`,
        `layers.dense`, `slim.conv2d`); None if it names none."""
        qualified = self.tf_qualified(node)
        return canonical_tf_name(qualified) if qualified else None

    def is_foreign_import(self, node) -> bool:
        """Whether `node` names something imported from outside TF (scipy.optimize.minimize)."""
        imported = [q for q, from_import in self.imported_names(node) if from_import]
        return (bool(imported) and all(canonical_tf_name(n) is None for n in imported)
                and self._through_project(node) is None)


class AsksTfNames:
    """What a rule of either shape asks of its file's TF names (`tf_names`, the file's
    `TfNameRules`, made by the rule's base class when first asked)."""

    tf_names: TfNameRules

    def tf_canonical(self, node) -> str | None:
        """The TF symbol an expression names (`Variable`, `layers.dense`, `slim.conv2d`)."""
        return self.tf_names.canonical(node)

    def tf_qualified(self, node) -> str | None:
        """The TF qualified name an expression refers to (`tensorflow.compat.v1.device`)."""
        return self.tf_names.tf_qualified(node)

    def _project_resolvers(self) -> tuple[Callable[[str], str | None],
                                          Callable[[str], str | None]]:
        """(an import's TF name through the project's modules, a star-imported name's):
        what `TfNameRules` asks the project model (`self.project`), when it asks."""
        return (lambda qualified: self.project.tf_name_of_import(qualified),
                lambda name: self.project.tf_name_of_star(name))


class ScopedAstTfNames(TfNameRules):
    """`TfNameRules` for the stdlib tree: qualified names as libcst's scope analysis gives
    them (`Scopes`), so a parameter or local variable named `tf` is not TF in the function
    that binds it."""

    def __init__(self, tree: ast.Module, scopes: Scopes,
                 reexports: Callable[[str], str | None] | None = None,
                 star: Callable[[str], str | None] | None = None):
        super().__init__(reexports, star)
        self._scopes = scopes
        self._add_aliases(
            (statement.targets[0].id, statement.value) for statement in tree.body
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, (ast.Name, ast.Attribute)))

    def imported_names(self, node: ast.AST) -> set[tuple[str, bool]]:
        return self._scopes.qualified_names(node)

    def attribute_chain(self, node: ast.AST) -> tuple[ast.Name | None, str | None, list[str]]:
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            return node, node.id, chain[::-1]
        return None, None, chain[::-1]


def full_name(node: ast.AST) -> str | None:
    """libcst's `get_full_name_for_node` for the stdlib tree: `a.b.c`, a call's or a
    subscript's value's name (`f().x` -> `f.x`), "None" for what it cannot name inside a
    chain."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{full_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return full_name(node.func)
    if isinstance(node, ast.Subscript):
        return full_name(node.value)
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Binding:
    """One binding of a name in a scope: an import (`statement`, one of whose aliases binds
    it) or any other (`statement` None); from `after` on (line, column) the scope's own code
    sees it."""

    __slots__ = ("name", "owner", "statement", "after")

    def __init__(self, name: str, owner: ast.AST, statement, after: tuple[int, int]):
        self.name, self.owner, self.statement, self.after = name, owner, statement, after


class Scopes:
    """What each name of a stdlib tree is bound to, scope by scope, as libcst's ScopeProvider
    records it: functions, lambdas, classes (unseen from the scopes inside them) and
    comprehensions, `global` and `nonlocal`, imports binding each prefix of a dotted name,
    a name read before its scope binds it seeing no binding there. A scope's bindings are
    read the first time a name in it is asked about."""

    def __init__(self, tree: ast.Module, parent: Callable[[ast.AST], ast.AST | None],
                 code: str = ""):
        self._tree, self._parent = tree, parent
        self._tables: dict[ast.AST, dict[str, list[_Binding]]] = {}
        self._declared: dict[ast.AST, dict[str, str]] = {}  # scope -> name -> global/nonlocal
        self._prefixes: dict[ast.AST, str] = {tree: ""}
        # A function's `global x` binds x in the module: every scope is read at once then.
        self._globals_declared = re.search(r"\bglobal\b", code) is not None if code else True

    # -- which scope --------------------------------------------------------------------------

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function, lambda, class, comprehension or module whose code `node` is part
        of (a default, decorator, annotation or base is its definition's scope's)."""
        below, child, current = None, node, self._parent(node)
        while current is not None:
            if isinstance(current, _SCOPES) and _runs_inside(current, child, below, node):
                return current
            below, child, current = child, current, self._parent(current)
        return self._tree

    def parent_scope(self, scope: ast.AST) -> ast.AST | None:
        return None if scope is self._tree else self.scope_of(scope)

    def prefix(self, scope: ast.AST) -> str:
        """libcst's name prefix of a scope's locals (`f.<locals>`, `C`, `<comprehension>`)."""
        if scope not in self._prefixes:
            outer = self.prefix(self.parent_scope(scope))
            if isinstance(scope, _COMPREHENSIONS):
                own = ["<comprehension>"]
            elif isinstance(scope, ast.ClassDef):
                own = [scope.name]
            else:
                own = [getattr(scope, "name", None), "<locals>"]
            self._prefixes[scope] = ".".join(filter(None, [outer, *own]))
        return self._prefixes[scope]

    # -- what a scope binds -------------------------------------------------------------------

    def _table(self, scope: ast.AST) -> dict[str, list[_Binding]]:
        if scope not in self._tables:
            if self._globals_declared and self._tree not in self._tables:
                self._read_all()
            else:
                self._read(scope)
        return self._tables[scope]

    def _read_all(self) -> None:
        pending = [self._tree]
        while pending:
            scope = pending.pop()
            pending.extend(self._read(scope))

    def _read(self, scope: ast.AST) -> list[ast.AST]:
        """Read `scope`'s own bindings (those `global` sends to the module too); the scopes
        directly inside it."""
        table = self._tables.setdefault(scope, {})
        declared = self._declared.setdefault(scope, {})
        inner: list[ast.AST] = []

        def bind(name: str, statement, after: tuple[int, int]) -> None:
            owner = self._tree if declared.get(name) == "global" else scope
            self._tables.setdefault(owner, {}).setdefault(name, []).append(
                _Binding(name, owner, statement, after))

        def visit(node: ast.AST, after: tuple[int, int] | None) -> None:
            kind = type(node)
            if kind is ast.Name:
                if isinstance(node.ctx, ast.Store):
                    bind(node.id, None, after or _end(node))
                return
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                bind(node.name, None, _end(node))
                inner.append(node)
                return
            if kind is ast.Lambda or kind in _COMPREHENSIONS:
                inner.append(node)
                return
            if kind in (ast.Import, ast.ImportFrom):
                for alias in node.names:
                    for name in _bound_by_import(alias):
                        bind(name, node, _end(node))
                return
            if kind in (ast.Global, ast.Nonlocal):
                for name in node.names:
                    declared[name] = "global" if kind is ast.Global else "nonlocal"
                return
            if kind in (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr):
                after = _end(node)
            elif kind in (ast.For, ast.AsyncFor):
                visit(node.target, _end(node.target))
                for child in (node.iter, *node.body, *node.orelse):
                    visit(child, after)
                return
            elif kind is ast.withitem:
                visit(node.context_expr, after)
                if node.optional_vars is not None:
                    visit(node.optional_vars, _end(node.optional_vars))
                return
            elif kind is ast.ExceptHandler and node.name:
                bind(node.name, None, _start(node.body[0]))
            elif kind in _MATCH_CAPTURES and node.name:
                bind(node.name, None, _end(node))
            elif kind in _MATCH_MAPPING and node.rest:
                bind(node.rest, None, _end(node))
            for child in ast.iter_child_nodes(node):
                visit(child, after)

        if isinstance(scope, _FUNCTIONS):
            arguments = scope.args
            for arg in (*arguments.posonlyargs, *arguments.args, arguments.vararg,
                        *arguments.kwonlyargs, arguments.kwarg):
                if arg is not None:
                    bind(arg.arg, None, (0, 0))  # seen by all the function's code
            body = scope.body if isinstance(scope.body, list) else [scope.body]
        elif isinstance(scope, _COMPREHENSIONS):
            for number, generator in enumerate(scope.generators):
                visit(generator.target, (0, 0))  # seen by the element before it, too
                if number:
                    visit(generator.iter, None)
                for condition in generator.ifs:
                    visit(condition, None)
            body = [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
        else:
            body = scope.body
        for statement in body:
            visit(statement, None)
        return inner

    # -- what a name refers to ----------------------------------------------------------------

    def _visible(self, scope: ast.AST):
        """`scope`, then the scopes whose names its code sees, innermost first (a class's
        names are unseen from the functions inside it)."""
        yield scope
        current = self.parent_scope(scope)
        while current is not None:
            if not isinstance(current, ast.ClassDef):
                yield current
            current = self.parent_scope(current)

    def _bindings(self, scope: ast.AST, name: str, start: ast.AST | None = None
                  ) -> list[_Binding] | None:
        """The bindings of `name` the code of `scope` sees (from `start` on: the scope
        `start` names, a direct parent, is looked in even if a class); None if no scope
        binds it (a builtin, or nothing)."""
        head = name.split(".")[0]
        scopes = self._visible(scope) if start is None else (start, *self._visible(start))
        for current in scopes:
            table = self._table(current)
            declared = self._declared[current]
            if declared.get(head) == "global" and current is not self._tree:
                return self._table(self._tree).get(name) or None
            if declared.get(head) == "nonlocal":
                continue
            if table.get(name):
                return table[name]
        return None

    def qualified_names(self, node: ast.AST) -> set[tuple[str, bool]]:
        """(qualified name, whether an import gives it) for each name `node` may refer to:
        what libcst's `Scope.get_qualified_names_for` gives (a builtin's is `builtins.X`)."""
        full = full_name(node)
        if full is None:
            return set()
        scope = self.scope_of(node)
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):  # its own binding: a local
                owner = self._tree if self._declared_global(scope, node.id) else scope
                return {(self._local(owner, full), False)}
            return self._read_by(node, scope)
        prefix = full
        while prefix:
            bindings = self._bindings(scope, prefix)
            if bindings:
                found: set[tuple[str, bool]] = set()
                for binding in bindings:
                    found |= self._names_of(binding, full)
                return found
            if "." not in prefix and hasattr(builtins, prefix):
                return {(f"builtins.{prefix}", False)}
            prefix = prefix.rpartition(".")[0]
        return set()

    def _declared_global(self, scope: ast.AST, name: str) -> bool:
        self._table(scope)
        return self._declared[scope].get(name) == "global"

    def _read_by(self, node: ast.Name, scope: ast.AST) -> set[tuple[str, bool]]:
        """What a name read at `node` refers to: the bindings its scope made before it, or
        those of the scopes around it (libcst's `Access.referents`)."""
        name = node.id
        bindings = self._bindings(scope, name)
        if bindings is None:
            return {(f"builtins.{name}", False)} if hasattr(builtins, name) else set()
        at = _start(node)
        earlier = [b for b in bindings if b.owner is not scope or b.after <= at]
        if not earlier:
            outer = self.parent_scope(scope)
            if outer is None:
                return {(f"builtins.{name}", False)} if hasattr(builtins, name) else set()
            earlier = self._bindings(outer, name, start=outer) or []
            if not earlier and hasattr(builtins, name):
                return {(f"builtins.{name}", False)}
        found: set[tuple[str, bool]] = set()
        for binding in earlier:
            found |= self._names_of(binding, binding.name)
        return found

    def _local(self, owner: ast.AST, full: str) -> str:
        prefix = self.prefix(owner)
        return f"{prefix}.{full}" if prefix else full

    def _names_of(self, binding: _Binding, full: str) -> set[tuple[str, bool]]:
        if binding.statement is None:
            return {(self._local(binding.owner, full), False)}
        return {(name, True) for name in _import_names(binding.statement, full)}


def _import_names(statement: ast.Import | ast.ImportFrom, full: str) -> set[str]:
    """The qualified names `full` has through an import statement (libcst's
    `ImportAssignment.get_qualified_names_for`)."""
    module = ""
    if isinstance(statement, ast.ImportFrom):
        module = "." * statement.level + (statement.module or "")
    found = set()
    for alias in statement.names:
        if alias.name == "*":
            continue
        parts = alias.name.split(".")
        for cut in range(len(parts), 0, -1):
            real = as_name = ".".join(parts[:cut])
            if module.endswith("."):
                real = f"{module}{real}"
            elif module:
                real = f"{module}.{real}"
            if alias.asname:
                as_name = alias.asname
            if full.startswith(as_name):
                rest = full.split(as_name, 1)[1]
                if rest and not rest.startswith("."):
                    continue
                rest = rest.lstrip(".")
                found.add(f"{real}.{rest}" if rest else real)
                break
    return found


def _bound_by_import(alias: ast.alias) -> list[str]:
    """The names an import alias binds: `as` name, else each prefix of a dotted name
    (`import a.b` binds `a.b` and `a`, as libcst records it)."""
    if alias.name == "*":
        return []
    if alias.asname:
        return [alias.asname]
    parts = alias.name.split(".")
    return [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]


def _runs_inside(scope: ast.AST, child: ast.AST, below: ast.AST | None, node: ast.AST) -> bool:
    """Whether `child` of `scope` (with `below` the child of `child` on the way to `node`)
    is run in the scope's own namespace, not in the one around its definition."""
    if isinstance(scope, ast.ClassDef):
        return child in scope.body
    if isinstance(scope, _FUNCTIONS):
        if child is scope.args:  # a parameter is the function's; its default and annotation not
            return isinstance(below, ast.arg) and below is node
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        return child in body
    first = scope.generators[0]
    return not (child is first and below is first.iter)


def _start(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno, node.end_col_offset
