"""Op signatures: the dtype of every input and output of an op, without the TF runtime.

TF's built-in ops come from a snapshot of their registrations (`op_signatures.json`, checked
against the installed TF by the tests); a MetaGraphDef adds the ops it describes itself. An
argument is written as a short string: `=1` a fixed dtype (enum 1), `T` the dtype a node's
attr `T` chooses, `&` before either a ref, `*N` repeated by the attr `N`, `[Tlist]` a list
of dtypes from an attr.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DT_RESOURCE = 20
REF_OFFSET = 100


@cache
def _builtin_signature_texts() -> dict[str, str]:
    """TF's op signatures (`op_signatures.json`): op -> its signature as JSON text. The file
    holds one op per line, so the ~100 ops a graph uses are decoded, not all ~1,500."""
    text = (Path(__file__).parent / "op_signatures.json").read_text()
    lines = text.splitlines()
    if lines[0].endswith('"ops":{') and lines[-1] == "}}":
        pairs = (line.rstrip(",").partition(":") for line in lines[1:-1])
        return {name.strip('"'): signature for name, _, signature in pairs}
    return {op: json.dumps(sig) for op, sig in json.loads(text)["ops"].items()}


def is_tf_op(op: str) -> bool:
    """Whether `op` is one of TF's own ops (in the snapshot of its registry); an op type it
    lacks is a custom op (or a function of the graph's library)."""
    return op in _builtin_signature_texts()


class _Signatures(dict):
    """op -> signature, each decoded from its JSON text on first use."""

    def __init__(self, texts: dict[str, str]):
        super().__init__()
        self._texts = texts

    def __missing__(self, op: str) -> dict:
        signature = self[op] = json.loads(self._texts[op])
        return signature

    def __contains__(self, op: object) -> bool:
        return dict.__contains__(self, op) or op in self._texts

    def get(self, op: str, default=None):
        try:
            return self[op]
        except KeyError:
            return default


class OpSignatures:
    """Argument dtypes of ops: TF's built-in ops, plus ops a MetaGraphDef describes itself."""

    def __init__(self, stripped_op_list=None):
        self._ops = _Signatures(_builtin_signature_texts())
        self._plans: dict[tuple[str, str], object] = {}
        if stripped_op_list is not None:
            for op in stripped_op_list.op:
                if op.name not in self._ops:
                    self._ops[op.name] = _signature_from_op_def(op)

    def known(self, op: str) -> bool:
        return op in self._ops

    def is_stateful(self, op: str) -> bool:
        return bool(self._ops.get(op, {}).get("stateful"))

    def input_types(self, node) -> list[int] | None:
        """Dtype enum of each data input of `node` (ref types are enum + 100), or None."""
        sig = self._ops.get(node.op)
        return None if sig is None else _expand(sig["in"], node, sig.get("defaults", {}))

    def output_types(self, node) -> list[int] | None:
        """Dtype enum of each output of `node` (ref types are enum + 100), or None."""
        sig = self._ops.get(node.op)
        return None if sig is None else _expand(sig["out"], node, sig.get("defaults", {}))

    def makes_resources(self, op: str) -> bool:
        """Whether `op` has an output that is always a resource handle (VarHandleOp, ...)."""
        sig = self._ops.get(op)
        return sig is not None and any(a.split("*")[0] == "=20" for a in sig["out"])

    def handle_plan(self, op: str, side: str):
        """How to find which inputs (`side="in"`) or outputs (`"out"`) of an `op` node are a
        ref or a resource: None for an op this graph does not describe; where some argument
        is a list, decided per node: `EXPAND` if a ref or resource argument is among them,
        `EXPAND_BY_ATTR` if only a type attr can make one a resource; else (positions always
        a handle, ((position, type attr, its default), ...) a handle when the attr is
        DT_RESOURCE)."""
        key = (op, side)
        plan = self._plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            sig = self._ops.get(op)
            plan = None if sig is None else _handle_plan(sig[side], sig.get("defaults", {}))
            self._plans[key] = plan
        return plan

    def is_resource_output(self, op: str, position: int) -> bool:
        """Whether output `position` of `op` is always a resource handle (VarHandleOp's)."""
        return self._ops[op]["out"][position] == "=20"

    def handle_positions(self, node, side: str, attrs_matter: bool = True) -> list[int] | None:
        """Positions of `node`'s inputs (`side="in"`) or outputs (`"out"`) that are a ref
        or a resource; None for an op this graph does not describe."""
        plan = self.handle_plan(node.op, side)
        if plan is None:
            return None
        if plan in (EXPAND, EXPAND_BY_ATTR):
            types = self.input_types(node) if side == "in" else self.output_types(node)
            return None if types is None else [i for i, t in enumerate(types) if is_handle_type(t)]
        always, by_attr = plan
        if not by_attr or not attrs_matter:
            return list(always)
        attrs = node.attr
        extra = [i for i, name, default in by_attr
                 if (attrs[name].type if name in attrs else default) == DT_RESOURCE]
        return list(always) + extra if extra else list(always)

    def can_take_handle(self, op: str) -> bool:
        """Whether some input of `op` may be a ref or a resource (a cheap pre-filter)."""
        sig = self._ops.get(op)
        return sig is not None and any(_may_be_handle(arg) for arg in sig["in"])


_UNPLANNED = object()


EXPAND = "expand"
EXPAND_BY_ATTR = "expand by attr"


def _handle_plan(args: list[str], defaults: dict):
    """For an op's argument list: EXPAND or EXPAND_BY_ATTR if some argument is a list or
    repeated, else (positions always a handle, ((position, type attr, its default), ...)
    that are a handle when the attr is DT_RESOURCE)."""
    if any("*" in a or "[" in a for a in args):
        fixed = any(a.startswith("&") or a.split("*")[0] == "=20" for a in args)
        return EXPAND if fixed else EXPAND_BY_ATTR  # (AddN, ConcatV2, ShapeN: by attr)
    always, by_attr = [], []
    for position, arg in enumerate(args):
        if arg.startswith("&") or arg == "=20":
            always.append(position)
        elif not arg.startswith("="):
            by_attr.append((position, arg, defaults.get(arg)))
    return tuple(always), tuple(by_attr)


def _may_be_handle(arg: str) -> bool:
    # A ref, a resource, or a type chosen by an attr (Identity of a resource handle).
    return arg.startswith("&") or not arg.startswith("=") or arg.split("*")[0] == "=20"


def _signature_from_op_def(op) -> dict:
    def encode(arg):
        out = "&" if arg.is_ref else ""
        if arg.type_list_attr:
            return out + "[" + arg.type_list_attr + "]"
        out += arg.type_attr if arg.type_attr else "=" + str(arg.type)
        return out + ("*" + arg.number_attr if arg.number_attr else "")

    signature = {"in": [encode(a) for a in op.input_arg], "out": [encode(a) for a in op.output_arg]}
    if op.is_stateful:
        signature["stateful"] = True
    return signature


def _attr(node, name: str, defaults: dict):
    if name in node.attr:
        value = node.attr[name]
        kind = value.WhichOneof("value")
        if kind == "type":
            return value.type
        if kind == "i":
            return value.i
        if kind == "list":
            return list(value.list.type)
    return defaults.get(name)


def _expand(args: list[str], node, defaults: dict) -> list[int] | None:
    types: list[int] = []
    for arg in args:
        ref = arg.startswith("&")
        arg = arg.lstrip("&")
        if arg.startswith("["):
            listed = _attr(node, arg[1:-1], defaults)
            if listed is None:
                return None
            types.extend(t + REF_OFFSET * ref for t in listed)
            continue
        kind, _, count_attr = arg.partition("*")
        dtype = int(kind[1:]) if kind.startswith("=") else _attr(node, kind, defaults)
        count = _attr(node, count_attr, defaults) if count_attr else 1
        if dtype is None or count is None:
            return None
        types.extend([dtype + REF_OFFSET * ref] * count)
    return types


def is_handle_type(dtype: int) -> bool:
    """A ref or resource dtype: the edges that bind a consumer to a variable's device."""
    return dtype == DT_RESOURCE or dtype > REF_OFFSET
