"""Op signatures: the dtype of every input and output of an op, without the TF runtime.

TF's built-in ops come from the kernel table `graphfix.graph.kernels` selects for the run
(one per TensorFlow version, checked against the installed TF by the tests); a MetaGraphDef
adds the ops it describes itself. An argument is written as a short string: `=1` a fixed
dtype (enum 1), `T` the dtype a node's attr `T` chooses, `&` before either a ref, `*N`
repeated by the attr `N`, `[Tlist]` a list of dtypes from an attr.
"""

from __future__ import annotations

from graphfix.graph import kernels

DT_RESOURCE = 20
REF_OFFSET = 100


def is_tf_op(op: str) -> bool:
    """Whether `op` is one of TF's own ops (in the table of its registry); an op type it
    lacks is a custom op (or a function of the graph's library)."""
    return op in kernels.signature_table()


class _Signatures(dict):
    """op -> signature: the table's entry (decoded on first use), or one this graph adds."""

    def __init__(self, table):
        super().__init__()
        self._table = table

    def __missing__(self, op: str) -> dict:
        signature = self[op] = self._table.entry(op)
        return signature

    def __contains__(self, op: object) -> bool:
        return dict.__contains__(self, op) or op in self._table

    def get(self, op: str, default=None):
        try:
            return self[op]
        except KeyError:
            return default


class OpSignatures:
    """Argument dtypes of ops: TF's built-in ops, plus ops a MetaGraphDef describes itself."""

    def __init__(self, stripped_op_list=None):
        self._ops = _Signatures(kernels.signature_table())
        self._plans: dict[tuple[str, str], object] = {}
        if stripped_op_list is not None:
            for op in stripped_op_list.op:
                if op.name not in self._ops:
                    self._ops[op.name] = signature_from_op_def(op)

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


def signature_from_op_def(op_def) -> dict:
    """An op's signature from its OpDef (TF's registry's, or a MetaGraphDef's own): its
    arguments, whether it is stateful, and the defaults of the attrs that decide their types
    and counts (a SavedModel may strip attrs that hold their default value)."""

    def encode(arg):
        out = "&" if arg.is_ref else ""
        if arg.type_list_attr:
            return out + "[" + arg.type_list_attr + "]"
        out += arg.type_attr if arg.type_attr else "=" + str(arg.type)
        return out + ("*" + arg.number_attr if arg.number_attr else "")

    signature = {"in": [encode(a) for a in op_def.input_arg],
                 "out": [encode(a) for a in op_def.output_arg]}
    if op_def.is_stateful:
        signature["stateful"] = True
    defaults = attr_defaults(op_def, argument_attrs(op_def))
    if defaults:
        signature["defaults"] = defaults
    return signature


def argument_attrs(op_def) -> set[str]:
    """The attrs of an op that decide its arguments' types and counts."""
    return {name for arg in (*op_def.input_arg, *op_def.output_arg)
            for name in (arg.type_attr, arg.number_attr, arg.type_list_attr) if name}


def attr_defaults(op_def, names) -> dict:
    """{attr: its default} for the attrs of `op_def` among `names` that have one of a kind
    a signature or a kernel's constraint reads: a type (its enum), an int, a bool, a string,
    a list of types."""
    defaults = {}
    for attr in op_def.attr:
        if attr.name not in names or not attr.HasField("default_value"):
            continue
        value = attr.default_value
        kind = value.WhichOneof("value")
        if kind in ("type", "i", "b"):
            defaults[attr.name] = getattr(value, kind)
        elif kind == "s":
            defaults[attr.name] = value.s.decode("utf-8", "replace")
        elif kind == "list" and (value.list.type or not any(
                getattr(value.list, k) for k in ("s", "i", "f", "b", "shape", "tensor"))):
            defaults[attr.name] = list(value.list.type)
    return defaults


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
