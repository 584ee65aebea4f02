"""replica-placement: variables on parameter servers, everything else on the worker (seed 003).

The bug: a distributed program scopes its model by hand (`with tf.device('/job:ps/task:0')`)
and pipeline ops land on the parameter server ("a pipeline operation sometimes even runs on
'ps' role!"), or variables stay on the worker, so every worker trains its own copy. TF's
answer is `tf.train.replica_device_setter`, which sends its ps ops (the variables and hash
tables, `ResourceConditionalAccumulator`, the boosted-trees resources: device_setter.py's
STANDARD_PS_OPS) to `/job:ps/task:k` and every other op to the worker device, merging each
op's existing device into the result (a job the op already names is kept).

Synchronous training shares more than variables: `SyncReplicasOptimizer`'s gradient
accumulators and token queue are resources the workers find by their `shared_name` on one
device. On a worker (worse, on `/job:worker` with no task) each worker gets its own: no
gradient is aggregated across workers, and the synchronisation is gone. Its
`sync_rep_local_step` is the opposite: a local variable colocated with a `NoOp` on the
worker "to prevent it being placed on the PS"; on a ps task, the workers would share it.
The token queue goes where the global step is: `apply_gradients` builds it, the inner
optimizer's update (which advances the step) and the chief's token fill under
`tf.device(global_step.device)`. A global step made outside the setter's scope names no
device, so that scope adds nothing and the setter, which sends a queue to its worker
device, puts `sync_token_q` on each worker's own task: only the chief's queue runner fills
its queue, every other worker's first step waits on an empty one of its own for ever, and
each worker's own step never advances with the chief's updates.

Found: with `ps_tasks` set (or a graph that already names ps tasks), every variable group
not on the ps job; every shared resource (a gradient accumulator, a queue or barrier with a
`shared_name`) not on a ps task; a worker's own variable (in `local_variables`, or made
under `colocate_with` a node that is no variable: the setter never sees it) on the ps; and
every other op on the ps, but those the setter's own graphs put there on purpose: a `NoOp`
(as `tf.group` leaves it: it computes nothing), a sharded Saver's save and restore ops (it
puts them with each task's variables), a `Const` only ops staying on the ps read, and an op
that only feeds a shared resource's ops (the tokens the chief enqueues beside its queue) or
a variable's initializer (its initial value, computed once when the variables are
initialized, never in a step). A graph the setter placed gives no finding and is not
rewritten.

Fixed: as `replica_device_setter(ps_tasks, ps_device, worker_device, merge_devices=True)`
would have placed the graph when it was built: each variable's whole colocation group goes
to its ps task (its initializer, read, slots and optimizer updates with it; a member that
names no device, or joined it only by a ref or resource edge, is left to the placer, which
keeps it with its group); a shared resource's group to the ps task of the variable its
aggregated gradient updates (SyncReplicasOptimizer builds an accumulator under
`tf.device(var.device)`), else to the global step's (its token queue); a worker's own
variable's group stays on the worker (off the ps: to the worker task the graph names);
every other op goes to the worker device (a pipeline op taken off the ps: to the worker
task the graph names, where it names one). An op's own device fields are kept (type, index,
and a job that is already the right one); a job that is the wrong one (a pipeline op pinned
to the ps, a variable or a shared resource pinned to a worker) is replaced. Round-robin picks tasks in graph order,
counting the ps ops the setter's device function sees, as TF does (not those made under
`colocate_with`: slots, the local step); greedy balances the groups' byte sizes over the
whole graph, largest first, which beats TF's creation-order greedy strategy. The change
report gives the bytes per ps task.

Parameters:
    ps_tasks: number of parameter-server tasks (at least 1; default: the ps tasks the graph
        already names).
    ps_device: the ps job. Defaults to `/job:ps`.
    worker_device: where every other op goes. Defaults to `/job:worker`.
    strategy: `round-robin` (default, as TF) or `greedy` (by byte size).

In source: a program that places its model by hand gets TF's setter instead. Ops created
under a `tf.device('/job:ps/...')` string (`tf.add` in the seed, input placeholders fed to
the ps every step; the string may be named once, or be an element of a tuple of device
strings: `tf.device(devices[0])`) are warnings, and the scope becomes
`tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(...))` spelled with
the file's own aliases: the variables stay on the ps, the ops go to the worker. In code that
runs with a cluster that has a `ps` job (the function making the ClusterSpec or Server, what
calls it and what they call, in the file or across the modules it imports; not a local
evaluation graph beside them), variables under no scope or under a worker's
(`'/job:worker/task:%d' % i`) are warnings too, as each worker trains its own copy: the
worker scope becomes the setter with that `worker_device`, unscoped variable statements move
into a setter scope. The setter's `cluster=` and `worker_device=` come from the program's own
ClusterSpec and `Server(..., task_index=...)`. A program whose sessions all run in-process
(`tf.Session()` with no target) shares no variable through the cluster it makes, and a
variable's initial value (inline, or a name only variables read) runs once: neither is
found; nor is a variable named after the run-time task of the worker scope it is made
under (`name='worker_%s_users' % worker_n` under `'/job:worker/task:%s' % worker_n`): each
worker makes one of another name, its own partition, which no worker would share on the
ps either. Variables outside GLOBAL_VARIABLES (a local variable, `collections=
[tf.GraphKeys.LOCAL_VARIABLES]` or a private collection) are the worker's own on purpose
and left alone, but under the setter, which places by op type, they land on the ps, shared
by every worker: found, and moved under the setter's `worker_device` (a job an op already
names is kept). A global step made, under no device scope or one naming no job (`'/gpu:0'`,
a `DeviceSpec` of a GPU, a helper returning one), beside the setter's scope of its own
function and given to an optimizer (under that scope, or anywhere in the function where the
setter sends variables to the ps job) is a warning wherever the cluster is made (the
setter says the program has a ps job): its statement moves to the top of that scope, or,
where a statement between reads the step, under the same setter; first in a scope naming no
job, it moves out of that scope into the setter.
Scopes that choose ps tasks by hand are reported, not rewritten (round-robin may move a
variable to another task). Device functions (a setter already, slim's
`variables_device()`, a chooser) are left alone; see `ReplicaPlacementCodemod`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterator, NamedTuple

from graphfix.graph.devices import DeviceSpec
from graphfix.findings import Change, Edit, Finding
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.graph.placement import variable_bytes
from graphfix.graph.training import global_step, is_initializer, worker_local_variables
from graphfix.registry import Context, Param, Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import CREATES_VARIABLES, PS_JOB_WORDS, last_names

if TYPE_CHECKING:
    from graphfix.source.project import FileView
    from graphfix.source.syntax import Syntax

_VARIABLE_MAKERS = last_names(CREATES_VARIABLES)
# The ops `replica_device_setter` sends to a ps task (device_setter.py's STANDARD_PS_OPS):
# the variables and hash tables, and the resources it keeps beside them.
PS_OPS = VARIABLE_OPS | {"ResourceConditionalAccumulator", "DecisionTreeResource",
                         "BoostedTreesEnsembleResourceHandleOp",
                         "BoostedTreesQuantileStreamResourceHandleOp"}
_OTHER_PS_OPS = PS_OPS - VARIABLE_OPS
# Resources the workers share by their `shared_name` (each worker's session finds the one
# on its device by that name): synchronous training's gradient accumulators and token queue,
# barriers, queues fed by one worker and read by another.
_SHARABLE_RESOURCE_OPS = frozenset({
    "ConditionalAccumulator", "SparseConditionalAccumulator", "ResourceConditionalAccumulator",
    "Barrier", "FIFOQueue", "FIFOQueueV2", "PaddingFIFOQueue", "PaddingFIFOQueueV2",
    "RandomShuffleQueue", "RandomShuffleQueueV2", "PriorityQueue", "PriorityQueueV2"})


class _Plan(NamedTuple):
    wanted: dict[int, str]  # position -> the device it should have
    load: dict[int, int]  # ps task -> variable bytes
    shared: set[int]  # the shared resources (positions)
    local: set[int]  # workers' own variables (positions)
    local_roots: set[str]  # roots of their groups (those holding no global variable)


def _is_shared_resource(graph: GraphIndex, position: int) -> bool:
    """Whether the node is a resource the workers share by name (a `shared_name`)."""
    if graph.ops[position] not in _SHARABLE_RESOURCE_OPS:
        return False
    attr = graph.node_at(position).attr
    return "shared_name" in attr and bool(attr["shared_name"].s)


def _shared_resources(graph: GraphIndex) -> dict[str, int]:
    """The colocation groups of shared resources: root -> the resource's position."""
    kinds = _SHARABLE_RESOURCE_OPS & graph.op_kinds()
    if not kinds:
        return {}
    return {graph.group_root(graph.names[p]): p for p in graph.positions_of(kinds)
            if _is_shared_resource(graph, p)}


def _ps_tasks_named(graph: GraphIndex, ps_job: str) -> int:
    tasks = {spec.task for device in set(graph.devices) if device
             and (spec := DeviceSpec.parse(device)).job == ps_job and spec.task is not None}
    return max(tasks) + 1 if tasks else 0


def _worker_task_named(graph: GraphIndex, worker: DeviceSpec) -> int | None:
    """The one task of the worker job the graph names (None: none, several, or the
    worker device names its own; a device of the job naming no task aside)."""
    if worker.task is not None or worker.job is None:
        return None
    tasks = {spec.task for device in set(graph.devices) if device
             and (spec := DeviceSpec.parse(device)).job == worker.job} - {None}
    return tasks.pop() if len(tasks) == 1 else None


def _sharded_saver_scopes(graph: GraphIndex) -> tuple[str, ...]:
    """The name scopes (`save/`) of sharded Savers. `Saver(sharded=True)` saves and restores
    each device's variables on that device: under replica_device_setter, its per-task ops sit
    on their ps task by design, not as pipeline ops."""
    return tuple(sorted({graph.names[p].rpartition("/")[0] + "/"
                         for p in graph.positions_of(("ShardedFilename",))}))


def _without_job(spec: DeviceSpec) -> DeviceSpec:
    return spec.replace(job=None, replica=None, task=None)


def _ps_scope_or_cluster(syntax: Syntax) -> bool:
    """Whether a file has a device scope on the ps job (`with tf.device('/job:ps/task:0')`,
    the job's name given by a format), or a cluster with a ps job
    (`tf.train.ClusterSpec({'ps': ...})`, a `Server` of one, the dict built apart): this
    transform's pre-check."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.syntax import call_arguments, strings_in, tail_name

    for block in syntax.withs:
        for item in block.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and tail_name(call.func) == "device" and any(
                    text == "ps" or "job:ps" in text
                    for arg in call_arguments(call) for text in strings_in(arg)):
                return True
    clusters = any(tail_name(c.func) in ("ClusterSpec", "Server") for c in syntax.calls)
    return clusters and "ps" in syntax.strings


def _ps_scope_cluster_or_variables(syntax: Syntax) -> bool:
    """This transform's pre-check: a ps scope or a cluster (`_ps_scope_or_cluster`), or a
    call spelled like a variable's maker, which a cluster made in another module may reach
    (the project model says: `_cluster_or_ps_scope`)."""
    from graphfix.source.syntax import tail_name

    return _ps_scope_or_cluster(syntax) or any(
        tail_name(c.func) in _VARIABLE_MAKERS for c in syntax.calls)


def _cluster_or_ps_scope(view: FileView) -> bool:
    """Whether the file opens a device scope on the ps job, or a cluster with a ps job
    reaches its code (made there, or along imports and calls:
    `FileView.cluster_reaching`)."""
    return bool(view.ps_scopes()) or view.cluster_reaching() is not None


class ReplicaPlacement(Transform):
    name = "replica-placement"
    summary = "place variables on ps tasks and all else on the worker (replica_device_setter)"
    params = (
        Param("ps_tasks", None, "number of ps tasks (default: those the graph names)", kind=int,
              minimum=1),
        Param("ps_device", "/job:ps", "the parameter-server job"),
        Param("worker_device", "/job:worker", "the device for every other op"),
        Param("strategy", "round-robin", "how variables are spread over the ps tasks",
              choices=("round-robin", "greedy")),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:ReplicaPlacementCodemod"
    # A device scope on the ps job or a cluster with a ps job (`_ps_scope_or_cluster`: a
    # call list cannot say "given a ps string", nor "a cluster call and a 'ps' string"), or
    # variables that a cluster of another module reaches (the project model says).
    source_triggers = SourceTriggers(words=(*PS_JOB_WORDS, *sorted(_VARIABLE_MAKERS)),
                                     where=_ps_scope_cluster_or_variables,
                                     in_project=_cluster_or_ps_scope)

    def plan(self, graph: GraphIndex, ctx: Context) -> _Plan:
        """The device every node should have (by position), the bytes each ps task holds,
        and the groups that are shared resources or workers' own variables."""
        ps = DeviceSpec.parse(ctx.options["ps_device"])
        worker = DeviceSpec.parse(ctx.options["worker_device"])
        tasks = ctx.options["ps_tasks"]
        if tasks is None:
            tasks = _ps_tasks_named(graph, ps.job)
        if tasks == 0:
            return _Plan({}, {}, set(), set(), set())
        # Tasks past one per variable are never used, by either strategy (a huge ps_tasks
        # must not make a list that long).
        tasks = min(tasks, max(1, len(graph.positions_of(VARIABLE_OPS))))
        groups = graph.colocation_groups()
        kinds, devices = graph.ops, graph.devices
        local = worker_local_variables(graph)
        shared = _shared_resources(graph)
        task_of_group = self._assign_tasks(graph, groups, tasks, ctx.options["strategy"],
                                           local, shared, ps.job)
        load = {k: 0 for k in range(tasks)}
        for root, task in task_of_group.items():
            load[task] += sum(variable_bytes(graph.node_at(p)) for p in groups[root]
                              if kinds[p] in VARIABLE_OPS)
        # The groups of workers' own variables: on the worker, as their program put them.
        local_roots = {graph.group_root(graph.names[p]) for p in local} - set(task_of_group)
        # The worker task a between-graph replica's graph names (its one): a worker's own
        # variable, or a pipeline op, taken off the ps goes there, not to any task of the
        # job (the placer may pick another worker's).
        own_task = _worker_task_named(graph, worker)
        classes = graph.colocated_with
        handle_joined = graph.handle_joined()
        saver_scopes = _sharded_saver_scopes(graph)
        wanted: dict[int, str] = {}
        ordinary: list[int] = []
        anchors = set(shared.values())  # (a shared resource is placed as a ps op is)
        for root, positions in groups.items():
            task = task_of_group.get(root)
            is_local = root in local_roots
            if task is None and not is_local:
                ordinary.extend(positions)
                continue
            for position in positions:
                device = devices[position]
                if is_local and (not device or position in handle_joined):
                    continue  # (it follows its group, as below)
                if not is_local and kinds[position] not in PS_OPS and position not in anchors and (
                        not device or not classes(position) or position in handle_joined):
                    # No device: it follows its group. No `_class`: it joined the group by
                    # a ref or resource edge, along which the placer overrides its device.
                    continue
                current = DeviceSpec.parse(device)
                if is_local:
                    if current.job == ps.job:  # a worker's own variable on the ps
                        current = _without_job(current).replace(task=own_task)
                    target = worker.merge(current)
                else:
                    if current.job not in (None, ps.job):
                        current = _without_job(current)  # pinned to a worker
                    target = ps.replace(task=task).merge(current)
                wanted[position] = target.to_string()
        staying = self._staying_on_ps(graph, ordinary, ps.job, saver_scopes,
                                      {p for root in task_of_group for p in groups[root]},
                                      {p for root in shared for p in groups[root]})
        for position in ordinary:
            current = DeviceSpec.parse(devices[position])
            if ps.job is not None and current.job == ps.job and position not in staying:
                # a pipeline op pinned to the ps
                current = _without_job(current).replace(task=own_task)
            wanted[position] = worker.merge(current).to_string()
        return _Plan(wanted, load, set(shared.values()), local, local_roots)

    @staticmethod
    def _staying_on_ps(graph: GraphIndex, ordinary: list[int], ps_job: str | None,
                       saver_scopes: tuple[str, ...], on_ps_tasks: set[int],
                       shared_members: set[int]) -> set[int]:
        """The ordinary ops on the ps job that belong there: a `NoOp` (as `tf.group` leaves
        it: it computes nothing), a sharded Saver's op for its task, a `Const` that only ops
        staying on the ps read (`on_ps_tasks`: the members of the groups placed on a ps
        task), the ops that only feed a shared resource's ops (`shared_members`: the
        tokens SyncReplicasOptimizer's chief enqueues, computed beside its token queue), and
        the ops that only feed a variable's initializer (its initial value: run once, when
        the variables are initialized, never in a step)."""
        devices, kinds, names = graph.devices, graph.ops, graph.names
        on_ps = [p for p in ordinary if devices[p] and DeviceSpec.parse(devices[p]).job == ps_job]
        if not on_ps:
            return set()
        staying: set[int] = set()
        serving: set[int] = set()
        initial: set[int] = set()

        def stays(position: int) -> bool:
            return position in staying or position in on_ps_tasks

        # Latest first: an op's consumers come after it in graph order (loops aside, whose
        # back edges count as leaving the ps).
        for position in sorted(on_ps, reverse=True):
            kind = kinds[position]
            readers = [graph.position(n) for n in graph.successors(names[position])]
            if kind == "NoOp" or (saver_scopes and names[position].startswith(saver_scopes)):
                staying.add(position)
            elif kind == "Const" and readers and all(stays(r) for r in readers):
                staying.add(position)
            elif readers and all(r in shared_members or r in serving for r in readers):
                staying.add(position)
                serving.add(position)
            elif readers and all(r in initial or is_initializer(graph, r) for r in readers):
                staying.add(position)
                initial.add(position)
        return staying

    def _assign_tasks(self, graph, groups, tasks: int, strategy: str, local: set[int],
                      shared: dict[str, int], ps_job: str | None) -> dict[str, int]:
        """The ps task of each group that holds state on the ps: a global variable, another
        of the setter's ps ops, or a shared resource (`shared`: root -> its resource)."""
        kinds, names, devices = graph.ops, graph.names, graph.devices
        listed = graph.colocation_listed()
        root_of = {names[p]: root for root, positions in groups.items() for p in positions}
        variable_groups: dict[str, list] = {}
        for root, positions in groups.items():
            variables = [graph.node_at(p) for p in positions
                         if kinds[p] in VARIABLE_OPS and p not in local]
            if variables or root in shared or any(kinds[p] in _OTHER_PS_OPS for p in positions):
                variable_groups[root] = variables
        out: dict[str, int] = {}
        if strategy == "greedy":
            load = [0] * tasks
            order = sorted((r for r in variable_groups if variable_groups[r]),
                           key=lambda r: -sum(map(variable_bytes, variable_groups[r])))
            for root in order:
                task = min(range(tasks), key=load.__getitem__)
                out[root] = task
                load[task] += sum(map(variable_bytes, variable_groups[root]))
        else:
            # Round-robin, as TF: the counter moves for every ps op the device function
            # sees, in creation (graph) order; one made under `colocate_with` (an optimizer
            # slot, the local step) it never sees, and a group goes where its first one went.
            counter = 0
            for position in graph.positions_of(PS_OPS):
                root = root_of[names[position]]
                if root not in variable_groups or position in listed or position in local:
                    continue
                out.setdefault(root, counter % tasks)
                counter += 1
        # A shared resource goes with the variable it serves: a gradient accumulator with the
        # variable its aggregated gradient updates (SyncReplicasOptimizer builds it under
        # `tf.device(var.device)`), else (a token queue, a barrier) with the global step.
        step = global_step(graph)
        step_task = out.get(root_of[step]) if step is not None else None
        holding = {root for root, variables in variable_groups.items() if variables}
        for root, resource in shared.items():
            current = DeviceSpec.parse(devices[resource])
            if current.job == ps_job and current.task is not None:
                out[root] = current.task
                continue
            served = {out.get(root_of[reader]) for p in groups[root]
                      for reader, _, output in graph.consumers(names[p])
                      if output >= 0 and root_of[reader] in holding}
            served.discard(None)
            if len(served) == 1:
                out[root] = served.pop()
            elif step_task is not None:
                out[root] = step_task
            else:
                out.setdefault(root, 0)
        return out

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding | Edit]:
        plan = self.plan(graph, ctx)
        wanted = plan.wanted
        ps_job = DeviceSpec.parse(ctx.options["ps_device"]).job
        local = plan.local
        # (a worker's own variable is reported, not each node of its group)
        local_members = {p for root in plan.local_roots
                         for p in graph.colocation_groups()[root]} - local
        # The findings' fix, and more (devices merged on the right job, ops that named none):
        # the whole graph placed at once, as the setter does, reported as one change; the
        # one edit every finding carries (the driver makes a shared edit once). A graph
        # with no finding is left as it is: moving only what names no device (an `init`, a
        # Saver's ops) fixes nothing and would rewrite a correct graph.
        edit = partial(self._place, wanted, plan.load, ctx)
        for position in sorted(wanted):
            target, device = wanted[position], graph.devices[position]
            spec, target_spec = DeviceSpec.parse(device), DeviceSpec.parse(target)
            name, op = graph.names[position], graph.ops[position]
            if position in plan.shared:
                if spec.job == ps_job and spec.task is not None:
                    continue
                shared_name = graph.node_at(position).attr["shared_name"].s.decode(
                    "utf-8", "replace")
                why = (f"{op} {name} is shared by the workers (shared_name {shared_name!r}) "
                       f"but is on {device or 'no device'}, not a ps task: each worker "
                       f"would get its own, and they no longer synchronize")
            elif spec.job == target_spec.job or position in local_members:
                continue
            elif op in VARIABLE_OPS and position in local:
                why = (f"variable {name} is each worker's own (a local variable) but is on "
                       f"{device}, where every worker would share it")
            elif op in VARIABLE_OPS:
                why = (f"variable {name} is on {device or 'no device'}, not a ps task: "
                       f"each worker trains its own copy")
            elif spec.job == ps_job:
                why = (f"{op} {name} runs on the parameter server ({device}); "
                       f"pipeline ops belong on the worker")
            else:
                continue
            yield Finding(ctx.path, self.name, f"{why} (moves to {target})", node=name,
                          severity="warning", edit=edit)

    def _place(self, wanted: dict[int, str], load: dict[int, int], ctx: Context,
               graph: GraphIndex) -> list[Change]:
        moved = [p for p in sorted(wanted) if graph.set_device(p, wanted[p])]
        if not moved:
            return []
        by_task = ", ".join(f"task {k}: {v} bytes" for k, v in sorted(load.items()))
        return [Change(ctx.path, self.name,
                       f"placed {len(moved)} node(s) as replica_device_setter would; "
                       f"ps bytes: {by_task}",
                       details={"ps_bytes": {str(k): v for k, v in sorted(load.items())},
                                "nodes": len(moved)})]
