"""variables-to-cpu: variables pinned to a GPU that cannot (or should not) hold them.

The bug (seed 000)::

    with tf.device("/gpu:0"):
        d = tf.Variable(2)          # int32: VariableV2 has no GPU kernel for int32

    InvalidArgumentError: Cannot assign a device for operation Variable_2: Could not satisfy
    explicit device specification '/device:GPU:0' because no supported kernel for GPU
    devices is available.

Even where a GPU kernel exists, variables that towers on several GPUs share belong on the
CPU (or a parameter server) — the `_variable_on_cpu` idiom of TF's CIFAR-10 multi-GPU
example. A single-GPU model's float variables are right where they are (on the CPU, each
step would copy every weight to the GPU): no finding.

Found: in a graph, what TF's placer would refuse, group by group, and the variables towers
share. TF's placer puts a whole colocation group on one device, so the group is the unit: a
variable, its initializer `Assign`, its `read`, the optimizer's `ApplyAdam`, anything
`colocate_with` it (or joined to it by a ref or resource edge). A group whose device type
has no kernel for one of its members is an error with TF's own message, whatever its ops
(variables, summaries, Saver ops, `tf.print`, hash tables, string `Const`s, queues), in the
main graph and in every function body the graph calls (a `While` body, a `tf.function`;
a body node asks for its call site's device, as TF's inliner gives it). A real conflict of
requested devices is an error too, its members still checked; a device the target devices
(`--target-devices`) do not have is one (one per missing device; each of its groups that
would also find no kernel there is its own error besides). The variable groups that place
on a GPU and that towers on two or more GPUs read (consumers of the variable's value, read
directly, through its `read` or a `ReadVariableOp`, that ask for different GPUs) are one
warning per GPU (a tower pattern: towers share the variables tower 0 made), with their
count. An `Assign` that copies the value into another variable is no tower's read: it runs
once, to start replicated training's per-tower copies equal (`Assign(v1/w, v0/w/read)`,
tf_cnn_benchmarks' `replicated` mode) or to initialise one variable from another.
Where the graph's session is known to place it with `allow_soft_placement=True` (a traced
script: `Context.soft_placement`), a group TF would refuse only for want of a GPU kernel is
moved to the CPU by TF's placer and runs: a non-variable group (a summary) is no finding, a
variable group is a warning that says soft placement moves it (`placement.problems`).
Variable ops: Variable, VariableV2, VarHandleOp, AutoReloadVariable, the mutable hash tables;
optimizer slots are variables too.

Fixed, in one pass: each shared GPU variable group and each group without a kernel on its
GPU moves to the CPU of the same job/replica/task; only members that ask for a device are
touched (`/job:worker/task:1/device:GPU:0` -> `/job:worker/task:1/device:CPU:0`); in a
function body every member of the group asks for `/device:CPU:0` (each call fills in its
task). A group moves only where every member has a kernel: one with a member that has no
CPU kernel (a cuDNN RNN's opaque parameters colocated with `CudnnRNNCanonicalToParams`) is
reported, with those members named, not moved. A conflict of GPU ids in a variable's group
(a gradient `_class`-pinned to tower 1's gather of a variable tower 0 made: "incompatible
ids") moves whole to the task's CPU, as the shared-variables move would; any other conflict,
or a compute group on a GPU the targets lack, is reported, not moved.

Parameters:
    scope: `all` (default) as above; `every-gpu-variable` as `all`, and every variable
        group on a GPU is a warning and moves too, towers or not (the CIFAR-10 idiom applied
        to a single-GPU model: its variables on the CPU, a copy to the GPU each step);
        `variables` moves the variable groups only (and does not look into function
        bodies); `no-kernel` moves only the groups without a kernel on their device and
        leaves float variables where they are.

In source: variables created under a GPU `tf.device` scope (a literal, a string built
at run time, `'/gpu:%d' % i`, a device looped over from a literal list, or a `tf.DeviceSpec`:
`DeviceSpec(device_type="GPU", device_index=i)`; a spec naming only a job keeps the outer
GPU), directly or
through the project's functions, methods and classes called there (a library module, Sonnet
1.x's `snt.Linear(...)`, makes its variables at its first call, where it is connected;
its later calls reuse them), are placed on the CPU:
a statement that only creates
variables moves into `with tf.device("/cpu:0"):`; a layer call, which also computes, gets
a scope that places only its variables (slim's `arg_scope(..., device=...)`, else a device
function), so its compute stays on the GPU. Same errors as the graph surface, and the same
`scope`: by default its warnings are the float variables of tower code (the project's
reading, shared with shared-variables: a loop that builds a tower per pass, a tower
function's device scope built at run time, what they call; besides, a function's first
call before its tower loop, a file that names more than one fixed GPU), and a single-GPU
script's float variables are no finding, as `check --trace` of it finds none (nor those of a function on one fixed GPU beside the
towers: a script's `train` beside its `train_multi_gpu`; nor those of one model split into
stages over fixed GPUs, no function called under two of them and no GPU chosen at run time:
encoders under `tf.device('/gpu:0')`, decoders under `tf.device('/gpu:1')`, each stage's
variables read on its own GPU; nor those of a learner's one GPU inside a CPU device built
at run time, `local_job_device + '/cpu'`, or beside a loop whose device scopes name only
jobs and tasks, actors enqueueing under `tf.device(shared_job_device)`: deepmind's
scalable_agent);
`every-gpu-variable` finds every variable under a GPU scope, `no-kernel` only the errors.
A device function of the file (or a lambda given to the scope) that pins op type
`"Variable"` only (TF 0.x's op: TF 1.x makes `VariableV2`) gives the variables the GPU it gives the compute: they are findings, and the
fix widens the function's own test to `VariableV2` and `VarHandleOp` (an inner scope cannot
win over an outer device function, which TF applies last); one another module of the
project defines is a finding, not fixed. A device held in a name bound once, or whose type
is a flag's default (`"/{}:{}".format(config.device_type, i)`), is read as its value, and so
is a template a name holds, filled in at the scope (`device_string % i` after
`device_string = '/gpu:%d'`, `template.format(i)`), or a list of GPU names another module's
function returns (`available_gpus[i]`); a tower whose `reuse_variables()` runs only `if i
> 0` creates in its first pass; a conditional between one fixed GPU and the CPU
(`'/gpu:0' if variable_strategy == 'GPU' else '/cpu:0'`, TF's cifar10_estimator) is the
user's setting, no finding; an RNN run by `tf.nn.dynamic_rnn`, `bidirectional_dynamic_rnn` or
`static_rnn` makes its cells' kernels there, as a layer does (mozilla/DeepSpeech's BiRNN),
and so does a model function of tf-slim's nets (`resnet_v1.resnet_v1_50(images)`, from
`tf_slim.nets` or `tf.contrib.slim.nets`); a device looped over through `enumerate` and `zip`
(`for i, (device, x) in enumerate(zip(DEVICES, inputs))`) is read from the list it takes,
and one looped over from an attribute its class binds once (`for dev in self.devices`
after `self.devices = get_available_gpus()`) from that value; a name assignments bind to
the project's functions (`inference, loss = resnet, resnet_loss` in a flag's branch) calls
any of them, and a tower's call reaching a method called on such an attribute
(`self._model.compute_loss(x)` after `self._model = LaneNet(cfg)`) makes its variables,
a name unpacked from a factory returning functions (`Generator, Discriminator =
GeneratorAndDiscriminator()`) calls them, and a function whose every variable comes from a
get-or-create cache (`if name not in _params:`, tflib's `lib.param`) creates them at its
first call only, later calls spelled alike in the same function getting them back; a tower's own state (`tf.Variable`, `trainable=False`, in LOCAL_VARIABLES) is no finding, as
the graph surface finds none. A function given as a parameter and called in a tower under
a variable scope that reuses from the second pass on (`reuse=i > 0`), the one call there
that could make variables, makes the towers' shared variables on the first tower's GPU
(vahidk/TensorflowFramework's `make_parallel(model_fn, ...)`). A tower's get_variable calls
under a context manager of the project that rebinds `tf.get_variable` to a getter opening a
fixed GPU's device scope (`ops.variables_on_gpu0()`: brain-research/self-attention-gan) make
the shared variables on that GPU: found, not fixed (the getter's scope is innermost when a
variable is made; the context manager is what to change).
Nor is a float `tf.Variable` that every pass of a tower loop makes anew and keeps to itself
(NVlabs/stylegan2's per-tower data buffers; one made in the first pass only, `if w is
None:`, is found), nor is any variable under a scope whose GPU is chosen at run time from
names the module binds once and entered in no loop (`tf.device('/gpu:' + str(FLAGS.gpu))`:
one GPU, the flag's). A tower loop over a module constant of one GPU (`num_gpus = 1`) is
still tower code: the constant is the script's setting, and authors who ran such a script
on several GPUs fixed it (lomyal/simple-word-embedding 5987ecf). See
`VariablesToCpuCodemod`.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Iterator

from graphfix.graph import placement
from graphfix.findings import Change, Finding
from graphfix.graph.index import VARIABLE_OPS, GraphIndex
from graphfix.registry import Context, Param, Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import DEVICE_CALLS

if TYPE_CHECKING:
    from graphfix.source.syntax import Syntax


def _on_gpu(group: placement.Group) -> bool:
    spec = group.requested
    return spec is not None and (spec.device_type or "").upper() == "GPU"


def _details(problem: placement.PlacementProblem) -> dict:
    """A placement finding's details: the problem's kind, the node TF names, the device its
    group asks for, the members with no kernel there, the group's size (and, for a
    function's body, the function and its caller)."""
    group = problem.group
    details = {"kind": problem.kind, "node": problem.node,
               "device": group.requested.to_string() if group.requested else None,
               "no_kernel": [n.name for n in problem.no_kernel],
               "group_size": len(group.members)}
    if isinstance(group, placement.BodyGroup):
        details.update(function=group.function, called_by=group.caller)
    return details


def _gpu_device_scope(syntax: Syntax) -> bool:
    """Whether a `with ...device(...)` is given a GPU string, or a name a `for` loop binds
    over a literal list or tuple that spells a GPU string (`for d in ["/gpu:0", "/gpu:1"]`,
    `for i, d in enumerate(gpus)` with `gpus = [...]` in the file, or a comprehension
    spelling one; through `zip` too): this transform's
    pre-check, as loose as the codemod's reading of a device (`_device_templates`), no
    looser (a loop over devices computed at run time, as most of TensorFlow's own
    distribution code has, is no GPU the codemod can see). Only a block whose body calls
    something counts: variables are made by calls."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.syntax import call_arguments, strings_in, tail_name

    def spells_gpu(node: ast.AST) -> bool:
        return any("gpu" in text.lower() for text in strings_in(node))

    listed = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)

    def gpu_list(iterable: ast.expr) -> bool:
        if isinstance(iterable, ast.Name):
            return any(isinstance(value, listed) and spells_gpu(value)
                       for value in syntax.assigned.get(iterable.id, ()))
        return isinstance(iterable, listed) and spells_gpu(iterable)

    def looped(target: ast.expr, iterable: ast.expr) -> Iterator[tuple[str, ast.expr]]:
        """(name, the list whose items it takes) for each name of a loop target, through
        `enumerate` and `zip` (`for i, (d, x) in enumerate(zip(gpus, xs))`: d, gpus)."""
        if isinstance(target, ast.Name):
            yield target.id, iterable
            return
        if not (isinstance(target, ast.Tuple) and isinstance(iterable, ast.Call)
                and isinstance(iterable.func, ast.Name) and not iterable.keywords):
            return
        if iterable.func.id == "enumerate" and len(target.elts) == 2 and len(
                iterable.args) == 1:
            yield from looped(target.elts[1], iterable.args[0])
        elif iterable.func.id == "zip":
            for element, given in zip(target.elts, iterable.args):
                yield from looped(element, given)

    def looped_over_gpus() -> set[str]:  # the names loops bind to a listed GPU device
        return {name for node in ast.walk(syntax.tree) if isinstance(node, ast.For)
                for name, iterable in looped(node.target, node.iter) if gpu_list(iterable)}

    def looped_over_attributes() -> set[str]:
        # (`for i, d in enumerate(self.devices)`: the codemod reads what the class
        # assigns the attribute once, `_attribute_bound_once`)
        return {name for node in ast.walk(syntax.tree) if isinstance(node, ast.For)
                for name, iterable in looped(node.target, node.iter)
                if isinstance(iterable, ast.Attribute) and isinstance(iterable.value, ast.Name)}

    def calls_in(block: ast.With | ast.AsyncWith) -> bool:  # what could create a variable
        return any(isinstance(node, ast.Call)
                   for statement in block.body for node in ast.walk(statement))

    scopes = [item.context_expr for block in syntax.withs if calls_in(block)
              for item in block.items
              if isinstance(item.context_expr, ast.Call)
              and tail_name(item.context_expr.func) == "device"]
    if any(not isinstance(arg, ast.Name) and (spells_gpu(arg) or _types_at_run_time(arg))
           or _imported_function(syntax, arg)
           for call in scopes for arg in call_arguments(call)):
        return True
    named = {arg.id for call in scopes for arg in call_arguments(call)
             if isinstance(arg, ast.Name)}
    if named & _bound_to_gpus(syntax) or _read_through_names(syntax, scopes):
        return True
    return bool(named) and bool(named & (looped_over_gpus() | looped_over_attributes()))


def _read_through_names(syntax: Syntax, scopes: list) -> bool:
    """Whether a device scope is given an item of a list (`available_devices[i]`), a
    name some assignment binds to one, to another name or to a conditional expression,
    or a template a name holds filled in there (`device_string % i`, `template.format(i)`,
    the name bound to a string naming a GPU): the codemod reads the devices such a list
    or name may hold (`codemod.DeviceValues`), from a function of the project or the
    local devices' names too."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.syntax import call_arguments, strings_in

    through = (ast.Subscript, ast.Name, ast.IfExp)
    for call in scopes:
        for arg in call_arguments(call):
            if isinstance(arg, ast.Subscript) or isinstance(arg, ast.Name) and any(
                    isinstance(value, through) for value in syntax.assigned.get(arg.id, ())):
                return True
            held = (arg.left if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod)
                    else arg.func.value if isinstance(arg, ast.Call)
                    and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format"
                    else None)
            if isinstance(held, ast.Name) and any(
                    "gpu" in text.lower() for value in syntax.assigned.get(held.id, ())
                    for text in strings_in(value)):
                return True
    return False


# A device string whose device type is a field filled at run time (`"/{}:{}"`, `"/%s:%d"`).
_TYPE_FIELD = re.compile(r"(^|/)(device:)?(\{[^{}]*\}|%[-#0 +]*\w)(:|$)")


def _types_at_run_time(node: ast.AST) -> bool:
    """Whether a device argument is a string whose device type is filled in at run time:
    the codemod reads a flag's default there (`"/{}:{}".format(config.device_type, i)`)."""
    from graphfix.source.syntax import strings_in

    return any(_TYPE_FIELD.search(text) for text in strings_in(node))


def _imported_function(syntax: Syntax, node: ast.AST) -> bool:
    """Whether a device argument is a name imported from outside TF, or a call of one
    (`assign_to_gpu(i)` after `from common import assign_to_gpu`): a device function the
    codemod may read in another file of the project."""
    import ast  # (here: a run over graphs never parses source)

    called = node.func if isinstance(node, ast.Call) else node
    while isinstance(called, ast.Attribute):
        called = called.value
    return (isinstance(called, ast.Name) and called.id in syntax.imports
            and not syntax.imports[called.id].startswith("tensorflow"))


def _bound_to_gpus(syntax: Syntax) -> set[str]:
    """The names some assignment of the file binds to a GPU string (`gpu_name = "/gpu:" +
    str(i)`): a device given through such a name may be the GPU (the codemod reads a name
    bound once in its scope, `codemod.device_asked`)."""
    from graphfix.source.syntax import strings_in

    return {name for name, values in syntax.assigned.items()
            if any("gpu" in text.lower() for value in values for text in strings_in(value))}


# The members whose outputs are a variable's value: the variable, its `read`, a
# `ReadVariableOp` (an `Assign`'s output, an initial value's `Const` are not read by towers).
_GIVES_THE_VALUE = VARIABLE_OPS | {"Identity", "ReadVariableOp"}


# What writes its second input's value into the variable its first input names.
_ASSIGNS = frozenset({"Assign", "AssignVariableOp"})


def _copies_into_another(op: str, read: list[str], source: str) -> bool:
    """Whether a reader that takes `source`'s value only copies it into another variable
    (`Assign(v1/w, v0/w/read)`): replicated training's one-time sync of the towers' copies
    (tf_cnn_benchmarks' post-init ops), an initial value taken from another variable. It
    runs once, not in each step, and shares no variable between GPUs: each copy stays its
    own tower's."""
    return op in _ASSIGNS and len(read) == 2 and read[0] != source and read[1] == source


def _read_on_several_gpus(graph: GraphIndex, groups: list[placement.Group]) -> set[int]:
    """The ids of the `groups` whose variables' value towers on two or more GPUs read: the
    consumers outside the group of its variable, `read` or `ReadVariableOp` members, and
    the members that joined it only by reading its handle (a tower's `ReadVariableOp`),
    ask for different GPUs (a copy into another variable, `_copies_into_another`, is no
    tower's read). The reason the CIFAR-10 multi-GPU recipe puts variables on the
    CPU; a single-GPU model's variables are read on one. One pass over the nodes that ask
    for a GPU (a group at a time asks the index for each member's readers: several times
    slower on a graph of many small groups)."""
    devices, names, ops = graph.devices, graph.names, graph.ops
    joined = graph.handle_joined()
    member_of: dict[int, int] = {}  # position -> its group's number
    givers: dict[int, int] = {}  # position of a value-giving member -> its group's number
    seen: list = [None] * len(groups)  # each group's first GPU found reading
    several: set[int] = set()
    for number, group in enumerate(groups):
        for position in group.positions:
            member_of[position] = number
            if ops[position] in _GIVES_THE_VALUE:
                givers[position] = number
            if position in joined and devices[position]:
                gpu = _GPU_OF[devices[position]]
                if gpu is not None and seen[number] not in (None, gpu):
                    several.add(number)
                seen[number] = seen[number] or gpu
    if givers:
        sources = graph.sources
        for reader, device in enumerate(devices):
            gpu = _GPU_OF[device] if device else None
            if gpu is None:
                continue
            for source in sources(reader):
                number = givers.get(source)
                # (a reader's inputs are parsed only where its GPU is news to the group: a
                # control edge reads no value)
                if (number is None or seen[number] == gpu or number in several
                        or member_of.get(reader) == number):
                    continue
                read = [name for name, _ in graph.data_inputs(names[reader])]
                if names[source] not in read or _copies_into_another(ops[reader], read,
                                                                     names[source]):
                    continue
                if seen[number] is None:
                    seen[number] = gpu
                else:
                    several.add(number)
    return {id(groups[number]) for number in several}


class _GpuNames(dict):
    """Device string -> the GPU it names, as (job, task, index) (a local process's
    `localhost`, task 0 as unset), or None for a device that is no GPU."""

    def __missing__(self, device: str) -> tuple | None:
        from graphfix.graph.devices import DeviceSpec

        spec = DeviceSpec.parse(device)
        gpu = None
        if (spec.device_type or "").upper() == "GPU":
            local = spec.job in (None, "localhost")
            gpu = (None if local else spec.job, None if local and not spec.task else spec.task,
                   spec.device_index or 0)
        self[device] = gpu
        return gpu


_GPU_OF = _GpuNames()


class _CpuTwins(dict):
    """Device string -> the CPU of the same job/replica/task, worked out once per string."""

    def __missing__(self, device: str) -> str:
        from graphfix.graph.devices import DeviceSpec

        twin = DeviceSpec.parse(device).replace(device_type="CPU", device_index=0).to_string()
        self[device] = twin
        return twin


_CPU_OF = _CpuTwins()


class VariablesToCpu(Transform):
    name = "variables-to-cpu"
    summary = "move variables, and whatever has no kernel on its GPU, onto the CPU"
    params = (
        Param(
            "scope",
            "all",
            "all: the variable groups towers on several GPUs read and every group without "
            "a kernel on its device; every-gpu-variable: as all, and every other variable "
            "group on a GPU too (a single-GPU model's); variables: the variable groups only; "
            "no-kernel: only the groups without a kernel (float variables stay)",
            choices=("all", "every-gpu-variable", "variables", "no-kernel"),
        ),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:VariablesToCpuCodemod"
    # A `with ...device(...)` given a GPU string: the only scopes the codemod moves
    # variables out of (GPU templates: '/gpu:0', '/device:GPU:%d' % i, f"/gpu:{i}", and the
    # names and lists `_read_through_names` lets through) whose body calls something:
    # variables are made by calls (TF's own `with device("/gpu:0"): yield` makes none). A
    # call list cannot say "given a GPU string in a with item", hence the predicate.
    source_triggers = SourceTriggers(calls=DEVICE_CALLS, all_of=(("gpu", "GPU", "Gpu"),),
                                     where=_gpu_device_scope)

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        """An error for each group TF cannot place (in the main graph and in the function
        bodies it calls; a group that also asks for a device the targets lack is both); one
        warning per GPU for the variable groups towers on several GPUs read (a tower
        pattern: one finding, a count), each that cannot move to the CPU a warning of its
        own that says why."""
        scope, targets = ctx.options["scope"], ctx.target_devices
        every = placement.groups(graph, variables_only=scope == "variables")
        # The variable groups that move whatever TF's registry says of their GPU: shared by
        # towers (or, with scope every-gpu-variable, any on a GPU). Each moves only where
        # every member has a CPU kernel; one that cannot (a cuDNN RNN's opaque parameters
        # beside ops with GPU kernels only) stays, said so.
        on_gpu = [g for g in every if scope != "no-kernel" and g.holds_variable and _on_gpu(g)]
        shared = (_read_on_several_gpus(graph, on_gpu) if scope != "every-gpu-variable"
                  else set(map(id, on_gpu)))
        moving = {id(g): g for g in on_gpu if id(g) in shared}
        stuck = {key: lacking for key, g in moving.items()
                 if (lacking := placement.lacking_kernels(g, "CPU", graph))}
        # TF's registry is asked about the GPU of every group but those that move anyway,
        # unless the findings' words (`explain`: `check`, not `fix`) or the target devices
        # need it.
        asked = [g for g in every if id(g) not in moving or id(g) in stuck
                 or ctx.explain or targets]
        problems = {id(p.group): p for p in placement.problems(
            graph, asked, targets=targets, functions=scope != "variables",
            soft_placement=ctx.soft_placement)}
        body_problems = [p for p in problems.values() if isinstance(p.group, placement.BodyGroup)]
        without_kernel = self._without_kernel(
            [p for p in problems.values() if p.kind == "no-device"], graph, ctx)
        warned: dict[str, list[placement.Group]] = {}  # requested GPU -> its variable groups
        missing: dict[str, list[placement.PlacementProblem]] = {}  # device -> its groups
        for group in every:
            problem = problems.get(id(group))
            if problem is not None and problem.kind == "no-device":
                missing.setdefault(group.requested.to_string(), []).append(problem)
                problem = without_kernel.get(id(group))
            if problem is not None and not problem.refused:  # (soft placement moves it)
                if group.holds_variable:
                    yield self._soft_placed(problem, ctx)
                continue
            if problem is not None:
                yield self._error(problem, graph, ctx)
                continue
            if id(group) in stuck:
                yield self._stuck(group, stuck[id(group)], scope, ctx)
            elif id(group) in moving:
                warned.setdefault(group.requested.to_string(), []).append(group)
        for problem in body_problems:
            if problem.kind == "no-device":
                missing.setdefault(problem.group.requested.to_string(), []).append(problem)
                problem = without_kernel.get(id(problem.group))
                if problem is None:
                    continue
            if not problem.refused:
                if problem.group.holds_variable:
                    yield self._soft_placed(problem, ctx)
            else:
                yield self._error(problem, graph, ctx)
        for device, lacking in missing.items():
            yield self._missing_device(device, lacking, graph, ctx)
        for requested, groups in warned.items():
            names = [g.anchor for g in groups[:3]]  # (the message names three)
            listed = ", ".join(names) + (", ..." if len(groups) > 3 else "")
            what = (f"variable {names[0]} is" if len(groups) == 1
                    else f"{len(groups)} variables ({listed}) are")
            why = (f"scope {scope} puts every variable on the CPU"
                   if scope == "every-gpu-variable" else
                   "towers on several GPUs read them; shared variables belong on the CPU")
            yield Finding(ctx.path, self.name,
                          f"{what} placed on {requested}; {why} (their groups, "
                          f"{sum(len(g.positions) for g in groups)} node(s), move to "
                          f"{_CPU_OF[requested]})",
                          node=names[0], severity="warning",
                          edit=partial(self._move_to_cpu, groups, requested, ctx))

    def _without_kernel(self, no_device: list[placement.PlacementProblem], graph: GraphIndex,
                        ctx: Context) -> dict[int, placement.PlacementProblem]:
        """Of the groups that ask for a device the target devices lack, those that would
        also find no kernel on it (a string summary on the missing /gpu:2): id(group) ->
        that problem, TF's error on a machine that has the device."""
        if not no_device:
            return {}
        main = [p.group for p in no_device if not isinstance(p.group, placement.BodyGroup)]
        found = placement.problems(graph, main, functions=False,
                                   soft_placement=ctx.soft_placement)
        bodies = {(p.group.function, p.group.first.name) for p in no_device
                  if isinstance(p.group, placement.BodyGroup)}
        if bodies:
            found += [p for p in placement.body_problems(graph, (), ctx.soft_placement)
                      if (p.group.function, p.group.first.name) in bodies]
        by_body = {(p.group.function, p.group.first.name): p for p in found
                   if isinstance(p.group, placement.BodyGroup)}
        out = {id(p.group): p for p in found if not isinstance(p.group, placement.BodyGroup)}
        out.update((id(p.group), by_body[key]) for p in no_device
                   if isinstance(p.group, placement.BodyGroup)
                   and (key := (p.group.function, p.group.first.name)) in by_body)
        return out

    def _stuck(self, group: placement.Group, lacking: list, scope: str,
               ctx: Context) -> Finding:
        """A variable group that would move to the CPU but has members with no CPU kernel."""
        requested = group.requested.to_string()
        why = (f"scope {scope} puts every variable on the CPU" if scope == "every-gpu-variable"
               else "towers on several GPUs read it; shared variables belong on the CPU")
        return Finding(ctx.path, self.name,
                       f"variable {group.anchor} is placed on {requested}; {why}, but its "
                       f"group cannot move there: no CPU kernel for: "
                       f"{'; '.join(map(placement.describe_member, lacking))}; group of "
                       f"{len(group.positions)}",
                       node=group.anchor, severity="warning",
                       details={"kind": "no-cpu-kernel", "node": group.anchor,
                                "device": requested,
                                "no_kernel": [n.name for n in lacking],
                                "group_size": len(group.positions)})

    def _missing_device(self, device: str, lacking: list[placement.PlacementProblem],
                        graph: GraphIndex, ctx: Context) -> Finding:
        """One error for the groups that ask for a device the target devices lack (a tower
        on /gpu:3 of a 2-GPU machine), with TF's message for the first. Re-placing compute
        is the user's choice; shared variable groups among them move as the others do, and a
        group that would also find no kernel there has its own error (`_without_kernel`)."""
        first = placement.first_refused(lacking, graph)
        nodes = sum(len(p.group.members) for p in lacking)
        return Finding(ctx.path, self.name,
                       f"{first.message} ({len(lacking)} group(s), {nodes} node(s), ask for "
                       f"{device}, which the target devices do not have)",
                       node=first.group.anchor, severity="error",
                       details={"kind": "no-device", "node": first.node, "device": device,
                                "groups": [p.group.anchor for p in lacking],
                                "no_kernel": []})

    def _error(self, problem: placement.PlacementProblem, graph: GraphIndex,
               ctx: Context) -> Finding:
        """TF's error for a group it cannot place, with the move that places it where there
        is one: a group on a GPU goes to that task's CPU if every member has a kernel there.
        A conflict or a group that lacks a kernel on the CPU too is the user's to resolve
        (the message names the members the CPU has no kernel for)."""
        group = problem.group
        towers_gpu = self._shared_across_gpus(group) if problem.kind == "conflict" else None
        movable = (_on_gpu(group) and problem.kind == "no-kernel") or towers_gpu is not None
        detail = placement.explain(problem)
        if movable:
            requested = towers_gpu or group.requested.to_string()
            lacking = placement.lacking_kernels(group, "CPU", graph)
            if lacking:
                movable = False
                also = (f"it cannot move to the CPU either: no CPU kernel for: "
                        f"{'; '.join(map(placement.describe_member, lacking))}")
            else:
                also = f"fix moves it to {_CPU_OF[requested]}"
            detail = f"{detail}; {also}" if detail else also
        message = f"{problem.message} ({detail})" if detail else problem.message
        edit = None
        if movable:
            edit = (partial(self._move_to_cpu, [group], towers_gpu, ctx) if towers_gpu
                    else self._move_off_gpu(group, ctx))
        return Finding(ctx.path, self.name, message, node=group.anchor, severity="error",
                       edit=edit, details=_details(problem))

    def _shared_across_gpus(self, group) -> str | None:
        """For a main-graph variable group whose members ask for GPUs of different ids in one
        task (towers reading a variable tower 0 made, a gradient pinned by `_class` to its
        tower's gather of it: TF's "incompatible ids"), the first GPU asked for, else None.
        Such a group is what the shared-variables move puts on the task's CPU whole, where
        no member's GPU matters; the caller checks every member has a CPU kernel there."""
        if isinstance(group, placement.BodyGroup) or not group.holds_variable:
            return None
        asked = [device for device in map(group.asked_by, group.members) if device]
        if not asked or any(_GPU_OF[device] is None for device in asked):
            return None
        return asked[0] if len({_CPU_OF[device] for device in asked}) == 1 else None

    def _soft_placed(self, problem: placement.PlacementProblem, ctx: Context) -> Finding:
        """A variable group with no kernel on its GPU that the session's soft placement
        moves to the CPU: it works, but it is the known pattern (a variable the placer
        silently moves; towers' copies), a warning, fixed as `_error` fixes it."""
        group = problem.group
        requested = group.requested.to_string()
        detail = placement.explain(problem)
        message = (f"variable {group.anchor} asks for {requested}, which has no kernel for "
                   f"its group ({detail}); the session's allow_soft_placement moves it to the "
                   f"CPU, so it runs, but not where the graph says (fix moves it to "
                   f"{_CPU_OF[requested]})")
        return Finding(ctx.path, self.name, message, node=group.anchor, severity="warning",
                       edit=self._move_off_gpu(group, ctx),
                       details={**_details(problem), "soft_placement": True})

    def _move_off_gpu(self, group: "placement.Group | placement.BodyGroup", ctx: Context):
        """The edit that moves a group on a GPU to that task's CPU (in the main graph or in
        a function's body)."""
        move = (self._move_body_to_cpu if isinstance(group, placement.BodyGroup)
                else self._move_to_cpu)
        return partial(move, [group], group.requested.to_string(), ctx)

    def _move_to_cpu(self, groups: list[placement.Group], requested: str, ctx: Context,
                     graph: GraphIndex) -> list[Change]:
        after = _CPU_OF[requested]
        names, changes = graph.names, []
        bodies = placement.body_members_by_root(graph)  # (members in branch bodies move too)
        for group in groups:
            moved = [names[p] for p in graph.set_devices(group.positions, _CPU_OF)]
            moved += placement.move_body_members(graph, group.positions, bodies, _CPU_OF, after)
            if moved:
                changes.append(self._moved(ctx, group.anchor, requested, after, moved))
        return changes

    def _move_body_to_cpu(self, groups: list[placement.BodyGroup], requested: str,
                          ctx: Context, graph: GraphIndex) -> list[Change]:
        """Each member of a function body's group asks for the CPU itself; one that named
        no device says only `/device:CPU:0`, so every call still fills in its own task."""
        after = _CPU_OF[requested]
        changes = []
        for group in groups:
            moved = []
            for node in group.members:
                device = _CPU_OF[node.device] if node.device else "/device:CPU:0"
                if node.device != device:
                    node.device = device
                    moved.append(f"{group.function}/{node.name}")
            if moved:
                changes.append(self._moved(ctx, group.anchor, requested, after, moved))
        return changes

    def _moved(self, ctx: Context, anchor: str, requested: str, after: str,
               nodes: list[str]) -> Change:
        return Change(ctx.path, self.name,
                      f"moved {len(nodes)} node(s) of {anchor}'s colocation group from "
                      f"{requested} to {after}",
                      node=anchor, details={"from": requested, "to": after, "nodes": nodes})
