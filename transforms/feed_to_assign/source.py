"""The source surface of `feed-to-assign`: the libcst codemod (see the
package docstring for the bug and the fix)."""

from __future__ import annotations

import ast
import dataclasses

import libcst as cst
from graphfix.transforms.feed_to_assign import _FLOAT_REF_ERROR, fed_variable_error
from libcst.metadata import (
    Assignment,
    ImportAssignment,
    QualifiedNameSource,
    ScopeProvider,
)

from graphfix.source.codemod import Example, SourceCodemod, TfNames, argument
from graphfix.source.fixes import InsertBefore, Remove, Replace
from graphfix.source.project import FileView, unit_at
from graphfix.source.project.feeds import GLOBAL_STEP_UPDATED, VARIABLE_KINDS, FeedFacts
from graphfix.source.scopes import descendants
from graphfix.source.vocabulary import MONITORED_SESSIONS

# -- Source surface -------------------------------------------------------------------------
#
# Everything is read off the syntax tree (nothing here imports TensorFlow). A feed key counts
# as a variable when its binding is visible: a name assigned from a variable constructor or a
# collection lookup, or an attribute that every file of the run assigns only from those.

_VARIABLES_ERROR = _FLOAT_REF_ERROR.replace("feeding it", "feeding a variable", 1)
# A step or counter (no optimizer's: it is moved only where it is updated in place) fails
# with its own type: int64 for the global step, whatever it was made with otherwise.
_ERRORS_OF_KIND = {
    "global_step": fed_variable_error("int64", "the optimizer counts it (global_step=)"),
    "frozen": fed_variable_error("<its type>", "the run updates it in place"),
}
_HEADERS = {cst.If: "an `if` condition", cst.While: "a `while` condition",
            cst.For: "a `for` header", cst.With: "a `with` header"}
def _to_none(arg: cst.Arg) -> cst.Arg:
    """A positional feed left empty, where a later positional argument needs its place."""
    return arg.with_changes(value=cst.Name("None"))


# A run that fetches nothing but the variables it feeds (or nothing at all) stores nothing:
# whatever reads the variable next (the train op's decayed rate) reads its old value.
_NOT_STORED = ("a run that fetches nothing but what it feeds stores nothing: the variable "
               "keeps its old value, and what reads it next reads that")

_LOAD_HELP = ("assign it before the run instead: `var.load(value, sess)` (adds no op to the "
              "graph), or `feeds = graphfix.runtime.load_variable_feeds(sess, feeds)`")


def _update_key(expr: cst.BaseExpression | None) -> str | None:
    """How `updated` facts name a variable expression: its last name (`self.lr` -> `lr`)."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _has_effects(expr: cst.CSTNode) -> bool:
    """Whether evaluating `expr` may do something (call, yield, await, bind a name)."""
    return bool(descendants(expr, cst.Call, cst.Yield, cst.Await, cst.NamedExpr,
                            skip_lambdas=True))


class _Reader:
    """What the syntax says about expressions: TF names, bindings, variables, collections.

    `updated` is the project model's fact of the files connected to this one
    (`FileView.feed_facts`).
    """

    def __init__(self, names: TfNames, scope, parent, code_range, code: str,
                 facts: FeedFacts | None):
        self.names, self.scope, self.parent = names, scope, parent
        self.code_range, self.lines = code_range, code.splitlines()
        self.facts = facts  # the project model's reader of this file; None: not parsed
        self._spans: dict[tuple, ast.expr] | None = None
        self.updated: set[str] = set()

    def canonical(self, node: cst.CSTNode) -> str | None:
        """The TF symbol `node` names, also through a module alias (`v1 = tf.compat.v1`)."""
        return self.names.canonical(node)

    def imported(self, node: cst.CSTNode) -> bool:
        """Whether `node` names something imported (`subprocess.run`, `tf.app.run`)."""
        return any(q.source == QualifiedNameSource.IMPORT for q in self.names.imported(node))

    def builtin(self, node: cst.CSTNode, name: str) -> bool:
        return (isinstance(node, cst.Name) and node.value == name
                and not any(isinstance(a, Assignment) for a in self.bindings(node) or ()))

    # -- bindings ---------------------------------------------------------------------------

    def bindings(self, name: cst.Name) -> list | None:
        """The assignments `name` may refer to; None if its scope is unknown."""
        scope = self.scope(name)
        if scope is None:
            return None
        return list(scope[name.value])

    def bound_value(self, assignment) -> cst.BaseExpression | None:
        """What an assignment binds: the value of `x = v` / `x: T = v`, the item of `with v
        as x`; None when the syntax does not show it (an import, a loop, a parameter, part
        of a tuple)."""
        if not isinstance(assignment, Assignment) or isinstance(assignment, ImportAssignment):
            return None
        node = assignment.node
        if not isinstance(node, cst.Name):
            return None
        parent = self.parent(node)
        if isinstance(parent, cst.AssignTarget):
            statement = self.parent(parent)
            if isinstance(statement, cst.Assign):
                return statement.value
        if isinstance(parent, cst.AnnAssign) and parent.target is node:
            return parent.value
        if isinstance(parent, cst.AsName):
            item = self.parent(parent)
            if isinstance(item, cst.WithItem):
                return item.item
        return None

    def stdlib_node(self, expr: cst.BaseExpression | None) -> ast.expr | None:
        """The node of the project model's tree (`facts.tree`, the same code) that spans what
        `expr` does (libcst's positions, like the stdlib's, leave parentheses out)."""
        if expr is None or self.facts is None:
            return None
        if self._spans is None:
            self._spans = {(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset): n
                           for n in ast.walk(self.facts.tree) if isinstance(n, ast.expr)}
        where = self.code_range(expr)
        start, end = where.start, where.end
        return self._spans.get((start.line, self._byte_column(start.line, start.column),
                                end.line, self._byte_column(end.line, end.column)))

    def _byte_column(self, line: int, column: int) -> int:
        """libcst counts a line's characters; the stdlib's parser, its UTF-8 bytes."""
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        return column if text.isascii() else len(text[:column].encode())

    # -- kinds ------------------------------------------------------------------------------
    #
    # What a key holds is the project model's reading (`FileView.feed_reader`, on the stdlib
    # tree of the same code): one reader of feed keys for the pre-filter and the codemod.

    def kind(self, expr: cst.BaseExpression | None) -> str | None:
        """"variable" (a variable an optimizer may update), "frozen" (one no optimizer
        updates: `trainable=False`, a bool or int), "global_step", "other" (not a variable),
        or None (not known from the source)."""
        return self.facts.kind(self.stdlib_node(expr)) if self.facts is not None else None

    def updates_nothing(self, fetches: cst.BaseExpression | None) -> bool:
        """Whether a run of `fetches` writes no variable (`FeedFacts.updates_nothing`: a
        schedule, a loss, a variable read), so a variable fed to it is read from the feed
        and the run works; False where it may write one or the code does not show it."""
        return self.facts is not None and self.facts.updates_nothing(self.stdlib_node(fetches))

    def collection(self, expr: cst.BaseExpression | None) -> str | None:
        """"variable"/"frozen" when `expr` is a list of variables from a collection."""
        return self.facts.collection(self.stdlib_node(expr)) if self.facts is not None else None

    def runtime_collection(self, expr: cst.BaseExpression) -> bool:
        """A dict whose keys come from a variable collection: `{v: ... for v in
        tf.trainable_variables()}`, `dict(zip(tf.global_variables(), values))`."""
        if isinstance(expr, cst.DictComp):
            loops, loop = [], expr.for_in
            while loop is not None:
                loops.append(loop.iter)
                loop = loop.inner_for_in
        elif isinstance(expr, cst.Call) and self.builtin(expr.func, "dict") and expr.args:
            loops = [expr.args[0].value]
        else:
            return False
        for root in loops:
            for node in [root, *descendants(root, cst.Call, cst.Name)]:
                if self.collection(node):
                    return True
        return False

    def op_name(self, expr: cst.BaseExpression, depth: int = 0) -> str | None:
        """The op a key names at run time: `"emb:0"`, `graph.get_tensor_by_name("emb:0")`."""
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return value.split(":")[0] if isinstance(value, str) else None
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value in ("get_tensor_by_name", "as_graph_element")
                and expr.args):
            return self.op_name(expr.args[0].value, depth + 1)
        if isinstance(expr, cst.Name) and depth < 3:
            values = [self.bound_value(a) for a in self.bindings(expr) or []]
            if len(values) == 1 and isinstance(values[0], cst.BaseExpression):
                return self.op_name(values[0], depth + 1)
        return None


def _updates_in_reach(view: FileView) -> set[str | None]:
    """What the updates (`FeedFacts.facts`' `trains`: optimizers, assigns) the program may
    run with `view`'s file may write: the last names of their `var_list`s or targets, None
    for an update of every trainable variable. Counted: the file's own, and those in units
    of the files connected to it that its units, or the units that call them, reach
    (`Project.reached`): an attack's optimizer in a sibling module of a library package
    trains its own variables, not this file's."""
    project, own = view.project, view.label
    reach = None
    found: set[str | None] = set()
    for label in sorted(project.connected(own)):
        part = project.parts.get(label)
        for line, listed in project.feeds(label)["trains"]:
            if label != own:
                if reach is None:
                    units = set(project.units(own))
                    reach = project.reached(units.union(*(project.callers(u) for u in units)))
                if part is None or (label, unit_at(part, line)) not in reach:
                    continue
            found.update(listed if listed is not None else [None])
    return found


@dataclasses.dataclass
class _Run:
    """A `sess.run` (or `op.run` / `tensor.eval`) given a feed dict."""

    call: cst.Call
    fetches: cst.BaseExpression | None  # None: the run's fetches are not given
    feed: cst.BaseExpression
    feed_arg: cst.Arg
    label: str  # `sess.run`, for messages
    session: str | None  # what `load` is given; None: the default session
    monitored: bool  # a MonitoredSession: `load` needs its raw session, from run_step_fn
    small: cst.BaseSmallStatement | None  # the statement the loads go before
    problem: str | None  # why nothing can go before it


class FeedToAssignCodemod(SourceCodemod):
    """Load fed variables before the run instead of feeding them.

    Found: a `sess.run(...)` whose feed dict (`feed_dict=`, or `Session.run`'s second
    positional argument; also `op.run(feed_dict=...)` and `tensor.eval(feed_dict=...)`) has a
    key that is a variable an optimizer or an assign may update:

    - a name bound to `tf.Variable`, `tf.get_variable`, slim's `variable`/`model_variable`
      (any import alias, compat.v1 spellings), or looked up from a variable collection:
      `tf.trainable_variables()[i]`, `[v for v in tf.global_variables() if v.name ==
      "myvar_23:0"][0]`, `next(v for v in ...)`, a loop over a collection;
    - an attribute (`self.embeddings`, `model.embeddings`, a namedtuple's field) or a name
      imported from another module, when every file connected to this one by imports (the
      project model's) that assigns that name assigns it a variable.

    A trainable variable counts only where the program may update it: an assign to it
    (`tf.assign(v, ...)`, `v.assign_add(...)`), or an optimizer's `minimize`,
    `compute_gradients` or `apply_gradients` (or a train op maker: `optimize_loss`) with no
    `var_list`, or one that may hold it, in this file or in the code of a connected file
    that its code, or the code calling it, reaches. Where none does (an attack's objective
    fed its reference point every run, a sibling module's optimizer training its own
    `var_list`), no run writes it, and feeding it works: left alone.

    Variables no optimizer updates (`trainable=False`, bool or int: `is_training`, a step
    counter; a trainable one that only optimizers' arguments read, as a learning rate, which
    the loss has no gradient to) are left alone, since feeding one works, unless something
    updates them in place (`minimize(..., global_step=v)`, `tf.assign(v, ...)`,
    `v.assign_add(...)`) and the run may be what does. Any variable, trained or not, is left
    alone in the feed of a run whose fetches write no variable (a loss or a metric evaluated
    at fed weights, a decay schedule at a fed step, a variable; an attribute, `model.loss`,
    where every value the connected files assign it is such): the run works, TF reads the
    fed value for that run alone, and a `load` would keep it in the variable for the train
    runs after it. Placeholders, tensors, and keys whose binding the source does not show
    (a parameter) stay as they are.

    A run that fetches nothing but the variables it feeds (`sess.run(step,
    feed_dict={step: n})`, `sess.run([], feed_dict={step: n})`) does not fail, and stores
    nothing: it gives the fed value back and the variable keeps its own, which is what the
    train op reads next. Its variables, whatever they are, are found and loaded instead.

    Fixed: the entry leaves the feed, and the variable is loaded just before the statement.
    `Variable.load` runs the variable's initializer with the value fed into it, so it adds
    no op to the graph however often it runs::

        sess.run(train_op, feed_dict={emb: value, x: batch})
        ->
        emb.load(value, sess)
        sess.run(train_op, feed_dict={x: batch})

    A feed left empty is dropped (`None` where a positional argument follows). A dict built
    earlier in the same function (`fd = {emb: v, x: b}`) loses the entry where it is built,
    and every run it is fed to gets the load. `op.run`/`tensor.eval` and
    `tf.get_default_session().run` load through the default session (`emb.load(value)`).
    A MonitoredSession (`MonitoredSession`, `MonitoredTrainingSession`,
    `SingularMonitoredSession`, bound by `with ... as s` or `s = ...`, or an attribute
    assigned one in the run) cannot be handed to `load`: running the initializer through it
    would run its hooks. The public way to its raw session is `run_step_fn`, so the load
    becomes::

        mon_sess.run_step_fn(lambda step_context: emb.load(value, step_context.session))

    Reported, not fixed (no edit, and what to do instead): a run that is not a
    statement of its own (in a lambda, a comprehension, one branch of `x if c else y`, a
    compound statement's header); a session that is an expression other than a name
    (`tf.Session().run`); a value whose computation would move ahead of a call before it in
    the statement; a dict built earlier that is changed in place (`fd[emb] = v`), used
    elsewhere, built in another block or function, or in more than one place, or whose value
    could change between the build and the run; and variables known only at run time: a dict
    whose keys come from a collection (`{v: ... for v in tf.trainable_variables()}`), or a
    variable fed by name (`"embeddings:0"`, `get_tensor_by_name`).

    Idempotent; findings and fixes honour `# graphfix: ignore[feed-to-assign]`. Not
    followed: feed dicts passed in from a caller, sessions held in a container, and fetches
    the files do not show (a parameter, what a function or method returns, an attribute no
    connected file assigns): their run may train, and a variable fed to it is found.
    """

    METADATA_DEPENDENCIES = (*SourceCodemod.METADATA_DEPENDENCIES, ScopeProvider)
    DESCRIPTION = "Load fed variables before the run (Variable.load) instead of feeding them."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        words = tf.placeholder(tf.int32, [None])
        embeddings = tf.Variable(tf.zeros([100, 8]), name="embeddings")
        loss = tf.reduce_sum(tf.gather(embeddings, words))
        train_op = tf.train.AdamOptimizer().minimize(loss)
        with tf.Session() as sess:
            sess.run(train_op, feed_dict={words: batch})
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf

            embeddings = tf.Variable(tf.zeros([100, 8]), name="embeddings")
            loss = tf.reduce_sum(embeddings)
            train_op = tf.train.AdamOptimizer().minimize(loss)
            with tf.Session() as sess:
                sess.run(train_op, feed_dict={embeddings: pretrained})
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf

            embeddings = tf.Variable(tf.zeros([100, 8]), name="embeddings")
            loss = tf.reduce_sum(embeddings)
            train_op = tf.train.AdamOptimizer().minimize(loss)
            with tf.Session() as sess:
                embeddings.load(pretrained, sess)
                sess.run(train_op)
            """,
            says='variable `embeddings` is fed to sess.run'),
    )

    # -- the module ---------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        reader = _Reader(self.tf_names, lambda n: self.get_metadata(ScopeProvider, n, None),
                         self.parent, self.code_range, self._tree.code,
                         self.project.feed_reader())
        nodes = self.nodes(cst.Call)
        # What this file and the files its imports connect it to assign to attribute names
        # and update in place: the project model's.
        facts = self.project.feed_facts()
        reader.updated = facts["updated"]
        self._reader, self._facts = reader, facts
        self._not_stored: set[cst.DictElement] = set()  # entries of runs that store nothing
        self._trains: set[str | None] | None = None  # asked once a variable is fed
        named: dict[frozenset, list[_Run]] = {}
        for call in nodes:
            run = self._run(call)
            if run is None:
                continue
            if isinstance(run.feed, cst.Dict):
                self._inline(run)
            elif reader.runtime_collection(run.feed):
                self._runtime(run)
            elif isinstance(run.feed, cst.Name):
                assignments = [a for a in reader.bindings(run.feed) or []
                               if isinstance(a, Assignment)]
                if assignments:
                    named.setdefault(frozenset(assignments), []).append(run)
        for assignments, runs in named.items():
            self._named(assignments, runs)
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))

    def _ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        out = []
        node = self._reader.parent(node)
        while node is not None:
            out.append(node)
            node = self._reader.parent(node)
        return out

    # -- runs ---------------------------------------------------------------------------------

    def _run(self, call: cst.Call) -> _Run | None:
        """The run `call` is, if it is given a feed dict."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("run", "eval"):
            return None
        if not isinstance(func.value, cst.Call) and self._reader.imported(func.value):
            return None  # subprocess.run, tf.app.run
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in positional):
            return None
        feed_arg = next((a for a in call.args
                         if a.keyword is not None and a.keyword.value == "feed_dict"), None)
        fetches = bool(positional) or argument(call, "fetches", None) is not None
        if func.attr.value == "run" and (fetches or feed_arg is None):
            # Session.run(fetches, feed_dict=None, options=None, run_metadata=None)
            if feed_arg is None and len(positional) >= 2:
                feed_arg = positional[1]
            if feed_arg is None or argument(call, "session", None) is not None:
                return None
            session_expr = func.value
            fetches = positional[0].value if positional else argument(call, "fetches", None)
        else:
            # Operation.run(feed_dict=None, session=None), Tensor.eval(feed_dict, session)
            if feed_arg is None and func.attr.value == "eval" and positional and isinstance(
                    positional[0].value, (cst.Dict, cst.DictComp)):
                feed_arg = positional[0]
            if feed_arg is None:
                return None
            session_expr = argument(call, "session", 1 if func.attr.value == "eval" else None)
            fetches = func.value
        session, monitored, problem = self._session(session_expr)
        small, where = self._statement(call)
        return _Run(call, fetches, feed_arg.value, feed_arg, self.code(func), session,
                    monitored, small, where or problem)

    def _session(self, expr: cst.BaseExpression | None) -> tuple[str | None, bool, str | None]:
        """(what `load` is given, a MonitoredSession?, why not) for a run's session."""
        if expr is None:
            return None, False, None
        if (isinstance(expr, cst.Call) and not expr.args
                and self._reader.canonical(expr.func) == "get_default_session"):
            return None, False, None
        plain = expr
        while isinstance(plain, cst.Attribute):
            plain = plain.value
        if not isinstance(plain, cst.Name):
            return None, False, (f"its session is `{self.code(expr)}`, an expression that "
                                 "would be evaluated again for the load")
        return self.code(expr), self._monitored(expr), None

    def _monitored(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in self._facts["monitored"]
        for assignment in self._reader.bindings(expr) or []:
            value = self._reader.bound_value(assignment)
            if isinstance(value, cst.Call) and self._reader.canonical(value.func) in MONITORED_SESSIONS:
                return True
        return False

    def _statement(self, call: cst.Call) -> tuple[cst.BaseSmallStatement | None, str | None]:
        """The simple statement a load can go before, or why there is none."""
        child, node = call, self._reader.parent(call)
        while node is not None:
            if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp,
                                 cst.GeneratorExp)):
                return None, "the run is inside a lambda or a comprehension"
            if isinstance(node, cst.IfExp) and child is not node.test:
                return None, "the run is on one branch of a conditional expression"
            if isinstance(node, cst.BooleanOperation) and child is node.right:
                return None, "the run happens only when `and`/`or` gets to it"
            if isinstance(node, (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign,
                                 cst.Return)):
                return node, None
            if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                what = _HEADERS.get(type(node), f"`{type(node).__name__}` statement")
                return None, f"the run is in {what}, not a statement of its own"
            child, node = node, self._reader.parent(node)
        return None, "the run is not in a statement"

    # -- feeds --------------------------------------------------------------------------------

    def _verdict(self, key: cst.BaseExpression, quiet: bool = False):
        """"move" for a variable key to load instead; ("by-name", op) for a variable fed by
        its name; None for keys that stay. Any variable stays where the runs it is fed to
        write no variable (`quiet`: an evaluation at fed weights, a schedule at a fed step,
        reads the fed value for that run only, and a load would keep it in the variable for
        the runs after it); one no optimizer updates stays where nothing updates it in
        place."""
        kind = self._reader.kind(key)
        if kind in VARIABLE_KINDS and quiet:
            return None
        if kind == "variable":
            return "move" if self._may_update(key) else None
        if kind in ("frozen", "global_step"):
            updated = self._reader.updated
            if _update_key(key) in updated or (kind == "global_step" and GLOBAL_STEP_UPDATED in updated):
                return "move"
            return None
        op = self._reader.op_name(key)
        if op is not None and op.rsplit("/", 1)[-1] in self._facts["names"]:
            return ("by-name", op)
        return None

    def _may_update(self, key: cst.BaseExpression) -> bool:
        """Whether something the program runs (`_updates_in_reach`) may write the variable
        `key`: an assign to it, or an optimizer update of every trainable variable or of a
        `var_list` naming it. Where none does, no run writes it and feeding it works."""
        name = _update_key(key)
        if self._trains is None:
            self._trains = _updates_in_reach(self.project)
        return None in self._trains or name in self._trains

    def _error(self, key: cst.BaseExpression) -> str:
        """What TF says when the run feeds the variable `key` while it updates it."""
        return _ERRORS_OF_KIND.get(self._reader.kind(key), _FLOAT_REF_ERROR)

    def _fetched_and_fed(self, run: _Run, literal: cst.Dict) -> list[cst.DictElement]:
        """The entries of a run's feed that are all it fetches, each a variable, or with
        no fetches (`[]`) every variable it feeds: the run stores nothing
        (`session.run(step, feed_dict={step: 5})` returns 5 and leaves `step` as it was),
        so the author's meaning, to set them, needs a load."""
        fetches = run.fetches
        if fetches is None:
            return []
        wanted = [e.value for e in fetches.elements] if isinstance(
            fetches, (cst.List, cst.Tuple)) else [fetches]
        by_key = {self.code(e.key): e for e in literal.elements
                  if isinstance(e, cst.DictElement)}
        found = [by_key.get(self.code(fetch)) for fetch in wanted]
        if None in found or any(self._reader.kind(e.key) not in VARIABLE_KINDS for e in found):
            return []
        if not found:  # `run([], feed_dict=...)`: the feed is all the run does
            found = [e for e in by_key.values() if self._reader.kind(e.key) in VARIABLE_KINDS]
        return list(dict.fromkeys(found))

    def _entries(self, run: _Run, literal: cst.Dict, quiet: bool,
                 inline: bool = True) -> list[cst.DictElement]:
        """The entries of a dict literal to move; variables fed by name are reported. In a
        run's own feed (`inline`), those that are all the run fetches are moved whatever
        they are (the run stores nothing, `_fetched_and_fed`). `quiet`: the runs the dict
        is fed to write no variable."""
        unstored = self._fetched_and_fed(run, literal) if inline else []
        if unstored:
            self._not_stored.update(unstored)
            return [e for e in unstored if not self.suppressed(e)]
        moves = []
        for element in literal.elements:
            if not isinstance(element, cst.DictElement):
                continue
            verdict = self._verdict(element.key, quiet)
            if verdict == "move":
                if not self.suppressed(element):
                    moves.append(element)
            elif isinstance(verdict, tuple):
                self.report(element.key,
                            f"`{self.code(element.key)}` feeds variable {verdict[1]} by name "
                            f"to {run.label}; {_FLOAT_REF_ERROR}; not fixed: a name or a "
                            f"tensor has no `load`; {_LOAD_HELP}")
        return moves

    def _inline(self, run: _Run) -> None:
        literal = cst.ensure_type(run.feed, cst.Dict)
        moves = self._entries(run, literal, self._reader.updates_nothing(run.fetches))
        if not moves:
            return
        problem = (run.problem or self._order_problem(run, moves)
                   or self._spread_problem(literal, moves) or self._lambda_problem(run, moves))
        emptied = all(e in moves for e in literal.elements)
        self._report(moves, problem, [run], None if problem else
                     self._fix(moves, [run], run.feed_arg if emptied else None))

    def _runtime(self, run: _Run) -> None:
        if self.suppressed(run.feed):
            return
        self.report(run.feed,
                    f"`{self.code(run.feed)}` feeds variables taken from a collection to "
                    f"{run.label}; {_VARIABLES_ERROR}; not fixed: which variables it feeds "
                    f"is known only at run time; {_LOAD_HELP}")

    def _named(self, assignments: frozenset, runs: list[_Run]) -> None:
        """A feed dict built earlier (`fd = {...}; sess.run(op, feed_dict=fd)`)."""
        reader = self._reader
        name = cst.ensure_type(runs[0].feed, cst.Name).value
        values = [reader.bound_value(a) for a in assignments]
        if any(isinstance(v, cst.BaseExpression) and reader.runtime_collection(v) for v in values):
            for run in runs:
                self._runtime(run)
            return
        quiet = all(reader.updates_nothing(run.fetches) for run in runs)
        moves = [e for v in values if isinstance(v, cst.Dict)
                 for e in self._entries(runs[0], v, quiet, inline=False)]
        feeds = {run.feed for run in runs}
        others = [access.node for a in assignments for access in a.references
                  if access.node not in feeds]
        for node in others:  # fd[emb] = v, fd.update({emb: v}): a variable put in later
            for key in self._put_keys(node):
                if self._verdict(key, quiet) == "move" and not self.suppressed(key):
                    line = self.position(key)[0]
                    self.report(key, f"variable `{self.code(key)}` is put into `{name}` "
                                     f"(line {line}), which is fed to {self._runs_text(runs)}; "
                                     f"{self._error(key)}; not fixed: the dict is changed "
                                     f"after it is built; {_LOAD_HELP}")
        if not moves:
            return
        if len(assignments) != 1:
            problem = f"`{name}` is assigned in more than one place"
        elif others:
            problem = (f"`{name}` is also changed or used elsewhere (line "
                       f"{self.position(others[0])[0]})")
        else:
            problem = self._build_problem(next(iter(assignments)), name, runs, moves)
        self._report(moves, problem, runs, None if problem else self._fix(moves, runs))

    def _put_keys(self, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """Keys a use of a dict's name stores: `fd[k] = v`, `fd.update({k: v})`,
        `fd.setdefault(k, v)`."""
        parent = self._reader.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and isinstance(
                self._reader.parent(parent), cst.AssignTarget):
            index = parent.slice[0].slice
            return [index.value] if isinstance(index, cst.Index) else []
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = self._reader.parent(parent)
            if isinstance(call, cst.Call) and call.args:
                if parent.attr.value == "update" and isinstance(call.args[0].value, cst.Dict):
                    return [e.key for e in call.args[0].value.elements
                            if isinstance(e, cst.DictElement)]
                if parent.attr.value == "setdefault":
                    return [call.args[0].value]
        return []

    def _build_problem(self, assignment, name: str, runs: list[_Run],
                       moves: list[cst.DictElement]) -> str | None:
        """Why the loads cannot go before the runs of a dict built earlier, if they cannot."""
        reader = self._reader
        target = reader.parent(assignment.node)
        assign = reader.parent(target)
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return f"`{name}` is assigned together with other names"
        built = self.position(assign)
        block = reader.parent(reader.parent(assign))
        for run in runs:
            if run.problem:
                return run.problem
            line = self.position(run.call)[0]
            if reader.scope(run.feed) is not assignment.scope:
                return f"`{name}` is built in another function or class (line {built[0]})"
            if self.position(run.small) < built:
                return f"`{name}` is built after the run at line {line}"
            if block not in self._ancestors(run.small):
                return (f"`{name}` is built inside a block (line {built[0]}) that the run at "
                        f"line {line} is not in")
        problem = self._lambda_problem(runs[0], moves) if any(r.monitored for r in runs) else None
        if problem:
            return problem
        for element in moves:
            if _has_effects(element.value):
                return (f"its value `{self.code(element.value)}` is computed where `{name}` is "
                        f"built (line {built[0]}), not at the run")
            for node in descendants(element.key, cst.Name) + descendants(element.value, cst.Name):
                parent = reader.parent(node)
                if isinstance(parent, cst.Attribute) and parent.attr is node:
                    continue
                for other in reader.bindings(node) or []:
                    if (isinstance(other, Assignment) and not isinstance(other, ImportAssignment)
                            and other.node is not None and self.position(other.node) > built):
                        return (f"`{node.value}` is assigned again at line "
                                f"{self.position(other.node)[0]}, after `{name}` is built")
        return None

    def _order_problem(self, run: _Run, moves: list[cst.DictElement]) -> str | None:
        """A moved value that calls something would now run before the calls that come
        before it in the statement."""
        moved_calls = {c for e in moves for c in descendants(e, cst.Call)}
        for element in moves:
            if not _has_effects(element.value):
                continue
            start = self.position(element)
            ancestors = set(self._ancestors(element))
            for call in descendants(run.small, cst.Call):
                if call in ancestors or call in moved_calls or self.position(call) >= start:
                    continue
                return (f"its value `{self.code(element.value)}` would be computed before "
                        f"`{self.code(call)}`, which comes first in the statement")
        return None

    def _spread_problem(self, literal: cst.Dict, moves: list[cst.DictElement]) -> str | None:
        first = literal.elements.index(moves[0])
        for element in literal.elements[first:]:
            if isinstance(element, cst.StarredDictElement):
                return f"`**{self.code(element.value)}` after it may feed it again"
        return None

    def _lambda_problem(self, run: _Run, moves: list[cst.DictElement]) -> str | None:
        if not run.monitored:
            return None
        for element in moves:
            names = descendants(element.key, cst.Name) + descendants(element.value, cst.Name)
            if any(n.value == "step_context" for n in names):
                return "it uses the name `step_context`, which the run_step_fn load needs"
            if descendants(element.value, cst.NamedExpr):
                return "its value binds a name (`:=`), which it would do inside a lambda"
        return None

    # -- findings and edits -------------------------------------------------------------------

    def _runs_text(self, runs: list[_Run], where: bool = True) -> str:
        """`sess.run`, with the lines of the runs when the finding is not at one."""
        if not where:
            return runs[0].label
        lines = ", ".join(str(self.position(r.call)[0]) for r in runs)
        return f"{runs[0].label} (line{'s' if len(runs) > 1 else ''} {lines})"

    def _load(self, run: _Run, element: cst.DictElement) -> str:
        key, value = self.code(element.key), self.code(element.value)
        if not isinstance(element.key, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            key = f"({key})"
        if run.monitored:
            return (f"{run.session}.run_step_fn(lambda step_context: "
                    f"{key}.load({value}, step_context.session))")
        return f"{key}.load({value}, {run.session})" if run.session else f"{key}.load({value})"

    def _report(self, moves: list[cst.DictElement], problem: str | None, runs: list[_Run],
                fix: tuple | None) -> None:
        for element in moves:
            inline = element in runs[0].feed.elements if isinstance(runs[0].feed, cst.Dict) else False
            said = _NOT_STORED if element in self._not_stored else self._error(element.key)
            message = (f"variable `{self.code(element.key)}` is fed to "
                       f"{self._runs_text(runs, not inline)}; {said}")
            if problem:
                message += f"; not fixed: {problem}; {_LOAD_HELP}"
            else:
                message += f"; fix: `{self._load(runs[0], element)}` before the run"
            self.report(element.key, message, fix=fix)

    def _fix(self, moves: list[cst.DictElement], runs: list[_Run],
             feed_arg: cst.Arg | None = None) -> tuple:
        """The edits that move `moves` out of the feed: each entry leaves its dict, its load
        goes before every run. `feed_arg`: a feed argument left empty, which goes too (or
        becomes `None`, where a positional argument follows it)."""
        edits: list = [Remove(element) for element in moves]
        for run in runs:
            edits.append(InsertBefore(run.small, tuple(self._load(run, e) for e in moves)))
        if feed_arg is not None:
            args = list(runs[0].call.args)
            later = args[args.index(feed_arg) + 1:]
            if feed_arg.keyword is None and any(a.keyword is None for a in later):
                edits.append(Replace(feed_arg, _to_none))
            else:
                edits.append(Remove(feed_arg))
        return tuple(edits)


