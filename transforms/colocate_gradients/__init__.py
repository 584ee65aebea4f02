"""colocate-gradients: every tower's backward pass on one device.

The bug: the towers are built on `/gpu:0`, `/gpu:1`, ..., but the loss is differentiated
after the tower loop, outside every tower's device scope, without
`colocate_gradients_with_ops=True`::

    for i in range(num_gpus):
        with tf.device('/gpu:%d' % i), tf.name_scope('tower_%d' % i):
            tower_losses.append(tower_loss(images[i], labels[i]))
    train_op = opt.minimize(tf.add_n(tower_losses))   # the backward pass: one device

`tf.gradients` (which `minimize` and `compute_gradients` call) builds each gradient op in
the device scope of the call, not of the op it differentiates: every gradient op asks for
no device (or the call's scope's), and TF's placer puts them all on its default device.
No error is raised: the other GPUs compute only the forward pass, and a step takes about
as long as on one GPU. With `colocate_gradients_with_ops=True`, TF's `gradients_util` builds
each op's gradient inside `colocate_with(op)`: the gradient ops take the forward op's device
(and its colocation group, `_class`).

Found (a warning): towers (`graphfix.graph.towers`) on two or more devices whose gradient
ops (`<scope>/gradients/<forward op>_grad/...`, `graphfix.graph.gradients.forward_op`) ask
for another device than their forward op, where that forward op asks for its tower's
device and the gradient op for none of the towers' devices (one on a tower's device was built
in that tower's scope, where the user put it: in the recipe that differentiates each tower's
loss inside its scope, tower 1's gradient of the regularizer tower 0 made). The finding names the towers and how many of their gradient ops are off their
tower's device. Not counted: the gradients of a tower's ops that sit elsewhere on purpose
(an `embedding_lookup`'s gather, built beside its table on the CPU), and gradient ops whose
colocation group asks for another device, holds a forward op, or has a member without a
kernel on the tower's: the gradient function placed those itself (a gather's gradient
measures its table in `colocate_with(table)`, a TensorArray's gradient is built beside the
TensorArray, in a tower that took its gradients inside its scope too).

Fixed: each counted gradient op asks for its forward op's device, the device
`colocate_gradients_with_ops` gives it. Only the device is copied, not the forward op's
colocation group (`_class`), which TF's flag also gives: a `_class` joins the two groups,
and where the gradient op's group asks for another device TF's placer refuses the graph
(`tf.gather(cpu_table, ids)` in GPU towers, differentiated with the flag: "Cannot colocate
nodes gradients/tower_0/GatherV2_grad/Shape and tower_0/GatherV2: Cannot merge devices with
incompatible ids"); the device alone adds no constraint. A gradient op moves only with its
whole colocation group; TF's sums of several towers' gradients (`gradients/AddN`), which
name no forward op, follow the tower's gradient op they are colocated with. The fix moves
ops, not values: a step computes what it did.

In source: a `minimize`, `compute_gradients` or `tf.gradients` call whose loss is computed
in the device scopes of several towers or stages, not in the call's own device scope (or
none), gains `colocate_gradients_with_ops=True`: a `with tf.device(...)` given a device that
changes with a loop, or two or more such blocks (a model split over devices, each stage in
its block, differentiated in a third: every gradient op lands on the third), or blocks that
each ask a function of the module for the next device, a counter it keeps and turns
(`with tf.device(self._next_device()):` per stage, `'/gpu:%d' % self._cur_gpu`: a round
robin over the GPUs). A function that keeps no counter gives every block the same device
(`'/gpu:%d' % self._gpu`): its blocks, even in a loop, are one device. One block on a GPU
other than the first (`'/gpu:1'`) counts too where the loss is also computed from layers
built outside every device scope, and the call is outside every scope: those take TF's
default device, GPU 0 (a perceptual-loss network on `/gpu:1` scoring a generator built
on the default device); a block on GPU 0 or a CPU beside them is not a split. For a call
outside every device scope, the functions and methods of the project the loss is computed
through (a model class imported from another module, its methods and the ones they call)
count with their device blocks that hold forward code and name one GPU (a string, a
module's constant): blocks on two GPUs there are a split too. `tf.gradients` is
compat.v1's, or plain `tensorflow`'s in a file written for TF 1.x (one that reaches a name
TF 2 dropped: `tf.placeholder`, `tf.Session`, `tf.contrib`); TF 2's colocates always and
takes no such keyword. The loss is
followed back through the names it is computed from, the `self.<attribute>` its class's
methods assign (`self.loss = tf.add_n(tower_losses)`, minimized in another method) and the
values the module's functions return; past a device scope on that path (the towers' sum
taken in a `/cpu:0` block of its own), a scope counts only where a tower loop enters it or a
layer is built in it (a project function that makes variables, `tf.layers`, slim): an
input pipeline's or a pinned variable's scope is not forward code whose gradients move. A
call that passes the argument, that is made inside a tower's device scope (or one naming the
same device), or that sits in a branch only one tower takes (`if n == 1:` for towers built by
`for i in range(n)`), is left alone; a stage on the ps job (`/job:ps/task:0`) does not count:
forward code there is replica-placement's finding, and the flag would send its backward
pass to the ps tasks too. Where the towers' code (the file, or one its imports
connect it to) calls `tf.gather`, the call is reported but not fixed: TF's gradient of a
gather measures the gathered table in `colocate_with(table)`, and the flag adds the gather's
colocation group to it; a table gathered on another device than its own (a CPU table in GPU
towers, a variable shared by the towers) then gives a group that asks for two devices, and
TF's placer refuses the graph the program built before (`tf.nn.embedding_lookup` gathers
beside its table: with it the flag is safe).
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Iterator

from graphfix.findings import Change, Finding
from graphfix.graph.devices import device_type, same_device
from graphfix.graph.gradients import forward_op, in_gradients_scope
from graphfix.graph.index import GraphIndex
from graphfix.graph.placement import lacks_kernel
from graphfix.graph.towers import Tower, find_towers
from graphfix.registry import Context, Transform
from graphfix.source.prefilter import SourceTriggers, device_nearby
from graphfix.source.vocabulary import GRADIENT_CALLS


def _off_their_towers(graph: GraphIndex) -> dict[int, tuple[Tower, str]]:
    """The gradient ops to move: position -> (the tower, its forward op's device). Those
    whose forward op asks for its tower's device and which ask for another, in towers that
    span two or more devices (one device's backward pass has nowhere else to go), where
    their whole colocation group can follow (`_following`)."""
    towers = [s for s in find_towers(graph) if len({t.device for t in s.towers} - {""}) > 1]
    on_towers = {t.device for s in towers for t in s.towers} - {""}
    off, devices = {}, graph.devices
    for position, name in enumerate(graph.names) if towers else ():
        forward = forward_op(graph, name) if "_grad/" in name else None
        tower = forward and next((t for s in towers if (t := s.tower_holding(forward))), None)
        # (a gradient op on a tower's device was built in that tower's scope: the user's
        # per-tower backward pass, such as tower 1's gradient of tower 0's regularizer)
        if tower and tower.device and not any(same_device(devices[position], d) for d in on_towers):
            asked = devices[graph.position(forward)]
            if same_device(asked, tower.device) and not same_device(devices[position], asked):
                off[position] = (tower, asked)
    return {p: off[p] for root in graph.group_roots(off) for p in _following(graph, root, off)}


def _following(graph: GraphIndex, root: str, off: dict[int, tuple[Tower, str]]) -> list[int]:
    """The gradient ops of `off` in the colocation group of `root`, if the whole group can
    move with them (else none): every member is a gradient op that asks for their one device
    or none, and has a kernel on its type. A group that holds a forward op or asks for
    another device was placed by the gradient function itself (`colocate_with`: a gather's
    gradient measures its table beside it, a TensorArray's gradient is built beside the
    TensorArray), not by the bug; a member without a kernel there would make TF's placer
    refuse the group."""
    members = graph.group_members(root)
    target, *others = {off[p][1] for p in members if p in off}
    try:
        kind = device_type(target) or "CPU"
    except ValueError:
        return []
    follow = not others and all((p in off or in_gradients_scope(graph.names[p]) and (
        not graph.devices[p] or same_device(graph.devices[p], target)))
        and not lacks_kernel(graph.node_at(p), kind, graph.library_names) for p in members)
    return [p for p in members if p in off] if follow else []


class ColocateGradients(Transform):
    name = "colocate-gradients"
    summary = "put each tower's gradient ops on its tower's device (colocate_gradients_with_ops)"
    codemod = ".source:ColocateGradientsRule"
    # A gradients call, in a file that opens a device scope or whose imports connect it
    # to one that does (a model of another module split into stages).
    source_triggers = SourceTriggers(calls=GRADIENT_CALLS, in_project=device_nearby)

    def graph(self, graph: GraphIndex, ctx: Context) -> Iterator[Finding]:
        off = _off_their_towers(graph)
        if not off:
            return
        per_tower = sorted(Counter(tower for tower, _ in off.values()).items(),
                           key=lambda item: item[0].index)
        yield Finding(
            ctx.path, self.name,
            f"{len(off)} gradient op(s) of {len(per_tower)} tower(s) are not on their tower's "
            f"device ({', '.join(f'{t.scope} ({t.device}): {n}' for t, n in per_tower)}): the "
            "loss was differentiated outside the towers' device scopes without "
            "colocate_gradients_with_ops=True, so the backward pass runs on one device",
            node=graph.names[min(off)], severity="warning", edit=partial(self._move, off, ctx))

    def _move(self, off: dict[int, tuple[Tower, str]], ctx: Context, graph: GraphIndex
              ) -> list[Change]:
        """Each gradient op of `off` asks for its forward op's device."""
        moved = [graph.names[p] for p, (_, device) in off.items() if graph.set_device(p, device)]
        return [Change(ctx.path, self.name,
                       f"{len(moved)} gradient op(s) now ask for their forward op's device",
                       node=moved[0], details={"moved_nodes": moved})] if moved else []
