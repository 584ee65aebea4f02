"""print-on-cpu: `tf.print` / `tf.Print` pinned to a GPU, which has no kernel for them.

    with tf.device("/gpu:0"):
        tf.print("loss", loss)      # StringFormat and PrintV2: CPU kernels only

    InvalidArgumentError: Cannot assign a device for operation PrintV2: Could not satisfy
    explicit device specification '/device:GPU:0' because no supported kernel for GPU
    devices is available.

Found: in a graph, each Print, PrintV2 or StringFormat op that asks for a GPU; in source,
each `tf.print` / `tf.Print` call under a `with tf.device(...)` given a GPU string.
Fixed: in a graph, each such op moves to the CPU of its job and task; in source, a print
that is a statement of its own moves under `with tf.device("/cpu:0"):`.
"""

from functools import partial

import libcst as cst

from graphfix.findings import Change, Finding
from graphfix.graph.devices import DeviceSpec
from graphfix.registry import Transform
from graphfix.source.codemod import SourceCodemod
from graphfix.source.fixes import WrapInWith
from graphfix.source.prefilter import SourceTriggers

PRINT_OPS = frozenset({"Print", "PrintV2", "StringFormat"})


class PrintOnCpuCodemod(SourceCodemod):
    """The source half: a print call under a GPU device scope moves under the CPU's."""

    def _gpu_device(self, node: cst.With) -> str | None:
        """How the `with` spells TF's `device` (`tf.device`), if it asks for a GPU."""
        for call in (item.item for item in node.items if isinstance(item.item, cst.Call)):
            if self.tf_canonical(call.func) == "device" and "gpu" in self.code(call).lower():
                return self.code(call.func)
        return None

    def visit_Module(self, node: cst.Module) -> None:
        self.gpu_devices: list[str | None] = []  # one per enclosing `with`

    def visit_With(self, node: cst.With) -> None:
        self.gpu_devices.append(self._gpu_device(node))

    def leave_With(self, original_node: cst.With, updated_node: cst.With) -> cst.With:
        self.gpu_devices.pop()
        return updated_node

    def visit_Call(self, node: cst.Call) -> None:
        devices = [d for d in self.gpu_devices if d]
        if devices and self.tf_canonical(node.func) in ("print", "Print"):
            line = self.parent(self.parent(node))  # a print of its own: Expr, then its line
            wrap = WrapInWith((line,), f'{devices[-1]}("/cpu:0")')
            self.report(node, "a print under a GPU device scope: no GPU kernel runs it",
                        fix=wrap if isinstance(line, cst.SimpleStatementLine) else None)


class PrintOnCpu(Transform):
    name = "print-on-cpu"
    summary = "move print ops off the GPU, which has no kernel for them"
    codemod = PrintOnCpuCodemod
    # A call of `print` or `Print` in a file that names a device: else never read by libcst.
    source_triggers = SourceTriggers(calls={"print", "Print"}, all_of=(("device",),))

    def graph(self, graph, ctx):
        """The graph half: one finding per print op on a GPU, with the edit that moves it."""
        for position in graph.positions_of(PRINT_OPS):
            spec = DeviceSpec.parse(graph.devices[position])
            if (spec.device_type or "").upper() == "GPU":
                cpu = spec.replace(device_type="CPU", device_index=0).to_string()
                yield Finding(ctx.path, self.name,
                              f"{graph.ops[position]} has no GPU kernel (moves to {cpu})",
                              node=graph.names[position],
                              edit=partial(self.move, position, cpu, ctx.path))

    def move(self, position: int, device: str, path: str, graph) -> list[Change]:
        graph.set_device(position, device)
        name = graph.names[position]
        return [Change(path, self.name, f"moved {name} to {device}", node=name)]
