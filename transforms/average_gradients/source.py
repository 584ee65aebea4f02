"""The source surface of `average-gradients`: the libcst codemod (see the package docstring
for the bug and the fix)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from graphfix.source.codemod import Example, SourceCodemod
from graphfix.source.fixes import Replace
from graphfix.source.project import FileView, Project, unit_at
from graphfix.source.project.facts import library_module, own_nodes, trainable_statistics
from graphfix.source.project.names import AstTfNames
from graphfix.source.scopes import descendants, enclosing
from graphfix.source.vocabulary import (
    GET_VARIABLE_CALLS,
    LIBRARY_BUILD_METHOD,
    LIBRARY_VARIABLE_MODULES,
    VARIABLE_CALLS,
)

# -- Source surface -------------------------------------------------------------------------
#
# The recipe: a function that loops over `zip(*param)` and averages with `reduce_mean` (of a
# `concat` or `stack`) or `add_n`. It breaks only for some models, so it is reported only
# where the code of the run shows one: a trainable `tf.Variable` (a reusing scope does not
# share it, so another tower's loss does not reach it: a None gradient) or a lookup whose
# gradient is an IndexedSlices (densified, or averaged at one tower's indices). Read from the
# file and the files its imports connect it to (`FileView.connected_code`).

_MEANS = frozenset({"reduce_mean", "math.reduce_mean"})
_STACKS = frozenset({"concat", "stack"})
_SUMS = frozenset({"add_n", "math.add_n"})
_RECIPE_OPS = _MEANS | _STACKS | _SUMS | {"expand_dims", "convert_to_tensor", "divide",
                                          "truediv", "math.divide", "math.truediv"}
# What makes an IndexedSlices gradient: a gather from a variable.
_SPARSE_MAKERS = frozenset({
    "nn.embedding_lookup", "nn.embedding_lookup_sparse", "nn.safe_embedding_lookup_sparse",
    "nn.nce_loss", "nn.sampled_softmax_loss", "gather", "compat.v1.gather",
    "contrib.layers.embedding_lookup_unique", "layers.embed_sequence",
    "contrib.layers.embed_sequence", "keras.layers.Embedding",
})
_GATHERS = frozenset({"gather", "compat.v1.gather"})
_VARIABLE_MAKERS = VARIABLE_CALLS | GET_VARIABLE_CALLS
# Python calls the recipe's loop may make (the rewrite keeps nothing else of it).
_PLAIN_CALLS = frozenset({"append", "len", "zip", "list", "range", "float"})

# The correct average: a loop (the recipe's own, written inline in a method, is replaced
# by it alone) and the function body around it (checks, the list, the return).
_LOOP = '''\
for grad_and_vars in zip(*{towers}):
    var = grad_and_vars[0][1]
    if any(v is not var for _, v in grad_and_vars):
        names = [v.name for _, v in grad_and_vars]
        raise ValueError("one tuple pairs gradients of different variables: %s" % names)
    # Skip None: the gradient of a variable a tower's loss does not reach.
    grads = [g for g, _ in grad_and_vars if g is not None]
    if not grads:
        {averaged}.append((None, var))
        continue
    if all(isinstance(g, {tf}.IndexedSlices) for g in grads):
        # Kept sparse: every tower's values, divided by the towers, at its own indices.
        values = {tf}.concat([g.values for g in grads], 0) / len(grad_and_vars)
        indices = {tf}.concat([g.indices for g in grads], 0)
        grad = {tf}.IndexedSlices(values, indices, grads[0].dense_shape)
    else:
        grad = {tf}.add_n([{tf}.convert_to_tensor(g) for g in grads]) / len(grad_and_vars)
    {averaged}.append((grad, var))
'''
_BODY = '''\
if len({{len(grads_and_vars) for grads_and_vars in {towers}}}) > 1:
    raise ValueError("towers with different variable lists (do they share variables?)")
{averaged} = []
''' + _LOOP + '''\
return {averaged}
'''


@dataclass(frozen=True)
class _Recipe:
    """A function of the recipe's shape (or, `function` None, the recipe's loop written
    inline where the towers are built): its loop and the tower list it zips, the list it
    appends the averages to, the TF module its averaging call is spelled with, what it
    handles already, whether the rewrite keeps all it does."""

    function: cst.FunctionDef | None
    towers: str
    averaged: str
    tf: str
    skips_none: bool
    keeps_sparse: bool
    rewritable: bool
    loop: cst.For


@dataclass(frozen=True)
class _Risks:
    """Where the model breaks the recipe, each as `path:line` (the first), or None: a
    trainable `tf.Variable` made once per tower under a reusing scope (`unshared`), a
    lookup whose gradient is an IndexedSlices (`sparse`; `sparse_in_towers`: one in the
    code the towers run, `FileView.tower_code`), a batch norm whose moving statistics are
    trainable (`statistics`), a library module that makes variables (a Sonnet module)
    constructed once per tower (`module_per_tower`: each tower trains its own copy)."""

    unshared: str | None = None
    sparse: str | None = None
    sparse_in_towers: str | None = None
    statistics: str | None = None
    module_per_tower: str | None = None


def model_risks(view: FileView) -> _Risks:
    """Where the model of `view`'s file breaks the recipe (`_Risks`), in the file and the
    files its imports connect it to. The reusing scopes are the project model's
    (`FileView.reusing_regions`: a tower loop's reuse reaches the model functions it
    calls); a `gather` counts where it reads a name its function (or the module) binds to
    a trainable variable; a lookup (`embedding_lookup`, `nce_loss`, ...) always does; batch
    norms' settings as `graphfix.source.project.facts.trainable_statistics` reads them. A
    `tf.Variable` counts only in code that runs once per tower
    (`FileView.tower_code_through_objects`: a tower function's code, and a model object's
    methods it calls) under a reusing scope, as does a library module's constructor (`snt.Module(build)` in the
    tower function: Sonnet gives each instance variables of its own, reuse or not). In
    another file, only what the towers' code may run counts: a lookup or a batch norm's
    settings in a unit that this file's code, or the code that refers to it, reaches
    (`Project.reached`); a loss function of a model package that nothing calls gives the
    towers no gradient."""
    found: dict[str, tuple[str, int]] = {}  # risk -> (path, line): the first of the first file
    on_path = None  # asked once something is found in another file

    def note(risk: str, path: str, line: int) -> None:
        nonlocal on_path
        if path != view.label:
            if on_path is None:
                on_path = _units_on_path(view)
            part = view.project.parts.get(path)
            if part is None or (path, unit_at(part, line)) not in on_path:
                return
        found[risk] = _first(found.get(risk), (path, line))

    for path, code in view.connected_code().items():
        if "Variable" not in code and not any(w in code for w in _RISK_WORDS):
            continue
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        names = AstTfNames(tree)
        builds = _module_builds(tree, names)
        held = _held_variables(tree, names)
        regions = None  # asked once a tf.Variable is found
        towers = None  # asked once a tf.Variable, a lookup or a library module is found

        def per_tower(line: int) -> bool:
            nonlocal towers
            if towers is None:
                towers = view.project.view(path).tower_code_through_objects()
            return any(first <= line <= last for first, last in towers)
        for scope in [tree, *(n for n in ast.walk(tree)
                              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
            variables = _bound_to_variables(scope, names) | held
            computed = _bound_to_computed(scope, names)
            for node in own_nodes(scope):
                if not isinstance(node, ast.Call):
                    continue
                name = names.canonical(node.func)
                if name == "Variable" and _trainable(node):
                    if regions is None:
                        regions = view.project.view(path).reusing_regions_through_objects()
                    if (any(region[0] <= node.lineno <= region[1] for region in regions)
                            and per_tower(node.lineno)):
                        found["unshared"] = _first(found.get("unshared"), (path, node.lineno))
                elif name in _SPARSE_MAKERS and (_reads(node, variables) if name in _GATHERS
                                                 else not _reads(node, computed)):
                    note("sparse", path, node.lineno)
                    if per_tower(node.lineno):
                        note("sparse_in_towers", path, node.lineno)
                elif (library_module(names, node.func) in LIBRARY_VARIABLE_MODULES
                      and scope not in builds and per_tower(node.lineno)):
                    note("module_per_tower", path, node.lineno)
        if "variables_collections" in code:
            for line in trainable_statistics(tree, names):
                note("statistics", path, line)
    return _Risks(**{risk: f"{at[0]}:{at[1]}" for risk, at in found.items()})


# Words without one of which (or "Variable") a file holds none of `_Risks`.
_RISK_WORDS = ("embed", "gather", "nce_", "sampled_softmax", "variables_collections", "snt.",
               "sonnet")


def _module_builds(tree: ast.Module, names: AstTfNames) -> list[ast.AST]:
    """The functions a library module runs as its build (`snt.Module(build)`'s `build`, a
    module class's `_build`): a module constructed there is its module's own part, made
    once per connection of that module and reused by the next one."""
    given = {arg.id for node in ast.walk(tree) if isinstance(node, ast.Call)
             and library_module(names, node.func) in LIBRARY_VARIABLE_MODULES
             for arg in [*node.args, *(k.value for k in node.keywords)]
             if isinstance(arg, ast.Name)}
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (node.name in given or node.name == LIBRARY_BUILD_METHOD)]


def _units_on_path(view: FileView) -> set[tuple[str, str]]:
    """The units the code of `view`'s file may run with the towers whose gradients it
    averages: what its units reach, and what the units that call them reach
    (`_callers_feeding`)."""
    project = view.project
    own = set(project.units(view.label))
    return project.reached(own | _callers_feeding(project, own))


def _callers_feeding(project: Project, own: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The callers of `own` (one file's units) whose code may feed its average: those
    that refer to one of them (a script calling its tower-average helper, the function
    making the model's object) and, further up, those that build towers themselves (a
    training loop calling a helper that calls the average). A caller further up that
    builds none (a `main` training one model or another by a flag) reaches models whose
    gradients this average never receives."""
    found = set()
    for unit in own:
        for caller in project.callers(unit) - own:
            if (own & project.references(*caller)) or _builds_towers(project, caller):
                found.add(caller)
    return found


def _builds_towers(project: Project, unit: tuple[str, str]) -> bool:
    """Whether tower code of `unit`'s file (`Project.towers`) starts in `unit`."""
    label, name = unit
    part = project.parts.get(label)
    return part is not None and any(unit_at(part, span[0]) == name
                                    for span in project.towers(label)["spans"])


def _first(found: tuple[str, int] | None, here: tuple[str, int]) -> tuple[str, int]:
    return here if found is None or (found[0] == here[0] and here[1] < found[1]) else found


def _bound_to_variables(scope: ast.AST, names: AstTfNames) -> set[str]:
    """The names `scope` assigns a trainable variable constructor's result to (a gather
    of a variable made with `trainable=False`, a center loss's centers, has no gradient)."""
    bound = set()
    for node in own_nodes(scope):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and names.canonical(node.value.func) in _VARIABLE_MAKERS
                and _trainable(node.value)):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return bound


def _held_variables(tree: ast.Module, names: AstTfNames) -> set[str]:
    """`self.<name>` for each attribute the file's methods assign a trainable variable
    constructor's result to (`self.gamma = tf.get_variable(...)`: a conditional batch
    norm's per-class scales, gathered by label)."""
    return {f"self.{target.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and names.canonical(node.value.func) in _VARIABLE_MAKERS and _trainable(node.value)
            for target in node.targets
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == "self"}


def _bound_to_computed(scope: ast.AST, names: AstTfNames) -> set[str]:
    """The names `scope` binds to a tensor a TF op computes (not a variable, nor its
    identity): a lookup of one (`table = tf.concat((zeros, table[1:]), 0)`, a zero-padded
    table) differentiates the variable through that op, a slice's dense gradient."""
    bound = set()
    for node in own_nodes(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = names.canonical(node.value.func)
            if name is not None and name not in _VARIABLE_MAKERS | _PASSES_SPARSE:
                bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return bound


# Ops whose gradient hands an IndexedSlices on as it is.
_PASSES_SPARSE = frozenset({"identity"})


def _reads(call: ast.Call, variables: set[str]) -> bool:
    """Whether the call's first argument is one of `variables` (a name, or `self.name`)."""
    params = call.args[0] if call.args else None
    if (isinstance(params, ast.Attribute) and isinstance(params.value, ast.Name)
            and params.value.id == "self"):
        return f"self.{params.attr}" in variables
    return isinstance(params, ast.Name) and params.id in variables


def _trainable(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "trainable" and isinstance(keyword.value, ast.Constant):
            return bool(keyword.value.value)
    return True


class AverageGradientsCodemod(SourceCodemod):
    """The `average_gradients` recipe, where the model it averages for breaks it."""

    VALID = (
        # A dense model (every variable shared and reached): the recipe is right for it.
        """
        import tensorflow as tf

        def average_gradients(tower_grads):
            average_grads = []
            for grad_and_vars in zip(*tower_grads):
                grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
                grad = tf.reduce_mean(tf.concat(grads, 0), 0)
                average_grads.append((grad, grad_and_vars[0][1]))
            return average_grads

        def tower(x):
            w = tf.get_variable("w", [3, 1])
            return tf.matmul(x, w)
        """,
        # Already sparse and None-safe.
        """
        import tensorflow as tf

        def average_gradients(tower_grads):
            average_grads = []
            for grad_and_vars in zip(*tower_grads):
                grads = [g for g, _ in grad_and_vars if g is not None]
                if isinstance(grads[0], tf.IndexedSlices):
                    grad = tf.IndexedSlices(tf.concat([g.values for g in grads], 0) / len(grads),
                                            tf.concat([g.indices for g in grads], 0),
                                            grads[0].dense_shape)
                else:
                    grad = tf.add_n(grads) / len(grads)
                average_grads.append((grad, grad_and_vars[0][1]))
            return average_grads

        def tower(ids):
            emb = tf.get_variable("emb", [100, 8])
            return tf.nn.embedding_lookup(emb, ids)
        """,
    )
    INVALID = (
        Example(
            """
            import tensorflow as tf

            def average_gradients(tower_grads):
                average_grads = []
                for grad_and_vars in zip(*tower_grads):
                    grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
                    grad = tf.reduce_mean(tf.concat(grads, 0), 0)
                    average_grads.append((grad, grad_and_vars[0][1]))
                return average_grads

            def tower(ids):
                emb = tf.get_variable("emb", [100, 8])
                return tf.nn.embedding_lookup(emb, ids)
            """,
            fixed="""
            import tensorflow as tf

            def average_gradients(tower_grads):
                if len({len(grads_and_vars) for grads_and_vars in tower_grads}) > 1:
                    raise ValueError("towers with different variable lists (do they share variables?)")
                average_grads = []
                for grad_and_vars in zip(*tower_grads):
                    var = grad_and_vars[0][1]
                    if any(v is not var for _, v in grad_and_vars):
                        names = [v.name for _, v in grad_and_vars]
                        raise ValueError("one tuple pairs gradients of different variables: %s" % names)
                    # Skip None: the gradient of a variable a tower's loss does not reach.
                    grads = [g for g, _ in grad_and_vars if g is not None]
                    if not grads:
                        average_grads.append((None, var))
                        continue
                    if all(isinstance(g, tf.IndexedSlices) for g in grads):
                        # Kept sparse: every tower's values, divided by the towers, at its own indices.
                        values = tf.concat([g.values for g in grads], 0) / len(grad_and_vars)
                        indices = tf.concat([g.indices for g in grads], 0)
                        grad = tf.IndexedSlices(values, indices, grads[0].dense_shape)
                    else:
                        grad = tf.add_n([tf.convert_to_tensor(g) for g in grads]) / len(grad_and_vars)
                    average_grads.append((grad, var))
                return average_grads

            def tower(ids):
                emb = tf.get_variable("emb", [100, 8])
                return tf.nn.embedding_lookup(emb, ids)
            """,
            says="IndexedSlices",
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        functions = [r for r in map(self._recipe, self.nodes(cst.FunctionDef)) if r is not None]
        # A function that does more than the recipe (applies the average, say) whose loop is
        # the recipe's: the loop alone is rewritten, as an inline one is (and where the loop
        # cannot be, the function is reported as it was).
        in_functions = {id(r.loop) for r in functions}
        inline = [r for r in self._inline_recipes(functions)
                  if not (r.skips_none and r.keeps_sparse)
                  and (r.rewritable or id(r.loop) not in in_functions)]
        by_loop = {id(r.loop) for r in inline}
        recipes = [r for r in functions if not (r.skips_none and r.keeps_sparse)
                   and id(r.loop) not in by_loop]
        if not recipes and not inline:
            return
        risks = model_risks(self.project)
        for recipe in recipes:
            breaks = _breaks(recipe.skips_none, recipe.keeps_sparse, risks, risks.sparse)
            if not breaks:
                continue
            function = recipe.function
            fix = (Replace(function, self._rewritten(recipe))
                   if recipe.rewritable and _rewrites(recipe, risks) else None)
            self.report(
                function.name,
                f"{function.name.value}() averages the towers' gradients with the CIFAR-10 "
                f"recipe, which breaks for this model: {'; '.join(breaks)}"
                + ("" if recipe.rewritable else " (the function does more than "
                   "the recipe: rewrite it by hand to skip None, keep IndexedSlices sparse, "
                   "check one variable per tuple)"),
                fix=fix)
        for loop in inline:
            breaks = _breaks(loop.skips_none, loop.keeps_sparse, risks, risks.sparse_in_towers)
            if not breaks:
                continue
            fix = None
            if loop.rewritable and _rewrites(loop, risks):
                text = _LOOP.format(towers=loop.towers, averaged=loop.averaged, tf=loop.tf)
                statement = cst.parse_statement(text, config=self._tree.config_for_parsing)
                fix = Replace(loop.loop, lambda _, statement=statement: statement)
            self.report(
                loop.loop,
                f"the loop over {_walked(loop)}, written inline, averages the towers' "
                f"gradients with the CIFAR-10 recipe, which breaks for this model: "
                f"{'; '.join(breaks)}"
                + ("" if loop.rewritable else " (the loop does more than the recipe, "
                   "or its names are read after it: rewrite it by hand to skip None, keep "
                   "IndexedSlices sparse, check one variable per tuple)"),
                fix=fix)

    def _inline_recipes(self, functions: list[_Recipe]) -> list[_Recipe]:
        """The recipe's loop written where the towers are built, not in a function of its
        own (`for grad_and_vars in zip(*tower_grads):` in a method, reading
        `grad_and_vars[0][1]` or looping `for g, _ in grad_and_vars`): the loops over
        `zip(*towers)` that average with TF, outside the recipe functions."""
        inside = {id(loop) for recipe in functions if recipe.rewritable
                  for loop in descendants(recipe.function, cst.For)}
        found = []
        for loop in self.nodes(cst.For):
            towers, indexed = _zipped_towers(loop), None
            if towers is None:
                towers = indexed = _indexed_towers(loop)
            if id(loop) in inside or towers is None or not (
                    _indexes(loop, towers) if indexed else _pairs_of(loop)):
                continue
            averaging = [c for c in descendants(loop, cst.Call)
                         if self.tf_canonical(c.func) in _MEANS | _SUMS]
            if not averaging:
                continue
            skips_none, keeps_sparse = _handles_none_and_sparse(loop)
            averaged = _appended_to(loop)
            # (a loop over the first tower's list by index is read by hand: its index and
            # names are its own)
            rewritable = (not indexed and averaged is not None and self._loop_is_recipe(loop)
                          and not self._read_after(loop, _LOOP_BINDS))
            found.append(_Recipe(None, towers, averaged or "average_grads",
                                 self._tf_of(averaging[0]), skips_none, keeps_sparse,
                                 rewritable, loop))
        return found

    def _read_after(self, loop: cst.For, names: set[str]) -> bool:
        """Whether the function (or module) holding `loop` reads one of `names` after it."""
        holder = enclosing(loop, self.parent, cst.FunctionDef) or self._tree
        end = self.position(loop)[0] + self.code(loop).count("\n")
        return any(name.value in names and self.position(name)[0] > end
                   for name in descendants(holder, cst.Name))

    def _tf_of(self, averaging: cst.Call) -> str:
        """How the file spells the TF module its averaging call is made with."""
        func = averaging.func
        tf = self.code(func.value) if isinstance(func, cst.Attribute) else "tf"
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) \
                and func.value.attr.value == "math":
            tf = self.code(func.value.value)
        return tf

    def _recipe(self, function: cst.FunctionDef) -> _Recipe | None:
        params = _taken_from_params(function)
        loop = next((f for f in descendants(function, cst.For) if _zipped(f, params)), None)
        if loop is None:
            return None
        averaging = [c for c in descendants(loop, cst.Call)
                     if self.tf_canonical(c.func) in _MEANS | _SUMS]
        if not averaging:
            return None
        tf = self._tf_of(averaging[0])
        skips_none, keeps_sparse = _handles_none_and_sparse(loop)
        return _Recipe(function, _zipped(loop, params), _list_made(function), tf, skips_none,
                       keeps_sparse,
                       self._only_the_recipe(function, loop), loop)

    def _only_the_recipe(self, function: cst.FunctionDef, loop: cst.For) -> bool:
        """Whether the function does nothing the rewrite would lose: a docstring, lists made
        empty, the loop (its calls TF's averaging ops, appends and builtins), a return."""
        body = list(function.body.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        for statement in body:
            if statement is loop:
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                return False
            for small in statement.body:
                if (isinstance(small, cst.Return) and isinstance(small.value, cst.Name)
                        and small.value.value == _list_made(function)):
                    continue  # (a return of anything else, the applied average, is lost)
                if not (isinstance(small, cst.Assign) and isinstance(small.value, cst.List)
                        and not small.value.elements):
                    return False
        return self._loop_is_recipe(loop)

    def _loop_is_recipe(self, loop: cst.For) -> bool:
        """Whether the loop calls only TF's averaging ops, appends and builtins."""
        for call in descendants(loop, cst.Call):
            name = self.tf_canonical(call.func)
            if name in _RECIPE_OPS:
                continue
            last = (call.func.attr.value if isinstance(call.func, cst.Attribute)
                    else getattr(call.func, "value", None))
            if name is None and last in _PLAIN_CALLS:
                continue
            return False
        return True

    def _rewritten(self, recipe: _Recipe):
        """The change that gives the function the correct body (its docstring kept),
        indented as the file indents."""
        indent = self._tree.default_indent
        lines = _BODY.format(towers=recipe.towers, averaged=recipe.averaged,
                             tf=recipe.tf).splitlines()
        text = "def f():\n" + "".join(f"{indent * (1 + _depth(line))}{line.lstrip()}\n"
                                      for line in lines)
        body = list(cst.parse_statement(text, config=self._tree.config_for_parsing).body.body)
        keeps_docstring = _is_docstring(recipe.function.body.body[0])

        def change(updated: cst.FunctionDef) -> cst.FunctionDef:
            statements = [updated.body.body[0], *body] if keeps_docstring else body
            return updated.with_changes(body=updated.body.with_changes(body=statements))
        return change


def _depth(line: str) -> int:
    """The block depth of a line of `_BODY` (written with four spaces a level, and no
    continuation lines: the file's own indent replaces them)."""
    return (len(line) - len(line.lstrip())) // 4


# The names `_LOOP` binds besides the list it appends to: a method that reads one of them
# after the loop would read the new loop's value instead of its own.
_LOOP_BINDS = frozenset({"grad_and_vars", "var", "names", "grads", "values", "indices", "grad"})


def _rewrites(recipe: _Recipe, risks: _Risks) -> bool:
    """Whether the recipe is rewritten. Towers that each own their variables need their
    model changed, not the average: the rewrite would raise on their lists, so it is
    reported alone where the recipe builds (a module constructed per tower; a `tf.Variable`
    per tower where the recipe skips None: it trains tower 0's batch alone and raises
    nothing). Where it does not skip None it fails already, with TF's error, and the
    rewrite's says why."""
    return not risks.module_per_tower and not (risks.unshared and recipe.skips_none)


def _breaks(skips_none: bool, keeps_sparse: bool, risks: _Risks, sparse: str | None
            ) -> list[str]:
    """Why the recipe breaks for the model, in words (none: it does not). `sparse`: the
    lookup that counts (`risks.sparse`, or for a loop beside the towers, whose code the
    project model reads, `risks.sparse_in_towers`)."""
    breaks = []
    if risks.module_per_tower:
        breaks.append(f"the module constructed at {risks.module_per_tower} is made anew in "
                      "every tower, each instance with variables of its own, so the towers' "
                      "gradient lists differ and zip(*...) pairs gradients of different "
                      "variables (skipping None does not help: build the module once, "
                      "outside the towers, and call it in each)")
    if sparse and not keeps_sparse:
        breaks.append(f"the gradient of the lookup at {sparse} is an IndexedSlices, "
                      "which expand_dims/concat densify to a whole [vocab, dim] tensor "
                      "per tower (\"Converting sparse IndexedSlices to a dense Tensor\")")
    if risks.unshared and not skips_none:
        breaks.append(f"the tf.Variable at {risks.unshared} is made anew in every tower (a "
                      "reusing scope does not share it), so another tower's loss does "
                      "not reach it: its gradient is None and expand_dims raises "
                      "\"None values not supported\"")
    elif risks.unshared:
        breaks.append(f"the tf.Variable at {risks.unshared} is made anew in every tower (a "
                      "reusing scope does not share it): a later tower's gradient list "
                      "holds the earlier towers' copies, with None gradients, before its "
                      "own, so skipping None averages each variable over tower 0 alone "
                      "and zip(*...) drops the later towers' copies: only tower 0's batch "
                      "trains (not rewritten: the rewrite would raise on the towers' "
                      "lists; share the variable, shared-variables' fix, and the lists "
                      "match)")
    if risks.statistics and not skips_none:
        breaks.append(f"the batch norm settings at {risks.statistics} put its moving mean "
                      "and variance in TRAINABLE_VARIABLES (variables_collections): no "
                      "loss reaches them, so their gradients are None and expand_dims "
                      "raises \"None values not supported\"")
    return breaks


def _zipped_towers(loop: cst.For) -> str | None:
    """The code of what a `for ... in zip(*towers):` loop zips (a name or an attribute:
    `self.tower_grads`), else None."""
    call = loop.iter
    if (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
            and call.func.value == "zip" and len(call.args) == 1 and call.args[0].star == "*"
            and isinstance(call.args[0].value, (cst.Name, cst.Attribute))):
        return cst.Module([]).code_for_node(call.args[0].value)
    return None


def _indexed_towers(loop: cst.For) -> str | None:
    """The code of the tower list a loop over the first tower's list by index walks
    (`for i in range(len(towers[0])):`, `for i, (_, var) in enumerate(towers[0]):`), else
    None."""
    call = loop.iter
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
            and len(call.args) == 1):
        return None
    given = call.args[0].value
    if call.func.value == "range":
        if not (isinstance(given, cst.Call) and isinstance(given.func, cst.Name)
                and given.func.value == "len" and len(given.args) == 1):
            return None
        given = given.args[0].value
    elif call.func.value != "enumerate":
        return None
    if (isinstance(given, cst.Subscript) and len(given.slice) == 1
            and isinstance(given.slice[0].slice, cst.Index)
            and isinstance(given.slice[0].slice.value, cst.Integer)
            and given.slice[0].slice.value.value == "0"
            and isinstance(given.value, (cst.Name, cst.Attribute))):
        return cst.Module([]).code_for_node(given.value)
    return None


def _index_of(loop: cst.For) -> str | None:
    target = loop.target
    if isinstance(target, cst.Tuple) and target.elements:
        target = target.elements[0].value
    return target.value if isinstance(target, cst.Name) else None


def _indexes(loop: cst.For, towers: str) -> bool:
    """Whether the loop reads every tower's entry at its index: `towers[t][i]`."""
    index, code = _index_of(loop), cst.Module([]).code_for_node
    for subscript in descendants(loop.body, cst.Subscript):
        inner = subscript.value
        if (isinstance(inner, cst.Subscript) and code(inner.value) == towers
                and len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index)
                and isinstance(subscript.slice[0].slice.value, cst.Name)
                and subscript.slice[0].slice.value.value == index):
            return True
    return False


def _pairs_of(loop: cst.For) -> bool:
    """Whether the loop reads its target as (gradient, variable) pairs: `target[0][1]`, or
    a loop or comprehension `for g, v in target`."""
    if not isinstance(loop.target, cst.Name):
        return False
    target = loop.target.value
    for subscript in descendants(loop.body, cst.Subscript):
        inner = subscript.value
        if (isinstance(inner, cst.Subscript) and isinstance(inner.value, cst.Name)
                and inner.value.value == target):
            return True
    for node in descendants(loop.body, cst.For, cst.CompFor):
        if (isinstance(node.iter, cst.Name) and node.iter.value == target
                and isinstance(node.target, cst.Tuple) and len(node.target.elements) == 2):
            return True
    return False


def _walked(recipe: _Recipe) -> str:
    """What the recipe's loop walks, as its finding names it."""
    if _zipped_towers(recipe.loop) is not None:
        return f"zip(*{recipe.towers})"
    return f"{recipe.towers}[0] by index"


def _appended_to(loop: cst.For) -> str | None:
    """The one list the loop appends (gradient, variable) pairs to, else None."""
    lists = {call.func.value.value for call in descendants(loop.body, cst.Call)
             if isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
             and isinstance(call.func.value, cst.Name) and len(call.args) == 1
             and isinstance(call.args[0].value, cst.Tuple)}
    return lists.pop() if len(lists) == 1 else None


def _handles_none_and_sparse(loop: cst.For) -> tuple[bool, bool]:
    """Whether the loop's code names None, and IndexedSlices or `.indices`: read from its
    names, not its text, so that a check commented out (`# if g is not None:`, the recipe
    of tensorflow/tensorflow#13403) does not count as one."""
    names = {n.value for n in descendants(loop, cst.Name)}
    attributes = {a.attr.value for a in descendants(loop, cst.Attribute)}
    return "None" in names, bool({"IndexedSlices", "indices"} & (names | attributes))


def _zipped(loop: cst.For, params: set[str]) -> str | None:
    """The parameter a `for ... in zip(*param):` loop zips, else None."""
    call = loop.iter
    if (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
            and call.func.value == "zip" and len(call.args) == 1 and call.args[0].star == "*"
            and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value in params):
        return call.args[0].value.value
    return None


def _taken_from_params(function: cst.FunctionDef) -> set[str]:
    """The function's parameters, and the names its body takes from one of them by index
    or loop (`for tower_grads in tower_grads_list:`, `tower_grads = tower_grads_list[i]`):
    a function averaging several models' tower lists (wchen342/SketchyGAN's, one list per
    optimizer) is still an averaging function of its own, reported at its `def`."""
    params = {p.name.value for p in function.params.params}

    def of_param(value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Subscript):
            value = value.value
        return isinstance(value, cst.Name) and value.value in params

    taken = set()
    for loop in descendants(function, cst.For):
        if isinstance(loop.target, cst.Name) and of_param(loop.iter):
            taken.add(loop.target.value)
    for assign in descendants(function, cst.Assign):
        if (len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
                and isinstance(assign.value, cst.Subscript) and of_param(assign.value)):
            taken.add(assign.targets[0].target.value)
    return params | taken


def _list_made(function: cst.FunctionDef) -> str:
    """The name the function's body binds to an empty list (the averages it returns)."""
    for statement in function.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if (isinstance(small, cst.Assign) and isinstance(small.value, cst.List)
                        and not small.value.elements and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    return small.targets[0].target.value
    return "average_grads"


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))
