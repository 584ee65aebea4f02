"""variables-to-cpu: variables pinned to a GPU that cannot (or should not) hold them.

The bug (seed 000)::

    with tf.device("/gpu:0"):
        d = tf.Variable(2)          # int32: VariableV2 has no GPU kernel for int32

    InvalidArgumentError: Cannot assign a device for operation Variable_2: Could not satisfy
    explicit device specification '/device:GPU:0' because no supported kernel for GPU
    devices is available.

Even where a GPU kernel exists, multi-GPU towers share their variables, and the variables
belong on the CPU (or a parameter server) — the `_variable_on_cpu` idiom of TF's CIFAR-10
multi-GPU example.

Found: in a graph, every colocation group holding a variable op (Variable, VariableV2,
VarHandleOp, AutoReloadVariable, the mutable hash tables; optimizer slots are variables too)
whose requested device is a GPU. TF's placer puts a whole group on one device, so the
group is the unit: the variable, its initializer `Assign`, its `read`, the optimizer's
`ApplyAdam`, anything `colocate_with` it. A group with no kernel on its device is an error
(TF's own message); the others on one GPU are one warning (a tower pattern: towers share the
variables tower 0 made), with their count.

Fixed: each such group moves to the CPU of the same job/replica/task; only members that ask
for a device are touched (`/job:worker/task:1/device:GPU:0` -> `/job:worker/task:1/device:CPU:0`).

Parameters:
    scope: `variables` (default) moves every variable group off the GPU; `no-kernel` moves
        any group, variable or not, that has no kernel on its device (e.g. Saver's
        `ShardedFilename` pinned to a GPU) and leaves float variables where they are.

In source: variables created under a GPU `tf.device` scope (a literal or a string built
at run time, `'/gpu:%d' % i`) are placed on the CPU: a statement that only creates
variables moves into `with tf.device("/cpu:0"):`; a layer call, which also computes, gets
a scope that places only its variables (slim's `arg_scope(..., device=...)`, else a device
function), so its compute stays on the GPU. Same errors and warnings as the graph surface;
see `VariablesToCpuCodemod`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterator

from graphfix.graph import placement
from graphfix.findings import Change, Finding
from graphfix.graph.index import GraphIndex
from graphfix.registry import Context, Param, Transform
from graphfix.source.prefilter import SourceTriggers
from graphfix.source.vocabulary import DEVICE_CALLS

if TYPE_CHECKING:
    from graphfix.source.syntax import Syntax


def _on_gpu(group: placement.Group) -> bool:
    spec = group.requested
    return spec is not None and (spec.device_type or "").upper() == "GPU"


def _gpu_device_scope(syntax: Syntax) -> bool:
    """Whether a `with ...device(...)` is given a GPU string (this transform's pre-check)."""
    import ast  # (here: a run over graphs never parses source)

    from graphfix.source.syntax import call_arguments, strings_in, tail_name

    return any(isinstance(item.context_expr, ast.Call)
               and tail_name(item.context_expr.func) == "device"
               and any("gpu" in text.lower() for arg in call_arguments(item.context_expr)
                       for text in strings_in(arg))
               for block in syntax.withs for item in block.items)


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
    summary = "move variables (with their colocation groups) off the GPU onto the CPU"
    params = (
        Param(
            "scope",
            "variables",
            "variables: every variable group on a GPU; no-kernel: any group without a kernel there",
            choices=("variables", "no-kernel"),
        ),
    )
    # The source surface lives in source.py, loaded on first use (libcst is slow to
    # import and the graph path never needs it).
    codemod = ".source:VariablesToCpuCodemod"
    # A `with ...device(...)` given a GPU string: the only scopes the codemod moves
    # variables out of (GPU templates: '/gpu:0', '/device:GPU:%d' % i, f"/gpu:{i}"; a device
    # string held in a variable is not followed). A call list cannot say "given a GPU
    # string in a with item", hence the predicate.
    source_triggers = SourceTriggers(calls=DEVICE_CALLS, all_of=(("gpu", "GPU", "Gpu"),),
                                     where=_gpu_device_scope)

    def _targets(self, graph: GraphIndex, ctx: Context, *, explain: bool):
        """(group, placement problem or None) for each group this transform moves.

        With scope=variables the kernel registry (and so the TF runtime) is consulted only
        to explain findings (`explain`, `Context.explain`), never to decide what moves.
        """
        scope = ctx.options["scope"]
        every = placement.groups(graph, variables_only=scope == "variables")
        gpu_groups = [g for g in every if _on_gpu(g) and not g.conflict]
        problems = {}
        if explain or scope == "no-kernel":
            problems = {id(p.group): p for p in placement.problems(graph, gpu_groups)}
        for group in gpu_groups:
            problem = problems.get(id(group))
            if scope == "no-kernel" and problem is None:
                continue
            yield group, problem

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        """An error for each group TF cannot place; one warning per GPU for the groups that
        place but hold variables the towers share (a tower pattern: one finding, a count)."""
        shared: dict[str, list[placement.Group]] = {}  # requested GPU -> its variable groups
        for group, problem in self._targets(graph, ctx, explain=ctx.explain):
            requested = group.requested.to_string()
            if problem is None:
                shared.setdefault(requested, []).append(group)
                continue
            to = _CPU_OF[requested]
            yield Finding(ctx.path, self.name,
                          f"{problem.message} ({placement.explain(problem)}; fix moves it to {to})",
                          node=group.anchor, severity="error",
                          edit=partial(self._move_to_cpu, [group], requested, ctx))
        for requested, groups in shared.items():
            names = [g.anchor for g in groups[:3]]  # (the message names three)
            listed = ", ".join(names) + (", ..." if len(groups) > 3 else "")
            what = (f"variable {names[0]} is" if len(groups) == 1
                    else f"{len(groups)} variables ({listed}) are")
            yield Finding(ctx.path, self.name,
                          f"{what} placed on {requested}; shared variables belong on the CPU "
                          f"(their groups, {sum(len(g.positions) for g in groups)} node(s), "
                          f"move to {_CPU_OF[requested]})",
                          node=names[0], severity="warning",
                          edit=partial(self._move_to_cpu, groups, requested, ctx))

    def _move_to_cpu(self, groups: list[placement.Group], requested: str, ctx: Context,
                     graph: GraphIndex) -> list[Change]:
        after = _CPU_OF[requested]
        names, changes = graph.names, []
        for group in groups:
            moved = graph.set_devices(group.positions, _CPU_OF)
            if moved:
                changes.append(Change(
                    ctx.path, self.name,
                    f"moved {len(moved)} node(s) of {group.anchor}'s colocation group from "
                    f"{requested} to {after}",
                    node=group.anchor,
                    details={"from": requested, "to": after, "nodes": [names[p] for p in moved]},
                ))
        return changes
