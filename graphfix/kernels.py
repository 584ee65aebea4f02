"""TF's own kernel registry: which device types can run a node with its attrs.

This is the one place the graph path touches the TF runtime (`import tensorflow` costs
seconds), and only when a placement question is actually asked. The default `tensorflow`
wheel registers its GPU kernels even on a machine with no GPU, so a GPU-placement bug is
caught anywhere; a `tensorflow-cpu` install registers none, and we say so rather than pass.
"""

from __future__ import annotations

from functools import cache


class NoGpuKernelsError(RuntimeError):
    """The installed TensorFlow registers no GPU kernels, so GPU placement cannot be judged."""


@cache
def _kernels_module():
    from graphfix._tensorflow import import_runtime

    import_runtime()
    from tensorflow.python.framework import kernels

    return kernels


@cache
def _kernels_for(op: str) -> tuple:
    try:
        listed = _kernels_module().get_registered_kernels_for_op(op).kernel
    except Exception:  # an op this TF does not know (a custom op)
        return ()
    return tuple(
        (
            k.device_type,
            k.label,
            tuple((c.name, frozenset(c.allowed_values.list.type)) for c in k.constraint),
        )
        for k in listed
    )


@cache
def _op_defaults(op: str) -> dict:
    try:
        _kernels_module()
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(op)
    except Exception:
        return {}
    if op_def is None:
        return {}
    out = {}
    for attr in op_def.attr:
        if attr.HasField("default_value") and attr.default_value.WhichOneof("value") == "type":
            out[attr.name] = (attr.default_value.type,)
    return out


def gpu_kernels_registered() -> bool:
    """Whether this TensorFlow carries GPU kernels (the default wheel does, even on CPU)."""
    return any(kind == "GPU" for kind, _, _ in _kernels_for("MatMul"))


def require_gpu_kernels() -> None:
    if not gpu_kernels_registered():
        raise NoGpuKernelsError(
            "this TensorFlow registers no GPU kernels (a tensorflow-cpu install?), so GPU "
            "placement cannot be checked; install the default 'tensorflow' wheel"
        )


def _node_types(node, op: str) -> dict[str, tuple[int, ...]]:
    types = dict(_op_defaults(op))
    for name, value in node.attr.items():
        kind = value.WhichOneof("value")
        if kind == "type":
            types[name] = (value.type,)
        elif kind == "list" and value.list.type:
            types[name] = tuple(value.list.type)
    return types


def _matches(constraints, label: str, types: dict, node_label: str) -> bool:
    if label != node_label:
        return False
    for name, allowed in constraints:
        values = types.get(name)
        if values is None or not all(v in allowed for v in values):
            return False
    return True


def supports(node, device_type: str) -> bool:
    """Whether a kernel is registered for `node` (its op and attrs) on `device_type`.

    Like TF's `FindKernelRegistration`: kernels for the device type first, then those
    registered for DEFAULT as a fallback.
    """
    kernels = _kernels_for(node.op)
    types = _node_types(node, node.op)
    label = node.attr["_kernel"].s.decode() if "_kernel" in node.attr else ""
    device_type = device_type.upper()
    for wanted in (device_type, "DEFAULT"):
        if any(
            kind == wanted and _matches(constraints, klabel, types, label)
            for kind, klabel, constraints in kernels
        ):
            return True
    return False


def describe_attrs(node) -> str:
    """The node's type attrs in TF's wording: `dtype=DT_INT32`."""
    from graphfix._proto import pb

    names = pb().types_pb2.DataType.Name
    parts = []
    for name, value in sorted(node.attr.items()):
        if value.WhichOneof("value") == "type":
            parts.append(f"{name}={names(value.type)}")
    return ", ".join(parts)
