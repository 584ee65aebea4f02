"""The source surface of `shared-variables`: the libcst codemod (see the package docstring
for the bug and the graph surface)."""

from __future__ import annotations

from functools import partial

import libcst as cst

from graphfix.source.codemod import (
    HOLE,
    Example,
    SourceCodemod,
    argument,
    device_template,
    v1_spelling,
)
from graphfix.source.fixes import Replace
from graphfix.source.project import unit_at
from graphfix.source.project.facts import library_module
from graphfix.source.scopes import enclosing_function
from graphfix.source.vocabulary import (
    LIBRARY_BUILD_METHOD,
    LIBRARY_VARIABLE_MODULES,
    LIBRARY_WORDS,
    VARIABLE_COLLECTION_KEYS,
)

# -- Source surface -------------------------------------------------------------------------
#
# Where code runs under a variable scope that reuses is the project model's to say
# (`FileView.reusing_regions`: `with variable_scope(..., reuse=...)`, after
# `reuse_variables()`, and the code such code calls, across files, and through the objects
# it gives: `FileView.reusing_regions_through_objects`), and so is where code runs once per
# tower (`FileView.tower_code_through_objects`). Here: each `tf.Variable(...)` made where
# both hold, but a tower's own state (`_towers_own`), rewritten as `get_variable`.

# `Variable(initial_value, trainable, ...)`: past `trainable` the positions differ between
# TF1's Variable and TF2's, so a positional argument there is not rewritten.
_KEPT = frozenset({"trainable", "collections", "validate_shape", "caching_device", "dtype",
                   "constraint", "use_resource", "synchronization", "aggregation", "shape"})
# Arguments `get_variable` has no counterpart for.
_NOT_IN_GET_VARIABLE = frozenset({"variable_def", "import_scope", "expected_shape",
                                  "experimental_enable_variable_lifting"})
# The local collection's keys (`tf.GraphKeys.LOCAL_VARIABLES`, its string): a worker's own
# variables, neither saved nor trained.
_LOCAL_KEYS = frozenset(k for k, kind in VARIABLE_COLLECTION_KEYS.items() if kind == "frozen")


def _last_name(target: cst.BaseExpression) -> str | None:
    """The name a variable is assigned to, as get_variable's name: `w`, `self.w` -> w,
    `a[i]` -> a."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    if isinstance(target, cst.Subscript):
        return _last_name(target.value)
    return None


class SharedVariablesCodemod(SourceCodemod):
    """Rewrite `tf.Variable(...)` made under a reusing variable scope as `get_variable`.

    Found: a `tf.Variable(...)` (any spelling: `tf.compat.v1.Variable`, an alias) whose code
    runs under a variable scope that reuses, as the project model says
    (`FileView.reusing_regions`): the body of `with tf.variable_scope(..., reuse=True)` (or
    `reuse=tf.AUTO_REUSE`, or an expression such as `reuse=i > 0` or a `reuse` parameter:
    the scope re-entered per tower), the code after `tf.get_variable_scope()
    .reuse_variables()` to the end of its variable scope (from the start of the tower loop
    it is in: the loop's next pass reuses), and the functions such code calls, in this file
    or another of the run, and the methods such a call runs on an object it gives the
    function it calls (`tower_loss(scope, vgg)`, `vgg = VGG16(...)` made once before the
    tower loop: `vgg.inference` and the helper making its weights,
    `FileView.reusing_regions_through_objects`). Reuse applies to `get_variable` only: each call makes a new
    variable, one per tower. What such a call does not run is not under reuse: a module's
    own code (a function that reads a module's name does not run the module: the code
    before a script's tower loop, which the script calls at module level, is made once),
    and the branch of an `if flag:` (or `a if flag else b`) that a flag the call gives as a
    literal does not take (`Model(reuse_variables=True)` never calls the `tf.Variable`
    maker its `else:` picks). Such a call is a copy only where its code runs once per
    tower (`FileView.tower_code`): in a loop whose passes each enter a device scope chosen
    at run time or re-enter the reusing scope (seed 003's `my_%d` replicas), in a tower
    function given its GPU, in device scopes naming two or more GPUs, or in code that
    such tower code calls, across files, through an object given as well
    (`FileView.tower_code_through_objects`). Without towers, reuse shares what other code
    made and a `tf.Variable` beside it is new on purpose (a tied-weights decoder reads its
    encoder's kernel with `reuse=True` and makes its own bias): not found. Not found
    either: a variable meant to be each tower's own, not
    trainable (`trainable=False`) and in `LOCAL_VARIABLES` or named per call (`"state_%d" %
    gpu`): a tower's recurrent state, which one shared variable would mix across the
    towers' batch shards. Nor one in a method nothing calls (`Project.called`): a tower
    building an object runs its `__init__` and what that calls, not every method of its
    class. Nor one the towers reach only through an object made once before them that
    makes it only while it holds none (`if self.w is None:`, `if not hasattr(self, ...)`,
    `if name not in self.made:`): the object hands the first tower's to the next.

    Found too (reported, not fixed): a library module (`snt.Module(build)`, `snt.Linear(10)`,
    read through the file's imports) constructed and connected (called at once, or through
    the name it is bound to) in the body of a tower loop or in a top-level function a tower
    loop calls (`FileView.tower_code` holding it): each instance is a new module with a
    variable scope of its own, one per tower. Not found: one constructed in a module's
    build (a `_build` method, any method, a function given to a module's constructor or to
    `make_template`), which runs in that module's reused scope, or constructed once outside
    the towers.

    Fixed: `tf.compat.v1.get_variable(name, initializer=init, ...)`, spelled as the file
    reaches compat.v1 (`tf.get_variable` after `import tensorflow.compat.v1 as tf`), named
    from `name=` or else the variable the call is assigned to (`w`, `self.w`, `a[i]`: `w`,
    `w`, `a`); `trainable`, `collections`, `dtype`, `validate_shape`, `caching_device`,
    `constraint`, `use_resource`, `synchronization`, `aggregation` kept; a `lambda:`
    initial value becomes its body (get_variable would call it with a shape). Reported, not
    fixed: a call where reuse is on already the first time it runs (in `reuse=True`, or
    after `reuse_variables()` in its first pass: get_variable would find nothing to
    reuse), a call with no name to give it (`return tf.Variable(...)`), two calls that
    would get one name in one variable scope, a call in a loop inside the reusing scope
    (one name would share every pass's variable), positional arguments past `trainable`,
    `*args` / `**kwargs`, and arguments get_variable lacks (`variable_def`,
    `import_scope`).
    """

    DESCRIPTION = "Make tf.Variable under a reusing variable scope a shared get_variable."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf


        def tower(x, reuse):
            with tf.variable_scope("model", reuse=reuse):
                w = tf.get_variable("w", initializer=tf.zeros([3, 2]))
                return tf.matmul(x, w)
        """,
        """\
        import tensorflow.compat.v1 as tf

        step = tf.Variable(0, trainable=False, name="global_step")
        """,
        """\
        import tensorflow.compat.v1 as tf


        def decoder(y):
            with tf.variable_scope("tied", reuse=True):
                kernel = tf.get_variable("kernel")
                bias = tf.Variable(tf.zeros([4]))
                return tf.matmul(y, kernel, transpose_b=True) + bias
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf


            def tower(x, gpu):
                with tf.device("/gpu:%d" % gpu), tf.variable_scope("model", reuse=gpu > 0):
                    w = tf.Variable(tf.zeros([3, 2]))
                    return tf.matmul(x, w)
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf


            def tower(x, gpu):
                with tf.device("/gpu:%d" % gpu), tf.variable_scope("model", reuse=gpu > 0):
                    w = tf.get_variable("w", initializer=tf.zeros([3, 2]))
                    return tf.matmul(x, w)
            """,
            says="tf.Variable under a reusing variable scope (reuse=gpu > 0) is not shared"),
    )

    def visit_Module(self, node: cst.Module) -> None:
        self._modules_per_tower()
        regions = self.project.reusing_regions_through_objects()
        if not regions:
            return
        towers = self.project.tower_code_through_objects()
        self._plain_towers = None  # `tower_code`, asked of a guarded site only
        spelling = v1_spelling(node, "get_variable")
        # (the name a fix writes, quoted as most of the file's strings are)
        self._quote = "'" if node.code.count("'") > node.code.count('"') else '"'
        sites = []
        for call in self.nodes(cst.Call):
            if self.tf_canonical(call.func) not in ("Variable", "VariableV1"):
                continue
            line = self.position(call)[0]
            region = next((r for r in regions if r[0] <= line <= r[1]), None)
            if (region is not None and any(first <= line <= last for first, last in towers)
                    and not self._towers_own(call) and self._may_run(line)
                    and not self._made_once_by_a_shared_object(call, line)):
                sites.append((call, region))
        named = {}
        for call, _ in sites:
            name = self._name_of(call)
            if isinstance(name, str):
                named.setdefault((self._scope_of(call), name), []).append(call)
        for call, (first, _, why, strict) in sites:
            reusing = strict is not None and self.position(call)[0] >= strict
            self._judge(call, first, why, spelling, named, reusing)

    # -- a library module made per tower -------------------------------------------------

    def _modules_per_tower(self) -> None:
        """Report each library module (`snt.Module(build)`, `snt.Linear(10)`) constructed
        and connected in the tower loop's body, or in a function that loop calls, not a
        module's own build: each construction is a new module with a variable scope of its
        own (`simple_net`, `simple_net_1`), so each tower trains its own weights. A module
        constructed once, outside the towers, and called in each is shared (a Sonnet module
        is a template); one constructed in a module's build (`_build`, a function given to
        `snt.Module`, and what they call) is made in that module's scope, which its later
        connections reuse."""
        if not any(word in self._tree_code() for word in LIBRARY_WORDS):
            return
        loops, tower_functions = self._tower_loops_and_functions()
        if not loops and not tower_functions:
            return
        towers = self.project.tower_code_through_objects()
        builds = self._module_builds()
        for call in self.nodes(cst.Call):
            module = library_module(self.tf_names, call.func)
            if module not in LIBRARY_VARIABLE_MODULES:
                continue
            line = self.position(call)[0]
            function = enclosing_function(call, self.parent)
            if (function is None or function in builds
                    or not any(first <= line <= last for first, last in towers)):
                continue
            in_loop = any(first <= line <= last for first, last in loops)
            if not (in_loop or (function.name.value in tower_functions
                                and isinstance(self.parent(function), cst.Module))):
                continue
            if not self._connected_in(call, function):
                continue
            where = ("in the tower loop" if in_loop
                     else f"in {function.name.value}, which each tower calls")
            self.report(call, (
                f"{self.code(call.func)}(...) is constructed anew {where}: each module "
                f"instance gets a variable scope of its own, so each tower trains its own "
                f"weights instead of sharing one set; not fixed: construct the module once, "
                f"before the towers, and call that one in each tower"))

    def _tower_loops_and_functions(self) -> tuple[list[tuple[int, int]], set[str]]:
        """(the line ranges of this file's tower loops, the names of this file's top-level
        functions that a tower loop of this file or of one connected to it calls
        directly: `loss = tower_loss(scope)`)."""
        project, own = self.project.project, self.project.label
        loops = [tuple(span) for span in project.towers(own)["spans"]]
        called: set[str] = set()
        for label in sorted(project.connected(own)):
            part = project.parts.get(label)
            if part is None:
                continue
            for line, callee, _ in project.towers(label)["calls"]:
                for target_label, unit in project.resolve_in(label, unit_at(part, line),
                                                             callee):
                    if target_label == own:
                        called.add(unit)
        return loops, called

    def _module_builds(self) -> set[cst.FunctionDef]:
        """The functions whose code runs in a library module's variable scope: a `_build`
        method, a method of a class, and a function of this file given to a module's
        constructor (`snt.Module(custom_build)`) or to `make_template`."""
        given = set()
        for call in self.nodes(cst.Call):
            if (library_module(self.tf_names, call.func) in LIBRARY_VARIABLE_MODULES
                    or self.tf_canonical(call.func) == "make_template"):
                given |= {arg.value.value for arg in call.args if isinstance(arg.value, cst.Name)}
        return {f for f in self.nodes(cst.FunctionDef)
                if f.name.value in given or f.name.value == LIBRARY_BUILD_METHOD
                or isinstance(self.parent(self.parent(f)), cst.ClassDef)}

    def _connected_in(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        """Whether a module's construction is connected in `function`: called at once
        (`snt.Linear(10)(x)`), or bound to a name that a later call of the function calls
        (`net = snt.Module(build)`, then `net(x)`)."""
        holder = self.parent(call)
        if isinstance(holder, cst.Call) and holder.func is call:
            return True
        if not (isinstance(holder, cst.Assign) and holder.value is call
                and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name)):
            return False
        name = holder.targets[0].target.value
        made = self.position(call)
        return any(isinstance(other.func, cst.Name) and other.func.value == name
                   and self.position(other) > made
                   and enclosing_function(other, self.parent) is function
                   for other in self.nodes(cst.Call))

    # -- reading a call --------------------------------------------------------------------

    def _towers_own(self, call: cst.Call) -> bool:
        """Whether a `Variable(...)` is meant to be each tower's own: not trainable
        (`trainable=False`, as written), and in the local collection or named per call (a
        name built from values: `"state_%d" % gpu`, an f-string): a tower's recurrent
        state or counters, which one shared variable would mix across the towers' batch
        shards."""
        trainable = argument(call, "trainable", 1)
        if not (isinstance(trainable, cst.Name) and trainable.value == "False"):
            return False
        collections = argument(call, "collections", None)
        keys = (collections.elements if isinstance(collections, (cst.List, cst.Tuple))
                else ())
        if any(_collection_key(element.value) in _LOCAL_KEYS for element in keys):
            return True
        name = argument(call, "name", None)
        # (a string template: where the text is made at run time, a HOLE)
        return name is not None and HOLE in (device_template(name) or "")

    def _made_once_by_a_shared_object(self, call: cst.Call, line: int) -> bool:
        """Whether a `Variable(...)` the towers reach only through an object made once
        before them (`FileView.tower_code_through_objects`, not `tower_code`) is made only
        while the object holds none yet: in the body of an `if self.w is None:`, `if not
        hasattr(self, ...)` or `if name not in self.made:`. The object keeps what the first
        tower made and gives it to the next: shared."""
        node, child = self.parent(call), call
        guarded = False
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if isinstance(node, cst.If) and child is node.body and _unset_on_self(node.test):
                guarded = True
                break
            node, child = self.parent(node), node
        if not guarded:
            return False
        if self._plain_towers is None:
            self._plain_towers = self.project.tower_code()
        return not any(first <= line <= last for first, last in self._plain_towers)

    def _may_run(self, line: int) -> bool:
        """Whether the code at `line` may run: not in a method nothing calls
        (`Project.called`). Tower code reaches every method of a class the towers build,
        but building an object runs `__init__` and what that calls, not a method nothing
        calls (`setup_global_step` with its one call commented out). A top-level function
        nothing in the run calls may still be an entry point (a script's `train`, called
        by its users): it is not left out."""
        project, label = self.project.project, self.project.label
        part = project.parts.get(label)
        if part is None:
            return True
        unit = unit_at(part, line)
        return (part["units"].get(unit, {}).get("kind") != "method"
                or project.called((label, unit)))

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """Where a get_variable name must be unique: the innermost `with variable_scope(...)`
        block holding `node` in its function, else the function (or the module)."""
        node = self.parent(node)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if isinstance(node, cst.With) and any(
                    isinstance(item.item, cst.Call) and (self.tf_canonical(item.item.func)
                                                         or "").endswith("variable_scope")
                    for item in node.items):
                return node
            node = self.parent(node)
        return node if node is not None else self._tree

    def _name_of(self, call: cst.Call) -> str | cst.BaseExpression | None:
        """The variable's name: the `name=` expression as given (a literal as its text), or
        the target the call is assigned to; None if neither says one."""
        given = argument(call, "name", None)
        if given is not None:
            if isinstance(given, cst.SimpleString) and isinstance(given.evaluated_value, str):
                return given.evaluated_value
            return given
        child, parent = call, self.parent(call)
        position = None
        if isinstance(parent, cst.Element) and isinstance(self.parent(parent), cst.Tuple):
            elements = self.parent(parent).elements
            position = next(k for k, e in enumerate(elements) if e is parent)
            child, parent = self.parent(parent), self.parent(self.parent(parent))
        if isinstance(parent, cst.Assign) and parent.value is child and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign) and parent.value is child:
            target = parent.target
        else:
            return None
        if position is not None:
            if not isinstance(target, (cst.Tuple, cst.List)) or position >= len(target.elements):
                return None
            target = target.elements[position].value
        return _last_name(target)

    def _in_inner_loop(self, call: cst.Call, region_first: int) -> bool:
        """Whether the call is in a loop that begins inside the reusing region (a loop of
        layers, not the tower loop the region starts at)."""
        node = self.parent(call)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Lambda)):
            if isinstance(node, (cst.For, cst.While)) and self.position(node)[0] > region_first:
                return True
            node = self.parent(node)
        return False

    # -- finding and fix -------------------------------------------------------------------

    def _judge(self, call: cst.Call, region_first: int, why: str, spelling: str | None,
               named: dict, reusing_already: bool) -> None:
        message = (f"tf.Variable under a reusing variable scope ({why}) is not shared: each "
                   "call makes a new variable, one per tower (seed 003); reuse applies to "
                   "get_variable only")
        name = self._name_of(call)
        problem = self._problem(call, name, region_first, spelling, named)
        if problem is None and reusing_already:
            problem = ("reuse is on already where it is first made, so get_variable would "
                       "find no variable to reuse; make it with get_variable before the "
                       "scope reuses, or reuse=tf.AUTO_REUSE")
        if problem is not None:
            self.report(call, f"{message}; not fixed: {problem}")
            return
        given = argument(call, "name", None)  # kept as written; else the target's name
        literal = None if given is not None else f"{self._quote}{name}{self._quote}"
        shown = literal or self.code(given)
        self.report(call, f"{message}; fix: {spelling}({shown}, initializer=...)",
                    fix=Replace(call, partial(_as_get_variable, spelling, literal)))

    def _problem(self, call, name, region_first, spelling, named) -> str | None:
        if spelling is None:
            return "no TensorFlow import to spell get_variable with"
        if any(a.star for a in call.args):
            return "*args / **kwargs: the arguments are not visible"
        positional = [a for a in call.args if a.keyword is None]
        if len(positional) > 2:
            return "positional arguments past trainable: give them as keywords"
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        lacking = sorted(keywords & _NOT_IN_GET_VARIABLE)
        if lacking:
            return f"get_variable has no {', '.join(lacking)}"
        if argument(call, "initial_value", 0) is None:
            return "no initial value"
        if name is None:
            return "no name to give it: pass name= (get_variable needs one, unique in its scope)"
        if isinstance(name, str) and len(named.get((self._scope_of(call), name), ())) > 1:
            return (f"two variables would be named {name!r} in one variable scope: name "
                    "them apart")
        if isinstance(name, str) and self._in_inner_loop(call, region_first):
            return ("made in a loop inside the reusing scope: one name would share every "
                    "pass's variable; give each its own name")
        return None


def _as_get_variable(spelling: str, name: str | None, updated: cst.Call) -> cst.Call:
    """`Variable(...)` as `get_variable(name, initializer=..., <kept>)`; `name` (a string
    literal's code) None: the call's own `name=` expression."""
    name_arg = (cst.SimpleString(name) if name is not None
                else argument(updated, "name", None))
    initial = argument(updated, "initial_value", 0)
    if isinstance(initial, cst.Lambda) and not initial.params.params:
        initial = initial.body  # get_variable would call it with a shape
    trainable = argument(updated, "trainable", 1)
    args = [cst.Arg(name_arg), _keyword("initializer", initial)]
    if trainable is not None:
        args.append(_keyword("trainable", trainable))
    for arg in updated.args:
        if arg.keyword is not None and arg.keyword.value in _KEPT - {"trainable"}:
            args.append(_keyword(arg.keyword.value, arg.value))
    return updated.with_changes(func=cst.parse_expression(spelling), args=args)


def _on_self(expr: cst.BaseExpression) -> bool:
    """What the object holds: `self.<name>`, deeper (`self.a.b`), an item or a look-up of
    one (`self.made[name]`, `self.made.get(name)`)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return isinstance(expr, cst.Name) and expr.value == "self"


def _unset_on_self(test: cst.BaseExpression) -> bool:
    """Whether an `if` test asks that the object holds nothing yet: `self.w is None`, `not
    hasattr(self, "w")`, `name not in self.made`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression  # (`not self.flag` is a flag, not a held weight)
        return (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name)
                and inner.func.value == "hasattr" and bool(inner.args)
                and isinstance(inner.args[0].value, cst.Name)
                and inner.args[0].value.value == "self")
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, cst.Is):
            return (_on_self(test.left) and isinstance(target.comparator, cst.Name)
                    and target.comparator.value == "None")
        if isinstance(target.operator, cst.NotIn):
            return _on_self(target.comparator)
    return False


def _collection_key(expr: cst.BaseExpression) -> str | None:
    """A collection's key as written: `tf.GraphKeys.LOCAL_VARIABLES` -> LOCAL_VARIABLES, a
    string literal -> its text."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        return expr.evaluated_value
    return None


def _keyword(key: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value, keyword=cst.Name(key),
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
