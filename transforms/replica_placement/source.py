"""The source surface of `replica-placement`: the libcst codemod (see the
package docstring for the bug and the fix)."""

from __future__ import annotations

import dataclasses

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import Assignment, FunctionScope, GlobalScope, ScopeProvider

from graphfix.source.codemod import (
    HOLE,
    Example,
    SourceCodemod,
    argument,
    device_argument,
    device_template,
    outside_global_variables,
)
from graphfix.source.fixes import Replace, WrapInWith
from graphfix.source.scopes import (
    bound_name,
    descendants,
    enclosing,
    enclosing_function,
    inside,
    single_value,
    with_items_around,
)
from graphfix.source.vocabulary import (
    ARG_SCOPE,
    COLLECTION_GETTERS,
    CREATES_VARIABLES,
    DEVICE_CALLS,
    GLOBAL_STEP_MAKERS,
    INITIALIZER_CALLS,
    LAYER_CALLS,
    LOCAL_VARIABLE_MAKERS,
    REPLICA_DEVICE_SETTER,
    VARIABLE_COLLECTIONS_AT,
    VARIABLE_LISTS,
)

# -- Source surface -------------------------------------------------------------------------
#
# Where a call's ops land is read off the syntax tree: the innermost `with device(...)` that
# decides (a string naming a job, or anything else), in the same function or, through the
# file's own calls of that function, at its callers. Nothing here imports TensorFlow.

_CLUSTER_SPEC = "train.ClusterSpec"
_SERVERS = frozenset({"train.Server", "distribute.Server"})
_SYNC_REPLICAS = "train.SyncReplicasOptimizer"
# TF calls that create no op a worker should run: scopes, collections, sessions, cluster
# objects, initializer and optimizer objects, NoOps (`tf.group`), and the state updates
# (`tf.assign`) that the placer keeps with their variable whatever their device says.
_NO_OPS = frozenset({
    *DEVICE_CALLS, "name_scope", "variable_scope", "get_variable_scope",
    "control_dependencies", "colocate_with", ARG_SCOPE, *COLLECTION_GETTERS,
    "add_to_collection", "add_to_collections",
    *(name for name in VARIABLE_LISTS if not name.startswith("slim.")),
    "get_default_graph", "Graph", "reset_default_graph", "set_random_seed", "random.set_seed", "Session",
    "InteractiveSession", "ConfigProto", "GPUOptions", "RunOptions", "RunMetadata",
    "TensorShape", "Dimension", "as_dtype", "DType", _CLUSTER_SPEC, *_SERVERS,
    REPLICA_DEVICE_SETTER,
    "train.MonitoredTrainingSession", "train.Supervisor", "train.Coordinator",
    "train.Scaffold", "train.Saver", "train.start_queue_runners", "train.ChiefSessionCreator",
    "train.WorkerSessionCreator", "train.SessionManager", "summary.FileWriter",
    "group", "no_op", *INITIALIZER_CALLS, "tables_initializer", "assign", "assign_add", "assign_sub", "scatter_update",
    "scatter_add", "scatter_sub", "scatter_nd_update", "scatter_nd_add", "scatter_nd_sub",
})
_NO_OP_PREFIXES = ("logging.", "app.", "flags.", "gfile.", "io.gfile.", "errors.",
                   "estimator.", "distribute.", "initializers.", "keras.initializers.",
                   "sysconfig.", "test.", "config.",
                   "python.")  # TF's internal modules: not judged
_NO_OP_SUFFIXES = ("_initializer", "Initializer", "Optimizer", "Hook", "regularizer")
# State the workers share through the ps on purpose (a queue with a `shared_name`): the
# setter would move it to each worker, so a ps scope holding one is not rewritten.
_SHARED_STATE = frozenset(
    {f"{prefix}{name}" for prefix in ("", "queue.", "io.", "data_flow_ops.") for name in (
        "FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue", "QueueBase",
        "ConditionalAccumulator", "SparseConditionalAccumulator", "Barrier")}
)
# Sessions that run the graph in this process unless given a target (their parameter, and
# where it is positional): `tf.Session()` beside a Server still runs on no cluster.
_LOCAL_SESSIONS = {"Session": ("target", 0), "InteractiveSession": ("target", 0),
                   "train.MonitoredTrainingSession": ("master", 0),
                   "train.MonitoredSession": ("session_creator", 0)}
# What opens sessions in ways not read here (a master given later, by a session creator, by
# an estimator): a file using one may run its graph on the cluster.
_OTHER_SESSIONS = frozenset({"train.Supervisor", "train.SessionManager",
                             "train.ChiefSessionCreator", "train.WorkerSessionCreator"})
_GRADIENT_METHODS = frozenset({"minimize", "compute_gradients"})  # opt.minimize(loss)
# The step makers that return the graph's global step where it exists (making nothing then);
# `create_global_step` raises instead.
_GETS_EXISTING_STEP = frozenset({"train.get_or_create_global_step",
                                 "slim.get_or_create_global_step"})
# What may leave a statement unrun while the code after it runs: a branch, a loop's body, a
# `try`'s, a conditional or short-circuit expression, a function not called in place.
_CONDITIONAL = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.Match, cst.IfExp,
                cst.BooleanOperation, cst.Lambda, cst.CompFor, cst.ClassDef)
_LINE = 99  # longest line the fix writes before it breaks the setter's arguments


@dataclasses.dataclass(frozen=True, eq=False)
class _JobScope:
    """A `with` item whose device string names a job: `tf.device('/job:ps/task:0')`."""

    item: cst.WithItem
    call: cst.Call  # the `device(...)` call
    job: str
    task: str | None  # "0", or with HOLE for a runtime index; None if not named
    rest: str  # what it names besides job and task: "/cpu:0", or ""


@dataclasses.dataclass(frozen=True)
class _Path:
    """Where ops created at one place land, along one chain of callers.

    kind: `ps` (a string scope naming the ps job), `job` (one naming another job: a worker),
    `none` (no device scope at all), `setter` (`replica_device_setter`: `setter` is its
    call, `item` the `with` item), `other` (another device function, slim's
    `variables_device()`, `colocate_with`, or callers we cannot see)."""

    kind: str
    scope: _JobScope | None = None
    setter: cst.Call | None = None
    item: cst.WithItem | None = None


@dataclasses.dataclass
class _Cluster:
    """A cluster definition with a ps job."""

    node: cst.CSTNode = dataclasses.field(repr=False)  # the ClusterSpec call, or the dict
    name: cst.Name | None  # the name the program binds it to, if any
    ps_tasks: int | None  # the number of ps addresses, when the literal says
    jobs: tuple[str, ...]


class _Names(cst.CSTVisitor):
    """The variable names an expression reads (not attribute or keyword names)."""

    def __init__(self):
        super().__init__()
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _parse_job_device(template: str) -> tuple[str, str | None, str] | None:
    """(job, task, the rest) of a device template that names a job; None if it names none.
    A job chosen at run time gives job HOLE."""
    job, task, rest = None, None, []
    for part in template.split("/"):
        if not part:
            continue
        head, _, value = part.partition(":")
        if head == "job":
            job = value
        elif head == "task":
            task = value
        elif head != "replica":
            rest.append(part)
    if job is None:
        return None
    return job, task, "".join(f"/{p}" for p in rest)


def _string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


class ReplicaPlacementCodemod(SourceCodemod):
    """Place variables on the parameter servers and every other op on the worker, by
    `replica_device_setter`, where a distributed program places them by hand.

    Found (warnings, at the call):

    - an op created under a device string naming the ps job (`tf.device('/job:ps/task:0')`,
      a `%`/`+`/`.format`/f-string one too, or a name one plain assignment binds to such a
      string, or an element at a literal index of a tuple or list so bound:
      `tf.device(devices[0])`), directly or in a function of the file called there: a TF
      op call (`tf.add`, `tf.matmul`, a layer's compute, `tf.placeholder`) or
      `opt.minimize`/`opt.compute_gradients`. Not counted: what creates no op a worker should
      run (scopes, initializer and optimizer objects, `tf.group`, the global initializer),
      the state updates `tf.assign*`/`tf.scatter_*` (the placer keeps them with their
      variable), and a variable's own initial value, inline or in a name read only by
      variables (`initial = tf.truncated_normal(shape)`, `tf.Variable(initial)`): it runs
      once, at initialisation, never per step;
    - a variable created with no ps placement (no device scope at all, or a string naming
      another job: `tf.device('/job:worker/task:%d' % i)`) in code that runs with a cluster
      that has a `ps` job: `tf.train.ClusterSpec({... 'ps': [...]})`, or a dict with a
      `'ps'` key given to `ClusterSpec` or `Server`. Each worker then trains its own copy.
      The project model says which code runs with it (`FileView.cluster_reaching`): the
      function that makes it, the ones that call that one, and what they call, here or
      in a module the file imports;
    - the global step made under no device scope, or under one naming no job (`'/gpu:0'`,
      `DeviceSpec(device_type='GPU', device_index=i)`, a helper of the project returning
      such a device), beside a `replica_device_setter` scope of its own function (or
      module) that reads it (`minimize(loss, global_step=step)`; a step maker, or a
      variable given as `global_step`), or beside one sending variables to the ps job
      while the function gives the step to an optimizer outside it, whatever calls the
      function and wherever the cluster is made: the setter never sees it, so each worker
      keeps its own, and `SyncReplicasOptimizer` builds its token queue on the step's
      device;
    - a worker's own variable (outside GLOBAL_VARIABLES: `tf.get_local_variable`,
      `collections=[tf.GraphKeys.LOCAL_VARIABLES]` or a private collection) made under
      `replica_device_setter`, which places by op type, not by collection: it lands on a
      ps task, and every worker shares it (ADAG's local copies and local step).

    Left alone: code under a device function (`replica_device_setter`, slim's
    `deploy_config.variables_device()`, a chooser function, a lambda), `colocate_with`,
    slim variables under `arg_scope(..., device=...)` or given `device=`; variables the
    hand-written ps scopes already hold, with no op beside them (the seed as written);
    a global step in a branch of an `if` that never runs with the setter (a standalone
    trainer's, beside the `else:` or after the `return` of its branch, that joins the
    cluster); a `get_or_create_global_step()` run after one the setter placed, in the same
    function (it returns that step and makes nothing); functions no code of the file calls
    (a `model_fn` handed to slim's `create_clones`) unless they make the cluster, or call what makes it, themselves (a `main`); code no
    cluster's program holds (a local evaluation graph beside the training function);
    variables made with a cluster this file makes when every session the file opens runs
    in-process (`tf.Session()` with no target, no Supervisor, no `server.target` read: a
    template's ClusterSpec the graph never runs on); variables of module-level code that
    opens a session before module-level code makes the cluster (a notebook of separate
    programs: a client cell to another cluster, then a cell starting a ps job; that
    session may have no ps, and TF would refuse it the variable the fix sends there);
    variables outside GLOBAL_VARIABLES
    (`tf.get_local_variable`, `collections=[tf.GraphKeys.LOCAL_VARIABLES]` or a private
    collection) under no setter: the worker's own on purpose; a variable made under a
    worker's scope whose task is given at run time and named after that task, by its name or
    its variable scope's, in the same function (`tf.Variable(..., name='worker_%s_users' %
    worker_n)` under `tf.device('/job:worker/task:%s' % worker_n)`): each worker makes one
    of another name, which no other worker would share on the ps either (a worker's
    partition of the data).

    Fixed, with `tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(...))`
    spelled through the file's own imports (TF2's `tf.device` takes no device function):

    - a ps scope with ops in it becomes the setter; the variables stay on the ps, the ops
      go to the worker (seed 003, in `build(cluster_spec, task_index)`)::

          with tf.device('/job:ps/task:0'):
              c = tf.get_variable('myc', shape=[], initializer=init)
              res = tf.add(c, 1)
          ->
          with tf.device(tf.train.replica_device_setter(
                  worker_device='/job:worker/task:%d' % task_index, cluster=cluster_spec)):
              c = tf.get_variable('myc', shape=[], initializer=init)
              res = tf.add(c, 1)

    - a worker scope over variables becomes the setter with that worker as its
      `worker_device`: the compute stays where it was, the variables go to the ps;
    - variables under no scope: the statements from the first to the last of them, in the
      innermost block holding them all, move into a setter scope;
    - the global step beside the setter: its statement moves to the top of the setter's
      scope, when that scope comes later in the same block with the setter as its one
      item and no statement between reads the step (one device chooser: its round-robin
      counts the step first); else it is wrapped in the same setter, spelled as the scope
      spells it (reported, not fixed, where that reads a name bound only later); made
      first in a device scope naming no job, it moves out of that scope into the setter,
      just before it (nested in it, the setter's ps task would keep the scope's GPU, which
      the ps may not have; reported, not fixed, where it is not that scope's first
      statement);
    - the worker's own variables under the setter: their adjacent statements (with those
      between that make no variable and call no function of the program) move under
      `tf.compat.v1.device(WORKER)`, WORKER the setter's `worker_device` (else the one the
      Server names); the setter keeps a job an op already names.

    The setter's arguments come from the program: `cluster=` the name the cluster is bound
    to (else `ps_tasks=` the number of ps addresses in the literal, else the number of ps
    tasks the device strings name), `worker_device='/job:worker/task:%d' % EXPR` with EXPR
    the worker `Server(..., task_index=EXPR)` (omitted under a scope that already names the
    worker, or when no Server says), `ps_device=` when the ps strings name a device type.
    The `ps_tasks` parameter is the count when the program does not say it; the other
    parameters are the graph surface's.
    An expression of another function reaches the scope through the parameters the file's
    calls pass it in (`build(cluster_spec, FLAGS.task)` -> `cluster=cluster_spec`).

    Reported but not fixed: ps scopes that choose ps tasks by hand (more
    than one, one chosen at run time, or one other than 0) — one setter spreads the
    variables round-robin from task 0, which may move a variable to another task; a ps
    scope that also holds a queue or accumulator (state the workers share on the ps: the
    setter would give each worker its own) or names a device chosen at run time;
    variables under no scope that no single block holds; a scope of which another finding
    is suppressed; no ps task count; no compat.v1 spelling; a setter over the worker's own
    variables too (they would move to the ps, shared by every worker); a worker's own
    variable under the setter whose worker device cannot be spelled where it is made, or
    made by a function also called under other scopes.

    Findings and fixes honour `# graphfix: ignore[replica-placement]` on the line, on an
    enclosing statement or on the `with` line of the scope. Not seen: device strings held in
    variables, methods (`self.build()`), the device scopes of other files (a function
    called from another module is not judged), `with g.device(...)`.
    """

    DESCRIPTION = "Place variables on ps tasks and all else on the worker (replica_device_setter)."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["worker0:2222"]})
        with tf.device(tf.train.replica_device_setter(cluster=cluster)):
            w = tf.get_variable("w", [4, 2])
            y = tf.matmul(tf.ones([1, 4]), w)
        """,
        """\
        import tensorflow.compat.v1 as tf

        with tf.device("/job:worker/task:0"):
            w = tf.get_variable("w", [4, 2])
            y = tf.matmul(tf.ones([1, 4]), w)
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf

            cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["worker0:2222"]})
            with tf.device("/job:worker/task:0"):
                w = tf.get_variable("w", [4, 2])
                y = tf.matmul(tf.ones([1, 4]), w)
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf

            cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["worker0:2222"]})
            with tf.device(tf.train.replica_device_setter(
                    worker_device="/job:worker/task:0", cluster=cluster)):
                w = tf.get_variable("w", [4, 2])
                y = tf.matmul(tf.ones([1, 4]), w)
            """,
            says='each worker trains its own copy'),
        Example(
            """\
            import tensorflow.compat.v1 as tf

            cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["worker0:2222"]})
            with tf.device("/job:ps/task:0"):
                w = tf.get_variable("w", [4, 2])
                y = tf.matmul(tf.ones([1, 4]), w)
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf

            cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["worker0:2222"]})
            with tf.device(tf.train.replica_device_setter(cluster=cluster)):
                w = tf.get_variable("w", [4, 2])
                y = tf.matmul(tf.ones([1, 4]), w)
            """,
            says='runs on the parameter server'),
    )
    METADATA_DEPENDENCIES = (*SourceCodemod.METADATA_DEPENDENCIES, ScopeProvider)

    # -- the module: what the program says, then what to report and rewrite ------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._calls = self.nodes(cst.Call)
        self._quote = self._quote_of()
        self._job_scopes: dict[cst.Call, _JobScope | str] = {}
        self._shared: dict[_JobScope, cst.Call] = {}  # a ps scope's first shared queue
        self._cluster = self._find_cluster()
        self._clusters_at: dict[cst.Call, tuple[str, int, int | None] | None] = {}
        self._worker_job, self._worker_task = self._find_worker()
        self._in_process = self._runs_in_process()
        self._opens_setter = any(self.tf_canonical(c.func) == REPLICA_DEVICE_SETTER
                                 for c in self._calls)
        ps_ops, unplaced, shared_locals, steps_beside = self._survey()
        self._plan_ps_scopes(ps_ops)
        self._plan_unplaced(unplaced)
        self._plan_shared_locals(shared_locals)
        self._plan_steps_beside_setter(steps_beside)
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))

    def _quote_of(self) -> str:
        """The quote the file's device strings use (else its first string argument's)."""
        strings = [(self.tf_canonical(c.func) in DEVICE_CALLS, a.value) for c in self._calls
                   for a in c.args if isinstance(a.value, cst.SimpleString)]
        for _, string in sorted(strings, key=lambda pair: not pair[0]):
            return string.quote[0]
        return '"'

    def _survey(self):
        """The op calls on the ps ({ps scope: [(call, scopes)]}), the variables with no ps
        placement ([(call, paths)]), the worker's own variables made under the setter
        ([(call, paths)]) and the global steps made beside a setter scope of their function
        ([(call, the setter's path, the device scope naming no job around it)]:
        `_setter_beside_step`)."""
        ps_ops: dict[_JobScope, list[tuple[cst.Call, list[_JobScope]]]] = {}
        unplaced: list[tuple[cst.Call, list[_Path]]] = []
        shared_locals: list[tuple[cst.Call, list[_Path]]] = []
        steps_beside: list[tuple[cst.Call, _Path, cst.WithItem | None]] = []
        # Variables a worker keeps (`outside_global_variables`): a setter over them would send
        # them to the ps, where every worker would share them.
        self._worker_locals: list[tuple[cst.Call, list[_Path]]] = []
        statements_seen: set[cst.CSTNode] = set()
        for call in self._calls:
            name = self.tf_canonical(call.func)
            if self._in_variable_arguments(call) or self._initial_value_only(call):
                continue  # an initial value: it runs once, when its variable is initialized
            existing = name in _GETS_EXISTING_STEP and self._step_made_first(call)
            beside = (self._setter_beside_step(call, name) if name in CREATES_VARIABLES
                      and not existing and not outside_global_variables(call, name) else None)
            if beside is not None:
                steps_beside.append((call, *beside))
            elif name in CREATES_VARIABLES and not existing and self._shares_variables(call):
                slim = name.startswith(("slim.", "contrib.layers."))
                if not (slim and argument(call, "device", None) is not None):
                    step = name in GLOBAL_STEP_MAKERS
                    paths = self._paths(call, "step" if step else "slim" if slim else "variable")
                    kinds = {p.kind for p in paths}
                    if outside_global_variables(call, name):
                        self._worker_locals.append((call, paths))
                        if "setter" in kinds and self._names_worker_collection(call, name):
                            shared_locals.append((call, paths))
                    elif kinds <= {"none", "job"} and not self._named_per_task(call, name, paths):
                        unplaced.append((call, paths))
                    elif step and kinds & {"none", "job"}:
                        # The global step is what every worker must share (the optimizer
                        # counts on it, hooks stop at it): one chain of callers making it
                        # off the ps is enough to give that worker its own count, even where
                        # the other chains (a shared net built under the setter) are fine.
                        unplaced.append((call, [p for p in paths if p.kind in ("none", "job")]))
            if name in _SHARED_STATE:
                for path in self._paths(call, "op"):
                    if path.kind == "ps":
                        self._shared.setdefault(path.scope, call)
                continue
            if not self._creates_op(call, name):
                continue
            statement = enclosing(call, self.parent, cst.BaseStatement) or call
            if statement in statements_seen:
                continue  # one finding per statement: its outermost op
            scopes = list(dict.fromkeys(p.scope for p in self._paths(call, "op")
                                        if p.kind == "ps"))
            if scopes:
                statements_seen.add(statement)
                for scope in scopes:
                    ps_ops.setdefault(scope, []).append((call, scopes))
        return ps_ops, unplaced, shared_locals, steps_beside

    def _named_per_task(self, call: cst.Call, name: str, paths: list[_Path]) -> bool:
        """Whether the variable made at `call` is its worker's own on purpose: made, in the
        same function, under a worker's device scope whose task is given at run time
        (`'/job:worker/task:%s' % worker_n`) and named after that task (`name='worker_%s_
        user_embeddings' % worker_n`, or in `tf.variable_scope('worker_%d' % worker_n)`).
        Each worker makes a variable of another name, which no other worker would share on
        the ps either: a worker's partition of the data (wuzl/WarpMF's user embeddings), not
        a copy of a shared model."""
        scopes = {p.scope for p in paths}
        scope = scopes.pop() if len(scopes) == 1 and {p.kind for p in paths} == {"job"} else None
        if (scope is None or HOLE not in (scope.task or "") or enclosing_function(
                call, self.parent) is not enclosing_function(scope.item, self.parent)):
            return False
        named = [argument(call, "name", 0 if name.endswith("get_variable") else None)]
        for around in with_items_around(call, self.parent):
            if not isinstance(around, cst.WithItem):
                break
            if isinstance(around.item, cst.Call) and (self.tf_canonical(around.item.func) or ""
                                                      ).endswith(("variable_scope", "name_scope")):
                named.append(argument(around.item, "name_or_scope", 0)
                             or argument(around.item, "name", None))
        task = self._reads(device_argument(scope.call))
        return any(given is not None and task & self._reads(given) for given in named)

    def _reads(self, expr: cst.BaseExpression | None) -> set[str]:
        """The names and dotted names `expr` reads as values (`worker_n`, `FLAGS.task_index`),
        not the functions it calls, keywords, nor the parts of a longer dotted name."""
        found: set[str] = set()
        for node in [] if expr is None else descendants(expr, cst.Name, cst.Attribute):
            up = self.parent(node)
            if not (isinstance(up, cst.Attribute) or isinstance(up, cst.Call) and up.func is node
                    or isinstance(up, cst.Arg) and up.keyword is node):
                found.add(get_full_name_for_node(node) or "")
        return found - {""}

    def _cluster_of(self, call: cst.Call) -> tuple[str, int, int | None] | None:
        """The cluster with a ps job that the code making `call` runs with, as the project
        model says (`FileView.cluster_reaching`: made in its function, in one calling it,
        or in another module along imports and calls); None: no cluster's program holds it
        (a local evaluation graph beside the training function)."""
        if call not in self._clusters_at:
            self._clusters_at[call] = self.project.cluster_reaching(self.position(call)[0])
        return self._clusters_at[call]

    def _shares_variables(self, call: cst.Call) -> bool:
        """Whether the variables made at `call` live on a cluster whose workers share what
        the ps holds: a cluster with a ps job reaches the code, and the graph is not run in
        this process alone (`_runs_in_process`, for a cluster this file makes)."""
        cluster = self._cluster_of(call)
        return cluster is not None and not (self._in_process
                                            and cluster[0] == self.project.label
                                            ) and not self._run_before_cluster(call, cluster)

    def _run_before_cluster(self, call: cst.Call, cluster: tuple[str, int, int | None]
                            ) -> bool:
        """Whether module-level code runs the graph holding `call`'s variables in a
        session it opens before module-level code of this file makes the cluster: a
        notebook of separate programs (a client cell, then the cell of a ps/worker
        cluster), a script that checks its model before it starts its server. That
        session's cluster is not this one: it may have no ps job, and a fix sending the
        variables there would make a graph it places one it refuses."""
        path, made_at, _ = cluster
        if path != self.project.label or not self._at_module_level(call):
            return False
        cluster_statement = next((s for s in self._tree.body if self.code_range(s).start.line
                                  <= made_at <= self.code_range(s).end.line), None)
        if cluster_statement is None or isinstance(
                cluster_statement, (cst.FunctionDef, cst.ClassDef)):
            return False  # made in a function: whoever calls it decides when
        made_here = self.position(call)[0]
        return any(made_here < self.position(session)[0] < made_at
                   and self._at_module_level(session) for session in self._calls
                   if self.tf_canonical(session.func) in _LOCAL_SESSIONS)

    def _at_module_level(self, node: cst.CSTNode) -> bool:
        """Whether `node` is in the module's own code, in no function or class."""
        return enclosing(node, self.parent, cst.FunctionDef, cst.ClassDef, cst.Lambda) is None

    def _runs_in_process(self) -> bool:
        """Whether every session this file opens runs the graph in this process: there is
        one, each a `tf.Session()` (or `MonitoredTrainingSession`) given no target, and
        nothing else here opens one (a Supervisor, a session creator, an estimator) or
        reads a server's `target`. A ClusterSpec such a program makes (a course template's
        boilerplate, a flag choosing it) shares no variable among workers."""
        local = False
        for call in self._calls:
            name = self.tf_canonical(call.func)
            if name in _LOCAL_SESSIONS:
                given = argument(call, *_LOCAL_SESSIONS[name])
                if (given is not None and _string_value(given) != "") or any(
                        arg.star for arg in call.args):
                    return False
                local = True
            elif name in _OTHER_SESSIONS or (name or "").startswith("estimator."):
                return False
        return local and not any(node.attr.value == "target"
                                 for node in self.nodes(cst.Attribute))

    def _names_worker_collection(self, call: cst.Call, name: str) -> bool:
        """Whether a variable outside GLOBAL_VARIABLES says whose it is: a local variable, or
        collections it names (`collections=[]`, preloaded data in no collection, may be
        meant for the ps)."""
        given = argument(call, "collections", VARIABLE_COLLECTIONS_AT.get(name))
        return name in LOCAL_VARIABLE_MAKERS or bool(getattr(given, "elements", ()))

    def _creates_op(self, call: cst.Call, name: str | None) -> bool:
        if name is None:
            return (isinstance(call.func, cst.Attribute)
                    and call.func.attr.value in _GRADIENT_METHODS
                    and self.tf_qualified(call.func.value) is None)
        if name in CREATES_VARIABLES:
            return name in LAYER_CALLS  # a layer computes too
        return not (name in _NO_OPS or name.startswith(_NO_OP_PREFIXES)
                    or name.endswith(_NO_OP_SUFFIXES) or ".initializers." in name)

    def _in_variable_arguments(self, node: cst.CSTNode) -> bool:
        current = self.parent(node)
        while current is not None and not isinstance(current, (cst.BaseStatement, cst.Lambda)):
            if isinstance(current, cst.Call):
                name = self.tf_canonical(current.func)
                if name in CREATES_VARIABLES and name not in LAYER_CALLS:
                    return True
            current = self.parent(current)
        return False

    def _reads_of_value(self, value: cst.CSTNode) -> list[cst.CSTNode] | None:
        """Where the name `value` is bound to (`name = value`) is read; None where it is bound
        to no name of a scope."""
        target = bound_name(value, self.parent)
        scope = None if target is None else self.get_metadata(ScopeProvider, target, None)
        if scope is None:
            return None
        return [access.node for assignment in scope.assignments[target.value]
                if getattr(assignment, "node", None) is target
                for access in assignment.references]

    def _initial_value_only(self, node: cst.CSTNode, depth: int = 0) -> bool:
        """Whether `node` is in the value of a name read only in variables' arguments
        (`initial = tf.truncated_normal(shape)`, then `tf.Variable(initial)`), directly or
        through other such names (`scaled = initial * 2`): an initial value computed in a
        statement of its own, which runs once, at initialisation, never per step."""
        current = self.parent(node)
        while not isinstance(current, cst.Assign):
            if current is None or isinstance(current, (cst.BaseStatement, cst.Lambda)):
                return False
            current = self.parent(current)
        if depth > 4 or not (
                node is current.value or inside(node, current.value, self.parent)):
            return False
        reads = self._reads_of_value(current.value)
        return bool(reads) and all(self._in_variable_arguments(read)
                                   or self._initial_value_only(read, depth + 1)
                                   for read in reads)

    # -- the cluster and this worker ----------------------------------------------------------

    def _find_cluster(self) -> _Cluster | None:
        """The first cluster definition with a ps job: what ClusterSpec or Server is given."""
        for call in self._calls:
            name = self.tf_canonical(call.func)
            if name == _CLUSTER_SPEC:
                given = argument(call, "cluster", 0)
            elif name in _SERVERS:
                given = argument(call, "server_or_cluster_def", 0)
            else:
                continue
            found = self._cluster_dict(given)
            if found is None:
                continue
            literal, bound = found
            ps, jobs = None, []
            for element in literal.elements:
                if not isinstance(element, cst.DictElement):
                    continue
                key = _string_value(element.key)
                if key is None:
                    continue
                jobs.append(key)
                if key == "ps":
                    ps = element.value
            if ps is None:
                continue
            tasks = (len(ps.elements) if isinstance(ps, (cst.List, cst.Tuple, cst.Dict))
                     else None)
            if tasks == 0:
                continue
            if name == _CLUSTER_SPEC:
                bound = bound_name(call, self.parent) or bound
            return _Cluster(call if name == _CLUSTER_SPEC else literal, bound, tasks, tuple(jobs))
        return None

    def _cluster_dict(self, expr, depth: int = 0) -> tuple[cst.Dict, cst.Name | None] | None:
        """The dict literal a cluster argument is, or names (with the name bound to it)."""
        if isinstance(expr, cst.Dict):
            return expr, bound_name(expr, self.parent)
        if isinstance(expr, cst.Name) and depth < 3:
            scope = self.get_metadata(ScopeProvider, expr, None)
            value = single_value(expr, scope, self.parent)
            if isinstance(value, cst.Dict):
                return value, bound_name(value, self.parent)
            if isinstance(value, cst.Call) and self.tf_canonical(value.func) == _CLUSTER_SPEC:
                return self._cluster_dict(argument(value, "cluster", 0), depth + 1)
        return None

    def _find_worker(self) -> tuple[str, cst.BaseExpression | None]:
        """(this worker's job, the expression of its task index) from the Server calls."""
        jobs, tasks = set(), {}
        for call in self._calls:
            if self.tf_canonical(call.func) not in _SERVERS:
                continue
            job = _string_value(argument(call, "job_name", 1))
            task = argument(call, "task_index", 2)
            if job == "ps" or task is None:
                continue
            if job is not None:
                jobs.add(job)
            tasks.setdefault(self.code(task), task)
        others = set(self._cluster.jobs) - {"ps"} if self._cluster else set()
        job = (jobs.pop() if len(jobs) == 1 else
               others.pop() if not jobs and len(others) == 1 else "worker")
        return job, (next(iter(tasks.values())) if len(tasks) == 1 else None)

    # -- where ops land ------------------------------------------------------------------------

    def _job_scope(self, call: cst.Call) -> _JobScope | str:
        """A device call's verdict: a `_JobScope`, `partial` (a string naming no job: it
        merges with the scopes outside) or `other` (a function, None, a name)."""
        if call not in self._job_scopes:
            given = self._device_named(device_argument(call))
            template = None if given is None else device_template(given)
            parsed = None if template is None else _parse_job_device(template)
            if template is None:
                verdict = "other"
            elif parsed is None:
                verdict = "partial"
            elif HOLE in parsed[0]:
                verdict = "other"  # a job chosen at run time: not ours to judge
            else:
                verdict = _JobScope(self.parent(call), call, *parsed)
            self._job_scopes[call] = verdict
        return self._job_scopes[call]

    def _device_named(self, expr: cst.BaseExpression | None, depth: int = 0
                      ) -> cst.BaseExpression | None:
        """The device expression `expr` stands for: itself, or where it is a name one plain
        assignment binds (`ps_device = '/job:ps/task:0'`), or an element of a tuple or list
        so bound taken at a literal index (`devices[0]`, `devices = (device0, ...)`), what
        that holds. A parameter, a name bound more than once, a computed index: `expr`."""
        if depth > 3:
            return expr
        if isinstance(expr, cst.Name):
            bound = single_value(expr, self.get_metadata(ScopeProvider, expr, None), self.parent)
            return expr if bound is None else self._device_named(bound, depth + 1)
        if (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name)
                and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
                and isinstance(expr.slice[0].slice.value, cst.Integer)):
            listed = single_value(expr.value, self.get_metadata(ScopeProvider, expr.value, None),
                                  self.parent)
            index = int(expr.slice[0].slice.value.value, 0)
            if (isinstance(listed, (cst.Tuple, cst.List)) and index < len(listed.elements)
                    and not any(isinstance(e, cst.StarredElement) for e in listed.elements)):
                return self._device_named(listed.elements[index].value, depth + 1)
        return expr

    def _verdict(self, item: cst.WithItem, what: str) -> _Path | None:
        """What a `with` item says about ops (`what` is op, variable or slim); None: it does
        not place them, look further out."""
        expr = item.item
        if not isinstance(expr, cst.Call):
            return None
        name = self.tf_canonical(expr.func)
        if name == "slim.arg_scope":
            placed = what == "slim" and argument(expr, "device", None) is not None
            return _Path("other") if placed else None
        if name == "colocate_with":
            return _Path("other")
        if name not in DEVICE_CALLS:
            return None
        scope = self._job_scope(expr)
        if scope == "partial":
            return None
        if scope == "other":
            setter = self._setter_given(device_argument(expr))
            return _Path("other") if setter is None else _Path("setter", setter=setter, item=item)
        return _Path("ps" if scope.job == "ps" else "job", scope)

    def _setter_given(self, given: cst.BaseExpression | None) -> cst.Call | None:
        """The `replica_device_setter(...)` call a device scope is given, directly or
        through a name bound to it once; None for anything else."""
        if isinstance(given, cst.Name):
            given = single_value(given, self.get_metadata(ScopeProvider, given, None),
                                 self.parent)
        if isinstance(given, cst.Call) and self.tf_canonical(given.func) == REPLICA_DEVICE_SETTER:
            return given
        return None

    def _paths(self, node: cst.CSTNode, what: str, seen: tuple = ()) -> list[_Path]:
        """Where ops created at `node` land, one path per chain of callers in this file."""
        for around in with_items_around(node, self.parent):
            if isinstance(around, cst.WithItem):
                verdict = self._verdict(around, what)
                if verdict is not None:
                    return [verdict]
            elif isinstance(around, cst.FunctionDef):
                return self._caller_paths(around, what, seen)
            else:  # a lambda's body, a class
                return [_Path("other")]
        return [_Path("none")]

    def _caller_paths(self, function: cst.FunctionDef, what: str, seen: tuple) -> list[_Path]:
        if function in seen or len(seen) > 8:
            return [_Path("other")]
        calls = self._call_sites(function)
        if calls is None and what == "step":
            calls = self._constructions(function)
        if not calls:  # the program's entry (it makes the cluster: `tf.app.run(main)`), or
            # called from where we cannot see
            return [_Path("none" if self._defines_cluster(function) else "other")]
        return [p for call in calls for p in self._paths(call, what, (*seen, function))]

    def _call_sites(self, function: cst.FunctionDef) -> list[cst.Call] | None:
        """The file's calls of `function`; None if it is also used otherwise (passed on,
        stored, a method) so that we cannot see every caller."""
        if isinstance(self.parent(self.parent(function) or function), cst.ClassDef):
            return None
        return self._calls_of(function)

    def _constructions(self, function: cst.FunctionDef) -> list[cst.Call] | None:
        """The file's calls of the class whose `__init__` `function` is (`Net(...)`); None
        if it is no constructor or the class is also used otherwise (subclassed, passed on).
        Asked for the global step only: where a constructor makes it decides whose it is."""
        klass = self.parent(self.parent(function) or function)
        if function.name.value != "__init__" or not isinstance(klass, cst.ClassDef):
            return None
        return self._calls_of(klass)

    def _calls_of(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.Call] | None:
        """The file's calls of a function or class by its name; None if the name is also
        used otherwise (passed on, stored, subclassed), so that not every caller is seen."""
        scope = self.get_metadata(ScopeProvider, definition, None)
        if scope is None:
            return None
        calls = []
        name = definition.name.value
        for assignment in scope.assignments[name]:
            if getattr(assignment, "node", None) is not definition:
                continue
            for access in assignment.references:
                there = self.get_metadata(ScopeProvider, access.node, None)
                if there is not None and assignment not in set(there[name]):
                    continue  # a local of the same name (`def net(x): net = ...(net)`)
                parent = self.parent(access.node)
                if not (isinstance(parent, cst.Call) and parent.func is access.node):
                    return None
                calls.append(parent)
        return calls

    def _defines_cluster(self, function: cst.FunctionDef) -> bool:
        """Whether `function` makes a cluster, or (a top-level one) gets one made, in this
        file or another module (`FileView.gets_cluster`): an entry of the program."""
        if (isinstance(self.parent(function), cst.Module)
                and self.project.gets_cluster(self.position(function)[0])):
            return True
        for call in self._calls:
            if (self.tf_canonical(call.func) in (_CLUSTER_SPEC, *_SERVERS)
                    and inside(call, function, self.parent)):
                return True
        return False

    # -- spelling the setter -------------------------------------------------------------------

    def _spell_at(self, expr: cst.CSTNode, site: cst.CSTNode, depth: int = 0) -> str | None:
        """How the value of `expr` is spelled at `site`: through the parameter the file's calls
        of the enclosing function pass it in, else as written if its names mean the same
        there; None if neither."""
        function = enclosing_function(site, self.parent)
        if function is not None and depth < 4:
            calls = self._call_sites(function)
            if calls:
                for name, position in self._parameters(function):
                    given = {self.code(a) if a is not None else None
                             for a in (argument(c, name, position) for c in calls)}
                    if None in given or len(given) != 1:
                        continue
                    if self._spell_at(expr, calls[0], depth + 1) == given.pop():
                        return name
        return self.code(expr) if self._visible(expr, site) else None

    def _parameters(self, function: cst.FunctionDef):
        params = function.params
        positional = [*params.posonly_params, *params.params]
        yield from ((p.name.value, i) for i, p in enumerate(positional))
        yield from ((p.name.value, None) for p in params.kwonly_params)

    def _visible(self, expr: cst.CSTNode, site: cst.CSTNode) -> bool:
        names = _Names()
        expr.visit(names)
        here = self.get_metadata(ScopeProvider, site, None)
        line = self.position(site)[0]
        for name in names.found:
            there = self.get_metadata(ScopeProvider, name, None)
            if here is None or there is None:
                return False
            bound = set(here[name.value])
            if not bound or bound != set(there[name.value]):
                return False
            for assignment in bound:  # a local must be bound before the scope, and so
                # must a global read by module-level code (a script's cluster made last)
                if (isinstance(assignment, Assignment)
                        and (isinstance(assignment.scope, FunctionScope)
                             or isinstance(here, GlobalScope))
                        and not isinstance(assignment.node, cst.Param)
                        and self.position(assignment.node)[0] >= line):
                    return False
        return True

    def _worker_device(self, site: cst.CSTNode) -> str | None:
        """`'/job:worker/task:%d' % EXPR` for this worker's Server, spelled at `site`."""
        task = self._worker_task
        if task is None:
            return None
        q, job = self._quote, self._worker_job
        if isinstance(task, cst.Integer):
            return f"{q}/job:{job}/task:{task.value}{q}"
        spelled = self._spell_at(task, site)
        if spelled is None:
            return None
        if not isinstance(task, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            spelled = f"({spelled})"
        return f"{q}/job:{job}/task:%d{q} % {spelled}"

    def _setter(self, site: cst.CSTNode, func: cst.BaseExpression | None, column: int, *,
                worker: str | None, ps_scope: _JobScope | None = None,
                ps_tasks: int | None = None) -> tuple[str | None, str]:
        """(`device(replica_device_setter(...))` to write at `site`, or None and why not)."""
        device = self.v1_spelling_at(func, "device")
        setter = self.v1_spelling_at(func, REPLICA_DEVICE_SETTER)
        if device is None or setter is None:
            return None, "no compat.v1 spelling of device and replica_device_setter in this file"
        args = []
        cluster = None
        if self._cluster is not None and self._cluster.name is not None:
            cluster = self._spell_at(self._cluster.name, site)
        if cluster is None:
            count = self._cluster.ps_tasks if self._cluster is not None else None
            count = count or next((c[2] for c in self._clusters_at.values() if c), None)
            count = count or self.options.get("ps_tasks") or ps_tasks
            if count is None:
                return None, "cannot tell how many ps tasks the cluster has"
            args.append(f"ps_tasks={count}")
        if ps_scope is not None and ps_scope.rest:
            args.append(f"ps_device={self._quote}/job:ps{ps_scope.rest}{self._quote}")
        if worker is not None:
            args.append(f"worker_device={worker}")
        if cluster is not None:
            args.append(f"cluster={cluster}")
        head, tail = f"{device}({setter}(", "))"
        text = head + ", ".join(args) + tail
        if column + len(text) + 6 > _LINE:  # `with ` ... `:`
            # Continuation lines: 8 spaces past the statement (libcst adds the block's indent).
            joined = ", ".join(args)
            if column + 8 + len(joined) + len(tail) + 1 > _LINE:
                joined = ",\n        ".join(args)
            text = f"{head}\n        {joined}{tail}"
        return text, ""

    # -- ops on the parameter server -----------------------------------------------------------

    def _hand_spread(self) -> list[str]:
        """The ps tasks the file's ps scopes name, if they choose tasks by hand (more than
        one, one chosen at run time, or one other than task 0); else []."""
        tasks = set()
        for call in self._calls:
            if self.tf_canonical(call.func) in DEVICE_CALLS:
                scope = self._job_scope(call)
                if isinstance(scope, _JobScope) and scope.job == "ps":
                    tasks.add((scope.task or "0").replace(HOLE, "N"))
        if tasks and tasks != {"0"}:  # a setter would start at task 0
            return sorted(f"/job:ps/task:{t}" for t in tasks)
        return []

    def _plan_ps_scopes(self, ps_ops) -> None:
        spread = self._hand_spread()
        notes: dict[_JobScope, tuple[Replace | None, str]] = {}  # scope -> (its fix, note)
        for scope, ops in ps_ops.items():
            live = [c for c, _ in ops if not self._suppressed(c, scope)]
            if not live:
                continue
            if len(live) < len(ops):
                notes[scope] = None, ("; not fixed: another op under this scope is suppressed")
                continue
            if HOLE in scope.rest:
                notes[scope] = None, ("; not fixed: the device on the ps is chosen at run "
                                       "time; put the model under tf.device(tf.train."
                                       "replica_device_setter(...)) by hand")
                continue
            if scope in self._shared:
                notes[scope] = None, (
                    f"; not fixed: the scope also holds "
                    f"{self.code(self._shared[scope].func)}, shared state the workers reach "
                    f"on the ps, which replica_device_setter would move to each worker; move "
                    f"the other ops out of the scope by hand")
                continue
            if spread:
                notes[scope] = None, (
                    f"; not fixed: the device scopes spread variables over ps tasks by hand "
                    f"({', '.join(spread)}), and one replica_device_setter spreads them "
                    f"round-robin, which may move a variable to another task; put the model "
                    f"under tf.device(tf.train.replica_device_setter(...)) by hand")
                continue
            with_node = self.parent(scope.item)
            worker, unnamed = None, ""
            if not any(p.kind == "job" for p in self._paths(with_node, "op")):
                worker = self._worker_device(with_node)
                if worker is None:
                    unnamed = (" (no Server names this worker's task: give the setter "
                               "worker_device='/job:worker/task:%d' % task_index)")
            text, why = self._setter(with_node, scope.call.func, self.position(with_node)[1] - 1,
                                     worker=worker, ps_scope=scope, ps_tasks=1)
            if text is None:
                notes[scope] = None, f"; not fixed: {why}"
                continue
            notes[scope] = self._setter_edit(scope, text), (f"; fix: {self.code(scope.call)} becomes "
                                  f"{self._short(text)}, which keeps the variables on the ps "
                                  f"and sends every other op to the worker{unnamed}")
        reported = set()
        for scope, ops in ps_ops.items():
            for call, scopes in ops:
                if id(call) in reported or self._suppressed(call, scope) or scope not in notes:
                    continue
                reported.add(id(call))
                edits = tuple(notes.get(s, (None, ""))[0] for s in scopes)
                where = self.position(self.parent(scope.item))[0]
                self.report(call, (
                    f"{self.code(call.func)} runs on the parameter server (under "
                    f"{self.code(scope.call)}, line {where}): pipeline ops belong on the "
                    f"worker") + notes[scope][1], fix=None if None in edits else edits,
                    severity="warning")

    def _short(self, text: str) -> str:
        return " ".join(text.split()).replace("( ", "(")

    def _suppressed(self, node: cst.CSTNode, scope: _JobScope | None) -> bool:
        return self.suppressed(node) or (scope is not None and self.suppressed(scope.item))

    # -- variables on no parameter server -----------------------------------------------------

    def _plan_unplaced(self, unplaced) -> None:
        if not unplaced:
            return
        # By the worker scope they are under (None: no scope; "mixed": several).
        by_scope: dict[_JobScope | str | None, list[tuple[cst.Call, bool]]] = {}
        for call, paths in unplaced:
            scopes = {p.scope for p in paths}
            key = scopes.pop() if len(scopes) == 1 else "mixed"
            scope = key if isinstance(key, _JobScope) else None
            by_scope.setdefault(key, []).append((call, self._suppressed(call, scope)))
        for scope, variables in by_scope.items():
            live = [c for c, suppressed in variables if not suppressed]
            if not live:
                continue
            if len(live) < len(variables):
                note, fix = "; not fixed: another variable here is suppressed", None
            elif scope == "mixed":
                note, fix = ("; not fixed: the function creating it is called under "
                             "different device scopes; build the model under "
                             "tf.device(tf.train.replica_device_setter(...))"), None
            elif scope is None:
                note, fix = self._plan_region(live)
            else:
                note, fix = self._plan_worker_scope(scope)
            for call in live:
                layer = self.tf_canonical(call.func) in LAYER_CALLS
                if isinstance(scope, _JobScope):
                    where = (f"on /job:{scope.job} (under {self.code(scope.call)}, line "
                             f"{self.position(self.parent(scope.item))[0]})")
                else:
                    where = "on no parameter server"
                path, line, _ = self._cluster_of(call)
                cluster = f"line {line}" if path == self.project.label else f"{path}:{line}"
                step = self.tf_canonical(call.func) in GLOBAL_STEP_MAKERS
                made = ("the global step" if step else
                        "its variables" if layer else "a variable")
                harm = "each worker trains its own copy" + (
                    ", counting its own steps instead of sharing one on the ps" if step else "")
                self.report(call, (
                    f"{self.code(call.func)} creates {made} {where} though the cluster "
                    f"({cluster}) has a 'ps' job: {harm}") + note, fix=fix, severity="warning")

    # -- the worker's own variables on the ps -------------------------------------------------

    def _plan_shared_locals(self, shared_locals) -> None:
        """Report the worker's own variables made under `replica_device_setter`, which
        places by op type, not by collection: each lands on a ps task, shared by every
        worker. Fixed where every chain of callers reaches the setter: the statements making
        them move under the setter's worker device, a job the setter keeps."""
        live = [(c, paths) for c, paths in shared_locals if not self._suppressed(c, None)
                and not any(p.item is not None and self.suppressed(p.item) for p in paths)]
        fixes: dict[int, tuple[WrapInWith | None, str]] = {}  # id(call) -> (fix, note)
        runs: dict[int, list[tuple]] = {}  # id(block) -> [(index, statement, call, paths)]
        blocks: dict[int, cst.CSTNode] = {}
        for call, paths in live:
            chain = self._blocks_of(call)
            if any(p.kind != "setter" for p in paths):
                fixes[id(call)] = None, ("; not fixed: the function making it also runs "
                                         "under other device scopes")
            elif not chain:
                fixes[id(call)] = None, "; not fixed: no block holds its statement"
            else:
                block, statement = chain[0]
                index = next(i for i, st in enumerate(block.body) if st is statement)
                blocks[id(block)] = block
                runs.setdefault(id(block), []).append((index, statement, call, paths))
        for key, held in runs.items():
            body = list(blocks[key].body)
            held.sort(key=lambda entry: entry[0])
            group = [held[0]]
            for entry in held[1:]:
                between = body[group[-1][0] + 1 : entry[0]]
                if entry[0] == group[-1][0] or all(map(self._makes_no_variable, between)):
                    group.append(entry)
                else:
                    self._plan_local_run(group, body, fixes)
                    group = [entry]
            self._plan_local_run(group, body, fixes)
        for call, paths in live:
            setter = next(p for p in paths if p.kind == "setter")
            where = self.position(self.parent(setter.item))[0]
            fix, note = fixes[id(call)]
            self.report(call, (
                f"{self.code(call.func)} creates the worker's own variable (outside "
                f"GLOBAL_VARIABLES) under replica_device_setter (line {where}), which sends "
                f"every variable to a ps task whatever its collections: every worker shares "
                f"this one") + note, fix=fix, severity="warning")

    def _plan_local_run(self, group, body, fixes) -> None:
        """The fix of adjacent statements making the worker's own variables: under the
        device the setter gives the worker's ops."""
        first, last = group[0][0], group[-1][0]
        site = body[first]
        workers = set()
        for _, _, call, paths in group:
            for path in paths:
                given = argument(path.setter, "worker_device", 2)
                spelled = (self._worker_device(site) if given is None
                           else self._spell_at(given, site))
                workers.add(spelled)
        worker = workers.pop() if len(workers) == 1 else None
        device = self.v1_spelling_at(group[0][3][0].item.item.func, "device")
        if worker is None or device is None:
            why = ("no compat.v1 spelling of device in this file" if worker is not None else
                   "the setter's worker device cannot be spelled here; put the worker's own "
                   "variables under tf.device('/job:worker/task:%d' % task_index) by hand")
            for _, _, call, _ in group:
                fixes[id(call)] = None, f"; not fixed: {why}"
            return
        text = f"{device}({worker})"
        fix = WrapInWith(tuple(body[first : last + 1]), text)
        note = (f"; fix: the statements that create it move under {self._short(text)} "
                f"(a job an op names is kept by the setter)")
        for _, _, call, _ in group:
            fixes[id(call)] = fix, note

    # -- the global step beside the setter ---------------------------------------------------

    def _setter_beside_step(self, call: cst.Call, name: str
                            ) -> tuple[_Path, cst.WithItem | None] | None:
        """The `replica_device_setter` scope beside which `call` makes the global step, and
        the outermost device scope naming no job that holds `call` in its function (None
        where none does). The function (or module) making it opens that scope itself and
        reads the step under it (`apply_gradients(grads, global_step=global_step)`), or
        gives it as an optimizer's global step anywhere, while no scope of its own places
        `call`: no device scope, or one naming no job (`'/gpu:0'`, `DeviceSpec(device_type=
        'GPU', device_index=i)`, a function of the project returning such a device), which
        leaves the step on the worker. The setter is the program's word that it trains with
        a ps job, whatever calls the function (a method of a class built by reflection) or
        wherever its cluster is made. None: no such scope, a step made under a scope naming
        a job or a device function, not the global step, or every session of the file runs
        in-process."""
        if self._in_process or not self._opens_setter:
            return None
        jobless = None
        for around in with_items_around(call, self.parent):
            if isinstance(around, cst.WithItem):
                if self._names_no_job(around):
                    jobless = around
                elif self._verdict(around, "step") is not None:
                    return None  # placed: by hand on the ps, or the existing rules judge it
            elif isinstance(around, cst.FunctionDef):
                break
            else:
                return None
        reads = self._reads_of_value(call)
        if reads is None:
            return None
        if name not in GLOBAL_STEP_MAKERS and not any(map(self._given_as_step, reads)):
            return None
        home = enclosing_function(call, self.parent)
        for read in reads:
            if enclosing_function(read, self.parent) is not home or self._apart(call, read):
                continue
            for around in with_items_around(read, self.parent):
                if not isinstance(around, cst.WithItem):
                    break
                verdict = self._verdict(around, "op")
                if verdict is not None:
                    if verdict.kind == "setter":
                        return verdict, jobless
                    break
        if any(enclosing_function(read, self.parent) is home and self._given_as_step(read)
               and not self._apart(call, read) for read in reads):
            setter = self._ps_setter_in(home, call)
            if setter is not None:
                return setter, jobless
        return None

    def _step_made_first(self, call: cst.Call) -> bool:
        """Whether a global step maker placed by the setter on every chain of callers
        (`with tf.device(tf.train.replica_device_setter(...)): tf.train.
        get_or_create_global_step()`) runs before `call` whenever `call` runs, earlier in
        the same function: `call`, a `get_or_create_global_step`, then returns that step
        and makes nothing (a second call outside the setter, to read the step for hooks
        or logging)."""
        home = enclosing_function(call, self.parent)
        for first in self._calls:
            if (first is call or self.tf_canonical(first.func) not in GLOBAL_STEP_MAKERS
                    or enclosing_function(first, self.parent) is not home
                    or self.position(first) >= self.position(call)
                    or not self._runs_whenever(first, call)):
                continue
            paths = self._paths(first, "step")
            if paths and all(p.kind == "setter" for p in paths):
                return True
        return False

    def _runs_whenever(self, first: cst.CSTNode, then: cst.CSTNode) -> bool:
        """Whether `first` runs whenever `then` does, both in one function: every branch,
        loop body, `try` body or conditional expression holding `first` there holds `then`
        too (`with` bodies always run)."""
        child, node = first, self.parent(first)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
            if isinstance(node, _CONDITIONAL) and not inside(then, child, self.parent):
                return False
            child, node = node, self.parent(node)
        return True

    def _apart(self, one: cst.CSTNode, other: cst.CSTNode) -> bool:
        """Whether `one` is in a branch of an `if` that never runs with `other`: `other`
        in another branch of it (`elif`, `else`), or after it where the branch ends in a
        `return` or `raise`. A standalone program's global step beside the code that
        builds the cluster's (one name's bindings read by both alike)."""
        child, node = one, self.parent(one)
        while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
            if isinstance(node, cst.If) and (child is node.body or child is node.orelse):
                branch = node.orelse if child is node.body else node.body
                if branch is not None and (other is branch
                                           or inside(other, branch, self.parent)):
                    return True
                last = child.body[-1] if isinstance(child, cst.IndentedBlock) else None
                if (isinstance(last, cst.SimpleStatementLine)
                        and isinstance(last.body[-1], (cst.Return, cst.Raise))
                        and not inside(other, node, self.parent)
                        and self.position(other) > self.position(node)):
                    return True
            child, node = node, self.parent(node)
        return False

    def _names_no_job(self, item: cst.WithItem) -> bool:
        """Whether a `with` item is a device scope whose every device the code shows names
        no job (a device type, an index: `'/gpu:0'`, `DeviceSpec(device_type='GPU',
        device_index=i)`, or what a function of the project it calls returns): the placer
        keeps its ops on the worker. False where a device may name one, or is a device
        function, or is not read (a runtime part first: `prefix + '/gpu:0'`)."""
        expr = item.item
        if not (isinstance(expr, cst.Call) and self.tf_canonical(expr.func) in DEVICE_CALLS):
            return False
        given = self._device_named(device_argument(expr))
        template = None if given is None else device_template(given)
        templates = [template] if template is not None else self._returned_devices(given)
        return bool(templates) and all(
            not t.startswith(HOLE) and _parse_job_device(t) is None for t in templates)

    def _returned_devices(self, given: cst.BaseExpression | None) -> list[str]:
        """The device templates a call of a function of the project returns (`codemod.
        DeviceValues.returned` reads each `return`), this file's or another module's
        (`FileView.function_elsewhere`); [] where it is no such call or one is unread."""
        if not isinstance(given, cst.Call):
            return []
        name = get_full_name_for_node(given.func)
        if name is None:
            return []
        reader = self.device_values
        functions = [f for f in reader.functions(name) if isinstance(self.parent(f), cst.Module)]
        if not functions:
            elsewhere = self.project.function_elsewhere(name, self.position(given)[0])
            if elsewhere is None:
                return []
            path, code, unit, _ = elsewhere
            reader = self.device_values_of(path, code)
            functions = [] if reader is None else reader.functions(unit)
        if reader is None or len(functions) != 1:
            return []
        return reader.returned(functions[0]) or []

    def _ps_setter_in(self, home: cst.FunctionDef | None, step: cst.Call) -> _Path | None:
        """The first `replica_device_setter` scope the function `home` (None: the module's
        code) opens itself, in a branch that may run with `step`'s, that sends variables to
        the ps job (no `ps_device` naming another device: a single machine's setter onto
        its CPU is no cluster's)."""
        for node in self.nodes(cst.WithItem):
            if enclosing_function(node, self.parent) is not home or self._apart(step, node):
                continue
            verdict = self._verdict(node, "op")
            if verdict is None or verdict.kind != "setter":
                continue
            ps_device = argument(verdict.setter, "ps_device", 1)
            template = None if ps_device is None else device_template(ps_device)
            if ps_device is None or (template is not None
                                     and (_parse_job_device(template) or ("",))[0] == "ps"):
                return verdict
        return None

    def _given_as_step(self, read: cst.CSTNode) -> bool:
        """Whether a name is read as an optimizer's global step: `global_step=` of any call,
        or the second argument of `apply_gradients`/`minimize`."""
        arg = self.parent(read)
        call = self.parent(arg) if isinstance(arg, cst.Arg) and arg.value is read else None
        if not isinstance(call, cst.Call):
            return False
        if arg.keyword is not None:
            return arg.keyword.value == "global_step"
        return (isinstance(call.func, cst.Attribute)
                and call.func.attr.value in ("apply_gradients", "minimize")
                and len(call.args) > 1 and call.args[1] is arg)

    def _plan_steps_beside_setter(
            self, steps: list[tuple[cst.Call, _Path, cst.WithItem | None]]) -> None:
        """Report each global step made beside the setter scope of its function. The fix
        moves its statement to the top of that scope's body where the scope follows it in
        the same block, with nothing between reading the step, and the scope is the setter
        alone (`_move_into`: one device chooser, whose round-robin then counts the step
        first, as a step made there would be); else it wraps the statement in the same
        setter, spelled as the scope spells it, where what that reads is bound. A step made
        under a device scope naming no job leaves that scope for the setter's
        (`_move_out_of`): nested in it, the setter's ps task would keep the scope's device
        type, a GPU the ps may not have."""
        syncing = any(self.tf_canonical(c.func) == _SYNC_REPLICAS for c in self._calls)
        for call, setter, jobless in steps:
            if self._suppressed(call, None) or self.suppressed(setter.item):
                continue
            where = self.position(self.parent(setter.item))[0]
            harm = "each worker keeps its own step instead of sharing one on the ps"
            if syncing:
                harm += ("; SyncReplicasOptimizer builds its token queue (shared_name "
                         "'sync_token_q') on the global step's device, so each worker gets "
                         "its own, which only the chief fills: the other workers wait on "
                         "theirs forever")
            chain = self._blocks_of(call)
            if jobless is not None:
                placed = (f"under {self.code(jobless.item)} (line "
                          f"{self.position(self.parent(jobless))[0]}), which names no job, so "
                          f"on the worker")
                fix, header = self._move_out_of(jobless, call, setter)
            else:
                placed = "under no device scope"
                fix, header = ((self._move_into(chain[0], setter.item), None) if chain
                               else (None, None))
                if fix is None and chain:
                    header = self._setter_header(setter, chain[0][1])
                    if header is not None:
                        fix = WrapInWith((chain[0][1],), header)
            if fix is None and jobless is not None:
                note = ("; not fixed: the step is not the first statement of that device "
                        "scope, or the setter's arguments are not bound there; create the "
                        "global step under the setter, outside the device scope")
            elif fix is None:
                note = ("; not fixed: the setter's arguments are not bound where the step is "
                        "made; create the global step under the setter")
            elif header is None:
                note = f"; fix: the statement moves into the setter's scope (line {where})"
            elif jobless is not None:
                note = (f"; fix: the statement moves out of that scope, under "
                        f"{self._short(header)}")
            else:
                note = f"; fix: the statement moves under {self._short(header)}"
            self.report(call, (
                f"{self.code(call.func)} creates the global step outside the "
                f"replica_device_setter scope of line {where}, {placed}: "
                f"{harm}") + note, fix=fix, severity="warning")

    def _setter_header(self, setter: _Path, site: cst.CSTNode) -> str | None:
        """The setter's device scope spelled at `site` as the scope spells it (or the
        setter's call under the scope's `device`); None where what it reads is not bound
        there."""
        scope = setter.item.item
        if self._visible(scope, site):
            return self.code(scope)
        if isinstance(scope, cst.Call) and self._visible(setter.setter, site):
            return f"{self.code(scope.func)}({self.code(setter.setter)})"
        return None

    def _move_out_of(self, jobless: cst.WithItem, call: cst.Call, setter: _Path
                     ) -> tuple[Replace | tuple[Replace, Replace] | None, str | None]:
        """(the edits, the setter's scope as written) that take the step's statement out
        of the device scope naming no job (`jobless`, the one item of its `with`), where it
        is that scope's first statement, into a `with` of the setter just before it: the
        same statements run in the same order. (None, None) where it is not the first, or
        the setter cannot be spelled there."""
        scope = self.parent(jobless)
        statement = enclosing(call, self.parent, cst.BaseStatement)
        if (not isinstance(scope, cst.With) or len(scope.items) != 1
                or not isinstance(scope.body, cst.IndentedBlock)
                or not isinstance(statement, cst.SimpleStatementLine)
                or scope.body.body[0] is not statement):
            return None, None
        header = self._setter_header(setter, scope)
        if header is None:
            return None, None
        if len(scope.body.body) == 1:
            return Replace(jobless, lambda item: item.with_changes(
                item=cst.parse_expression(header))), header
        opened = cst.ensure_type(cst.parse_statement(f"with {header}:\n    pass\n"), cst.With)

        def before(node: cst.CSTNode) -> cst.FlattenSentinel:
            moved = opened.with_changes(
                leading_lines=node.leading_lines,
                body=opened.body.with_changes(body=(statement,)))
            return cst.FlattenSentinel((moved, node.with_changes(leading_lines=())))

        return (Replace(statement, lambda _: cst.RemovalSentinel.REMOVE),
                Replace(scope, before)), header

    def _move_into(self, held: tuple[cst.CSTNode, cst.CSTNode], item: cst.WithItem
                   ) -> tuple[Replace, Replace] | None:
        """The edits that move the step's statement (`held`: its block, the statement) to
        the top of the `with` of `item`, its comments above staying where they were; None
        unless the `with` is later in the same block, has that one item and an indented
        body, and no statement between reads a name the step's statement binds."""
        block, statement = held
        scope = self.parent(item)
        body = list(block.body)
        at = {id(node): i for i, node in enumerate(body)}
        if (not isinstance(scope, cst.With) or len(scope.items) != 1
                or not isinstance(scope.body, cst.IndentedBlock)
                or not isinstance(statement, cst.SimpleStatementLine)
                or len(statement.body) != 1 or id(scope) not in at):
            return None
        first, last = at[id(statement)], at[id(scope)]
        bound = {n.value for t in getattr(statement.body[0], "targets", ())
                 for n in [t.target] if isinstance(n, cst.Name)}
        if first >= last or not bound:
            return None
        for between in body[first + 1 : last]:
            names = _Names()
            between.visit(names)
            if any(n.value in bound for n in names.found):
                return None
        moved = statement.with_changes(leading_lines=())
        comments = statement.leading_lines

        def into(node: cst.CSTNode) -> cst.CSTNode:
            return node.with_changes(
                leading_lines=(*comments, *node.leading_lines),
                body=node.body.with_changes(body=(moved, *node.body.body)))

        return (Replace(statement, lambda _: cst.RemovalSentinel.REMOVE), Replace(scope, into))

    def _makes_no_variable(self, statement: cst.CSTNode) -> bool:
        """Whether a statement calls only TF ops that make no variable (no function of the
        program's own, which might): moved under the worker's device with its neighbours,
        its ops land where the setter would have put them."""
        for call in self._calls:
            if call is statement or inside(call, statement, self.parent):
                name = self.tf_canonical(call.func)
                if name is None or name in CREATES_VARIABLES:
                    return False
        return True

    def _setter_edit(self, scope: _JobScope, text: str) -> Replace:
        """The edit that makes a `with` item over `scope` the setter `text`."""
        return Replace(scope.item, lambda item: item.with_changes(item=cst.parse_expression(text)))

    def _local_note(self, calls: list[cst.Call]) -> str:
        """Why a setter over code holding the worker's own variables `calls` is no fix."""
        lines = ", ".join(str(self.position(c)[0]) for c in calls)
        return (f"; not fixed: the worker's own variables made there too (line {lines}: "
                f"outside GLOBAL_VARIABLES) would move to the ps with the setter, shared by "
                f"every worker; put the shared variables under "
                f"tf.device(tf.train.replica_device_setter(...)) apart from them")

    def _plan_worker_scope(self, scope: _JobScope) -> tuple[str, Replace | None]:
        locals_ = [c for c, paths in self._worker_locals if any(p.scope is scope for p in paths)]
        if locals_:
            return self._local_note(locals_), None
        with_node = self.parent(scope.item)
        given = device_argument(scope.call)
        text, why = self._setter(with_node, scope.call.func, self.position(with_node)[1] - 1,
                                 worker=self.code(given))
        if text is None:
            return f"; not fixed: {why}", None
        return (f"; fix: {self.code(scope.call)} becomes {self._short(text)}, which keeps the "
                f"compute on that worker and puts the variables on the ps"), self._setter_edit(scope, text)

    def _plan_region(self, calls: list[cst.Call]) -> tuple[str, WrapInWith | None]:
        """Wrap the statements from the first to the last variable, in the innermost block
        that holds them all, in a setter scope."""
        chains = [self._blocks_of(c) for c in calls]  # [(block, its statement)], innermost first
        common = [b for b, _ in chains[0]
                  if all(any(b is other for other, _ in chain) for chain in chains[1:])]
        hint = "; build the model under tf.device(tf.train.replica_device_setter(...))"
        if not common:
            return ("; not fixed: no one block builds them all (they are created in functions "
                    "called from several places)" + hint), None
        block = common[0]
        body = list(block.body)
        holding = [next(st for b, st in chain if b is block) for chain in chains]
        indices = [next(i for i, st in enumerate(body) if st is held) for held in holding]
        first, last = min(indices), max(indices)
        moved = body[first : last + 1]
        locals_ = [c for c, _ in self._worker_locals
                   if any(held is c or inside(c, held, self.parent) for held in moved)]
        if locals_:
            return self._local_note(locals_), None
        site = body[first]
        text, why = self._setter(site, None, self.position(site)[1] - 1,
                                 worker=self._worker_device(site))
        if text is None:
            return f"; not fixed: {why}" + hint, None
        return (f"; fix: the statements that create them move under {self._short(text)}",
                WrapInWith(tuple(body[first : last + 1]), text))

    def _blocks_of(self, node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
        """(block, statement of it holding `node`), innermost first: in its function, then
        at the function's call, if the file calls it once."""
        out = []
        child, parent = node, self.parent(node)
        while parent is not None:
            if (isinstance(parent, (cst.IndentedBlock, cst.Module))
                    and isinstance(child, cst.BaseStatement)):
                out.append((parent, child))
            if isinstance(parent, cst.FunctionDef) and child is parent.body:
                calls = self._call_sites(parent)
                if not calls or len(calls) > 1 or len(out) > 64:
                    break
                child, parent = calls[0], self.parent(calls[0])
                continue
            if isinstance(parent, (cst.ClassDef, cst.Lambda)):
                break
            child, parent = parent, self.parent(parent)
        return out


