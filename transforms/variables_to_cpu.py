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
(TF's own message); others are warnings.

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

import dataclasses
import re

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ParentNodeProvider, QualifiedNameProvider

from graphfix import placement
from graphfix.codemod import SourceCodemod, canonical_tf_name
from graphfix.findings import Change, Finding
from graphfix.graph import GraphIndex
from graphfix.registry import Context, Param, Transform


def _on_gpu(group: placement.Group) -> bool:
    spec = group.requested
    return spec is not None and (spec.device_type or "").upper() == "GPU"


def _cpu_device_of(device: str) -> str:
    """The CPU of the same job/replica/task as `device`."""
    from graphfix.devices import DeviceSpec

    spec = DeviceSpec.parse(device)
    return spec.replace(device_type="CPU", device_index=0).to_string()


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

    def _targets(self, graph: GraphIndex, ctx: Context, *, explain: bool):
        """(group, placement problem or None) for each group this transform moves.

        With scope=variables the kernel registry (and so the TF runtime) is consulted only
        to explain findings (`explain`), never to decide what moves.
        """
        scope = ctx.options["scope"]
        gpu_groups = [g for g in placement.groups(graph) if _on_gpu(g) and not g.conflict]
        if scope == "variables":
            gpu_groups = [g for g in gpu_groups if g.variables]
        problems = {}
        if explain or scope == "no-kernel":
            problems = {id(p.group): p for p in placement.problems(graph, gpu_groups)}
        for group in gpu_groups:
            problem = problems.get(id(group))
            if scope == "no-kernel" and problem is None:
                continue
            yield group, problem

    def check_graph(self, graph: GraphIndex, ctx: Context) -> list[Finding]:
        findings = []
        for group, problem in self._targets(graph, ctx, explain=True):
            anchor = (group.variables or group.members)[0].name
            to = _cpu_device_of(group.requested.to_string())
            if problem is not None:
                message = f"{problem.message} ({placement.explain(problem)}; fix moves it to {to})"
                severity = "error"
            else:
                message = (
                    f"variable {anchor} is placed on {group.requested}; shared variables belong "
                    f"on the CPU (group of {len(group.members)} moves to {to})"
                )
                severity = "warning"
            findings.append(
                Finding(ctx.path, self.name, message, fixable=True, node=anchor, severity=severity)
            )
        return findings

    def fix_graph(self, graph: GraphIndex, ctx: Context) -> list[Change]:
        changes = []
        for group, _ in list(self._targets(graph, ctx, explain=False)):
            anchor = (group.variables or group.members)[0].name
            before = group.requested.to_string()
            moved = [n.name for n in group.members if n.device and graph.set_device(n, _cpu_device_of(n.device))]
            if moved:
                changes.append(
                    Change(
                        ctx.path,
                        self.name,
                        f"moved {len(moved)} node(s) of {anchor}'s colocation group from "
                        f"{before} to {_cpu_device_of(before)}",
                        node=anchor,
                        details={"from": before, "to": _cpu_device_of(before), "nodes": moved},
                    )
                )
        return changes


# -- Source surface -------------------------------------------------------------------------
#
# What counts as a GPU scope, a variable and its dtype is read off the syntax tree; nothing
# here imports TensorFlow. The dtype tables are TF's kernel registrations (checked against
# the installed TF by the tests).

# dtypes with a GPU kernel for the op that holds a variable's value: VariableV2 for ref
# variables (tensorflow/core/kernels/variable_ops.cc), AssignVariableOp for resource
# variables (VarHandleOp and ReadVariableOp take any dtype on the GPU; the initializer's
# AssignVariableOp, colocated with the handle, does not).
_GPU_VARIABLE_DTYPES = {
    "VariableV2": frozenset(
        {"bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64",
         "int64", "uint32"}
    ),
    "AssignVariableOp": frozenset(
        {"bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64",
         "int8", "int16", "int64", "uint8", "uint16", "uint32", "uint64"}
    ),
}
_DTYPES = frozenset(
    {"bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64", "int8",
     "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string"}
)
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64"}

# TF symbols (as `graphfix.codemod.canonical_tf_name` spells them) that create variables.
_VARIABLE_LIKE = frozenset(  # initial value first: dtype from `dtype=` or the value
    {"Variable", "VariableV1", "slim.local_variable", "slim.global_variable"}
)
_GET_VARIABLE_LIKE = frozenset(  # (name, shape, dtype, initializer, ...): float32 by default
    {"get_variable", "get_local_variable", "slim.variable", "slim.model_variable"}
)
_GLOBAL_STEP = frozenset(  # int64
    {"train.get_or_create_global_step", "train.create_global_step",
     "slim.get_or_create_global_step", "slim.create_global_step"}
)
_LAYERS = frozenset(
    {f"layers.{n}" for n in (
        "dense", "conv1d", "conv2d", "conv3d", "conv2d_transpose", "conv3d_transpose",
        "separable_conv1d", "separable_conv2d", "batch_normalization")}
    | {f"{prefix}.{n}" for prefix in ("slim", "contrib.layers") for n in (
        "conv1d", "conv2d", "conv3d", "convolution", "convolution1d", "convolution2d",
        "convolution3d", "conv2d_transpose", "conv3d_transpose", "convolution2d_transpose",
        "convolution3d_transpose", "separable_conv2d", "separable_convolution2d",
        "conv2d_in_plane", "convolution2d_in_plane", "fully_connected", "linear", "relu",
        "relu6", "batch_norm", "layer_norm", "group_norm", "instance_norm", "bias_add",
        "embed_sequence", "legacy_fully_connected", "stack", "repeat")}
)
_DEVICE_CALLS = frozenset({"device", "python.framework.ops.device"})
_V1_DEVICE = frozenset(
    {"tensorflow.compat.v1.device", "tensorflow._api.v2.compat.v1.device",
     "tensorflow.python.framework.ops.device"}
)
_SLIM_MODULES = frozenset({"tf_slim", "tensorflow.contrib.slim"})
# Tensors these calls make: (position of `dtype`, what it is without one: a dtype, or the
# (keyword, position) of the argument whose value's dtype it takes).
_VALUE, _TENSOR = ("value", 0), ("tensor", 0)
_TENSOR_CALLS = {
    "constant": (1, _VALUE), "convert_to_tensor": (1, _VALUE), "cast": (1, None),
    "zeros": (1, "float32"), "ones": (1, "float32"), "fill": (None, ("value", 1)),
    "zeros_like": (1, _TENSOR), "ones_like": (1, _TENSOR), "identity": (None, ("input", 0)),
    "range": (3, ("start", 0)), "random_normal": (3, "float32"), "random.normal": (3, "float32"),
    "random_uniform": (3, "float32"), "random.uniform": (3, "float32"),
    "truncated_normal": (3, "float32"), "random.truncated_normal": (3, "float32"),
}
# The device function the fix uses where a whole-statement /cpu:0 would move compute too.
_DEVICE_FUNCTION = (
    'lambda op: "/cpu:0" if op.type in ("VariableV2", "VarHandleOp") else op.device'
)
_HOLE = "\0"  # the runtime part of a device string built with %, +, str.format or an f-string
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
_BRACES = re.compile(r"\{[^{}]*\}")
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class _GpuScope:
    """The innermost device scope over a variable, when it names a GPU."""

    call: cst.Call  # the `tf.device(...)` call
    device: str  # TF's spelling of the device, "N" for a runtime index: /device:GPU:N
    dynamic: bool  # built at run time (`'/gpu:%d' % i`): a tower loop


@dataclasses.dataclass
class _Variable:
    """One variable-creating call under a GPU scope."""

    call: cst.Call
    name: str  # canonical TF name: Variable, layers.dense, slim.conv2d
    dtype: str | None
    resource: bool
    slim: str | None  # the slim module as the file spells it, for slim's own calls


@dataclasses.dataclass
class _Site:
    """A statement to wrap: the variables it creates and the GPU scope over them."""

    statement: cst.CSTNode  # SimpleStatementLine or SimpleStatementSuite
    scope: _GpuScope
    variables: list[_Variable]


@dataclasses.dataclass(frozen=True)
class _Wrapper:
    kind: str  # "cpu" | "slim" | "device-function"
    text: str  # what follows `with`

    @property
    def bridges(self) -> bool:
        """Whether statements between two wrapped ones may join the block: true for wrappers
        that place only variables, so the compute of any statement inside stays put."""
        return self.kind != "cpu"


def _device_template(expr: cst.BaseExpression) -> str | None:
    """A device string expression's text, with `_HOLE` for its runtime parts; None if `expr`
    is not a string expression (a device function, a name, None)."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if isinstance(expr, cst.ConcatenatedString):
        left, right = _device_template(expr.left), _device_template(expr.right)
        return None if left is None or right is None else left + right
    if isinstance(expr, cst.FormattedString):
        return "".join(
            part.value.replace("{{", "{").replace("}}", "}")
            if isinstance(part, cst.FormattedStringText) else _HOLE
            for part in expr.parts
        )
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Modulo):
            left = _device_template(expr.left)
            return None if left is None else _PERCENT.sub(_HOLE, left).replace("%%", "%")
        if isinstance(expr.operator, cst.Add):
            left, right = _device_template(expr.left), _device_template(expr.right)
            if left is None and right is None:
                return None
            return (_HOLE if left is None else left) + (_HOLE if right is None else right)
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "format"):
        base = _device_template(expr.func.value)
        if base is None:
            return None
        text = _BRACES.sub(_HOLE, base.replace("{{", "\1").replace("}}", "\2"))
        return text.replace("\1", "{").replace("\2", "}")
    return None


def _classify_device(template: str) -> tuple[str, str, bool]:
    """(kind, TF's spelling, runtime index?) for a device template. kind is `gpu`, `other`
    (names another device type), `partial` (no device type: `/job:worker`, merges with the
    scope outside) or `unknown` (the device type is computed at run time)."""
    fields: dict[str, str] = {}
    kind_of = None
    index = "*"
    for part in template.split("/"):
        if not part:
            continue
        bits = part.split(":")
        head = bits[0]
        if _HOLE in head:
            return "unknown", "", False
        if head in ("job", "replica", "task") and len(bits) == 2:
            fields[head] = bits[1]
        elif head.upper() in ("CPU", "GPU", "TPU") and len(bits) in (1, 2):
            kind_of, index = head.upper(), (bits[1] if len(bits) == 2 else "*")
        elif head == "device" and len(bits) in (2, 3) and _HOLE not in bits[1]:
            kind_of, index = bits[1].upper(), (bits[2] if len(bits) == 3 else "*")
        else:
            return "unknown", "", False
    if kind_of is None:
        return "partial", "", False
    if kind_of not in ("GPU", "XLA_GPU"):
        return "other", "", False
    dynamic = _HOLE in index
    text = "".join(f"/{k}:{fields[k]}" for k in ("job", "replica", "task") if k in fields)
    text = (text + f"/device:{kind_of}:{'N' if dynamic else index}").replace(_HOLE, "N")
    return "gpu", text, dynamic


def _argument(call: cst.Call, keyword: str, position: int | None) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """What a `device(...)` call is given (v1 and v2 name the parameter differently)."""
    return _argument(call, "device_name_or_function", 0) or _argument(call, "device_name", None)


def _small_value(statement: cst.BaseSmallStatement) -> cst.BaseExpression | None:
    """The value a small statement computes, for `x = v`, `x: T = v`, `v` and `return v`."""
    if isinstance(statement, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Return)):
        return statement.value
    return None


def _v1_device_import(module: cst.Module) -> str | None:
    """compat.v1's `device` spelled through the module's own top-level imports, if any:
    `tf.device` after `import tensorflow.compat.v1 as tf`, `tf.compat.v1.device` after
    `import tensorflow as tf`."""
    spellings = {  # what an import binds -> how `device` is reached from it, best first
        "tensorflow.compat.v1.device": "{}", "tensorflow.compat.v1": "{}.device",
        "tensorflow.compat": "{}.v1.device", "tensorflow": "{}.compat.v1.device",
    }
    found: dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is not None:
                        bound = cst.ensure_type(alias.asname.name, cst.Name).value
                        found.setdefault(alias.evaluated_name, bound)
                    else:
                        top = alias.evaluated_name.split(".")[0]
                        found.setdefault(top, top)
            elif (isinstance(small, cst.ImportFrom) and small.module is not None
                  and not small.relative and not isinstance(small.names, cst.ImportStar)):
                base = get_full_name_for_node(small.module)
                for alias in small.names:
                    bound = (cst.ensure_type(alias.asname.name, cst.Name).value
                             if alias.asname else alias.evaluated_name)
                    found.setdefault(f"{base}.{alias.evaluated_name}", bound)
    for qualified, spelling in spellings.items():
        if qualified in found:
            return spelling.format(found[qualified])
    return None


class _Calls(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.found.append(node)


class VariablesToCpuCodemod(SourceCodemod):
    """Place variables created under a GPU `tf.device` scope on `/cpu:0`.

    Found: a call that creates variables (`tf.Variable`, `tf.get_variable`, `tf.layers.*`,
    slim layers and `slim.variable`/`slim.model_variable`, the global step; every import
    alias and compat.v1 spelling) whose innermost device scope, in the same function, is a
    GPU string: a literal, or one built with `%`, `+`, `str.format` or an f-string. An inner
    `tf.device('/cpu:0')`, a device function (`replica_device_setter`, any non-string), a
    slim `arg_scope(..., device=...)` or `device=` argument, or no scope at all: left alone.
    A dtype whose variable op has no GPU kernel (int32, int8, int16, uint8, string, ...) is
    an error, TF's own; other variables are warnings (shared variables belong on the CPU).

    Fixed, by what the statement does:

    - it only creates variables (`w = tf.get_variable(...)`): it moves into
      `with tf.device("/cpu:0"):`, spelled with the file's own `device`::

          with tf.device('/gpu:%d' % i):            with tf.device('/gpu:%d' % i):
              w = tf.get_variable('w', [3])   ->        with tf.device("/cpu:0"):
              y = tf.matmul(x, w)                           w = tf.get_variable('w', [3])
                                                        y = tf.matmul(x, w)

    - it also computes (`y = tf.layers.dense(x, 10)`, `tf.matmul(x, tf.Variable(...))`): a
      /cpu:0 scope would move the compute off the GPU too, so the statement gets a scope
      that places only variable ops, and its compute stays on the GPU. For slim calls that
      is slim's own idiom (as in slim's `model_deploy`)::

          with slim.arg_scope([slim.variable, slim.model_variable], device="/cpu:0"):
              net = slim.conv2d(images, 64, [5, 5])

      and otherwise a device function, the mechanism `replica_device_setter` uses (no helper
      definition is needed, unlike a `variable_scope` custom getter, and name scopes, reuse
      and existing custom getters are untouched)::

          with tf.compat.v1.device(lambda op: "/cpu:0" if op.type in ("VariableV2",
                                   "VarHandleOp") else op.device):
              y = tf.layers.dense(x, 10)

      Device functions need compat.v1's `device` (TF2's `tf.device` takes strings only), so
      after `import tensorflow as tf` it is spelled `tf.compat.v1.device`, or through
      whatever the file imports compat.v1 as.
      Simple statements between two such statements join the same block: the scope places
      nothing but variables.

    Reported but not fixed (fixable=False): a variable created in a compound statement's
    header (`for v in [tf.Variable(0)]:`), a statement of which another variable is
    suppressed, and a layer call where no compat.v1 `device` can be spelled.

    The produced code needs TensorFlow only. Findings and fixes honour
    `# graphfix: ignore[variables-to-cpu]` on the line or on an enclosing `with` line.
    Not seen: variables created in functions called from a GPU scope (a call is not
    followed), device strings held in variables, Keras layer objects, RNN cells.
    """

    DESCRIPTION = "Place variables created under GPU device scopes on /cpu:0."
    transform_name = "variables-to-cpu"
    trigger_words = ("device",)

    # -- resolving names ----------------------------------------------------------------------

    def _names(self, node: cst.CSTNode) -> set[str]:
        try:
            return {n.name for n in self.get_metadata(QualifiedNameProvider, node, set())}
        except KeyError:
            return set()

    def _qualified(self, node: cst.CSTNode) -> str | None:
        """The TF qualified name `node` refers to, through imports and module-level aliases
        (`slim = tf.contrib.slim`)."""
        for qualified in sorted(self._names(node)):
            if canonical_tf_name(qualified) is not None:
                return qualified
        chain = []
        current = node
        while isinstance(current, cst.Attribute):
            chain.append(current.attr.value)
            current = current.value
        if isinstance(current, cst.Name) and current.value in self._aliases:
            if self._names(current) == {current.value}:  # the module-level name itself
                return ".".join([self._aliases[current.value], *reversed(chain)])
        return None

    def _canonical(self, node: cst.CSTNode) -> str | None:
        qualified = self._qualified(node)
        return canonical_tf_name(qualified) if qualified else None

    def _code(self, node: cst.CSTNode) -> str:
        return self._tree.code_for_node(node)

    # -- the module ---------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._aliases: dict[str, str] = {}
        for statement in node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    qualified = self._qualified(small.value)
                    if qualified is not None:
                        self._aliases[small.targets[0].target.value] = qualified
        self._v1_device_import = _v1_device_import(node)
        # Tower code: a GPU chosen at run time, or more than one GPU named in the file.
        calls = _Calls()
        node.visit(calls)
        gpus, self._towers = set(), False
        for call in calls.found:
            if self._canonical(call.func) in _DEVICE_CALLS:
                argument = _device_argument(call)
                template = None if argument is None else _device_template(argument)
                if template is not None:
                    kind, device, dynamic = _classify_device(template)
                    if kind == "gpu":
                        gpus.add(device)
                        self._towers |= dynamic
        self._towers |= len(gpus) > 1
        self._sites: dict[cst.CSTNode, _Site] = {}
        self._with_variables: set[cst.CSTNode] = set()  # statements creating any variable

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))
        return updated_node

    # -- finding variables --------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        name = self._canonical(node.func)
        if name is None or not (name in _VARIABLE_LIKE or name in _GET_VARIABLE_LIKE
                                or name in _GLOBAL_STEP or name in _LAYERS):
            return
        slim_family = name.startswith(("slim.", "contrib.layers."))
        statement, scope = self._scope_of(node, slim_family)
        if statement is not None:
            self._with_variables.add(statement)
        if scope is None:
            return
        if slim_family and _argument(node, "device", None) is not None:
            return  # slim.variable(..., device=...) places itself
        use_resource = _argument(node, "use_resource", None)
        variable = _Variable(
            call=node,
            name=name,
            dtype=self._variable_dtype(node, name),
            resource=isinstance(use_resource, cst.Name) and use_resource.value == "True",
            slim=self._slim_module(node.func) if name.startswith("slim.") else None,
        )
        if statement is None:
            self.report(node, self._message(variable, scope)
                        + "; not fixed: it is created in a compound statement's header, "
                          "create it under tf.device(\"/cpu:0\") by hand",
                        fixable=False, severity=self._severity(variable))
            return
        site = self._sites.setdefault(statement, _Site(statement, scope, []))
        site.variables.append(variable)

    def _scope_of(self, call: cst.Call, slim_family: bool):
        """(statement, GPU scope): the simple statement holding `call` below its innermost
        device scope (None if it sits in a compound statement's header), and that scope if it
        is a GPU's (None for a CPU, a device function, a slim device, or no scope)."""
        statement = None
        child: cst.CSTNode = call
        parent = self.get_metadata(ParentNodeProvider, child, None)
        while parent is not None:
            if statement is None and isinstance(
                    parent, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                statement = parent
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)) and child is parent.body:
                return statement, None  # runs when called, under the caller's scopes
            if isinstance(parent, cst.With):
                items = parent.items
                if child is not parent.body:
                    items = items[: next(i for i, it in enumerate(items) if it is child)]
                for item in reversed(items):
                    verdict = self._scope_verdict(item.item, slim_family)
                    if verdict == "outer":
                        continue
                    return statement, verdict if isinstance(verdict, _GpuScope) else None
            child, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
        return statement, None

    def _scope_verdict(self, expr: cst.BaseExpression, slim_family: bool):
        """A `_GpuScope`, "outer" (this with item places nothing: look further out) or
        "stop" (it decides, and not for a GPU)."""
        if not isinstance(expr, cst.Call):
            return "outer"
        name = self._canonical(expr.func)
        if name == "slim.arg_scope":
            has_device = _argument(expr, "device", None) is not None
            return "stop" if slim_family and has_device else "outer"
        if name not in _DEVICE_CALLS:
            return "outer"
        argument = _device_argument(expr)
        template = None if argument is None else _device_template(argument)
        if template is None:
            return "stop"  # None, a device function, a name: not ours to judge
        kind, device, dynamic = _classify_device(template)
        if kind == "partial":
            return "outer"  # `/job:worker` merges with the device type from outside
        if kind == "gpu":
            return _GpuScope(expr, device, dynamic)
        return "stop"

    def _slim_module(self, func: cst.BaseExpression) -> str | None:
        """How the file spells the slim module in `func` (`slim` in `slim.conv2d`)."""
        current = func.value if isinstance(func, cst.Attribute) else None
        while isinstance(current, (cst.Attribute, cst.Name)):
            if self._qualified(current) in _SLIM_MODULES:
                return self._code(current)
            current = current.value if isinstance(current, cst.Attribute) else None
        return None

    # -- dtypes -------------------------------------------------------------------------------

    def _dtype_of(self, expr: cst.BaseExpression | None) -> str | None:
        """The dtype a dtype expression names: `tf.int32`, `v1.dtypes.int32`, "int32"."""
        if isinstance(expr, cst.SimpleString):
            name = expr.evaluated_value
        elif isinstance(expr, cst.Attribute):
            name = expr.attr.value
        elif isinstance(expr, cst.Name):
            canonical = self._canonical(expr)
            name = canonical.rsplit(".", 1)[-1] if canonical else expr.value
        else:
            return None
        name = _DTYPE_ALIASES.get(name, name)
        return name if name in _DTYPES else None

    def _value_dtype(self, expr: cst.BaseExpression | None) -> str | None:
        """The dtype of the tensor TF makes from a value: 2 is int32, 2.0 float32, [1, 2]
        int32, tf.zeros([2], tf.int32) int32. None when it cannot be read off the code."""
        if isinstance(expr, cst.Integer):
            return "int32" if int(expr.value.replace("_", ""), 0) <= _INT32_MAX else "int64"
        if isinstance(expr, cst.Float):
            return "float32"
        if isinstance(expr, cst.Imaginary):
            return "complex128"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            return self._value_dtype(expr.expression)
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return "bool"
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return "string"
        if isinstance(expr, (cst.List, cst.Tuple)):
            kinds = {self._value_dtype(e.value) for e in expr.elements}
            if not kinds:
                return "float32"
            if None in kinds:
                return None
            if len(kinds) == 1:
                return kinds.pop()
            if kinds <= {"int32", "int64"}:
                return "int64"
            if kinds <= {"int32", "int64", "float32"}:
                return "float32"
            return None
        if isinstance(expr, cst.Lambda):
            return self._value_dtype(expr.body)
        if isinstance(expr, cst.Call):
            shape = _TENSOR_CALLS.get(self._canonical(expr.func) or "")
            if shape is None:
                return None
            position, default = shape
            explicit = _argument(expr, "dtype", position)
            if explicit is not None:
                return self._dtype_of(explicit)
            if isinstance(default, tuple):
                return self._value_dtype(_argument(expr, *default))
            return default
        return None

    def _variable_dtype(self, call: cst.Call, name: str) -> str | None:
        if name in _GLOBAL_STEP:
            return "int64"
        if name in _VARIABLE_LIKE:
            explicit = _argument(call, "dtype", None)
            if explicit is not None:
                return self._dtype_of(explicit)
            return self._value_dtype(_argument(call, "initial_value", 0))
        if name in _GET_VARIABLE_LIKE:
            initializer = _argument(call, "initializer", 3)
            from_value = self._value_dtype(initializer)  # a tensor or value initializes
            if from_value is not None:
                return from_value
            explicit = _argument(call, "dtype", 2)
            if explicit is not None:
                return self._dtype_of(explicit)
            if initializer is None or self._is_initializer(initializer):
                return "float32"
        return None  # layers: float, but we do not read their dtype

    def _is_initializer(self, expr: cst.BaseExpression) -> bool:
        """An initializer object (`tf.zeros_initializer()`): it takes the variable's dtype."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        name = self._canonical(target) or ""
        return name.endswith("_initializer") or "initializers." in name

    # -- findings and fixes -------------------------------------------------------------------

    def _severity(self, variable: _Variable) -> str:
        return "error" if self._no_gpu_kernel(variable) else "warning"

    @staticmethod
    def _kernel_op(variable: _Variable) -> str:
        return "AssignVariableOp" if variable.resource else "VariableV2"

    def _no_gpu_kernel(self, variable: _Variable) -> bool:
        dtype = variable.dtype
        return dtype is not None and dtype not in _GPU_VARIABLE_DTYPES[self._kernel_op(variable)]

    def _message(self, variable: _Variable, scope: _GpuScope) -> str:
        what = self._code(variable.call.func)
        where = f"under {self._code(scope.call)}"
        if self._no_gpu_kernel(variable):
            article = "an" if variable.dtype[0] in "aeiou" else "a"
            return (
                f"{what} creates {article} {variable.dtype} variable {where}: TF fails with \"Could "
                f"not satisfy explicit device specification '{scope.device}' because no "
                f"supported kernel for GPU devices is available\" ({self._kernel_op(variable)} "
                f"has no GPU kernel for {variable.dtype})"
            )
        creates = "creates its variables" if variable.name in _LAYERS else "creates a variable"
        if scope.dynamic or self._towers:
            return (f"{what} {creates} {where}, a multi-GPU tower: shared variables belong on "
                    f"the CPU (the _variable_on_cpu idiom)")
        return f"{what} {creates} {where}: shared variables belong on the CPU"

    def _wrapper(self, site: _Site) -> tuple[_Wrapper | None, str]:
        """How to wrap a site's statement, and the note the findings end with."""
        variables = site.variables
        calls = {id(v.call) for v in variables if v.name not in _LAYERS}
        smalls = (site.statement.body if isinstance(site.statement, (
            cst.SimpleStatementLine, cst.SimpleStatementSuite)) else [])
        if len(calls) == len(variables) and all(
                id(_small_value(s)) in calls for s in smalls):
            text = f'{self._code(site.scope.call.func)}("/cpu:0")'
            return _Wrapper("cpu", text), f"; fix: create it under {text}"
        slims = {v.slim for v in variables}
        if len(slims) == 1 and None not in slims:
            slim = slims.pop()
            text = f'{slim}.arg_scope([{slim}.variable, {slim}.model_variable], device="/cpu:0")'
            return (_Wrapper("slim", text),
                    f"; fix: {slim}.arg_scope(..., device=\"/cpu:0\") places its variables on "
                    f"the CPU and leaves the compute on the GPU")
        device = self._v1_device(site.scope.call.func)
        if device is None:
            return None, ("; not fixed: no compat.v1 `device` to place only the variables "
                          "with; put them on the CPU by hand")
        return (_Wrapper("device-function", f"{device}({_DEVICE_FUNCTION})"),
                "; fix: a device function places its variables on the CPU and leaves the "
                "compute on the GPU")

    def _v1_device(self, func: cst.BaseExpression) -> str | None:
        """A spelling of compat.v1's `device` (it takes device functions) in this file."""
        qualified = self._qualified(func)
        if qualified in _V1_DEVICE:
            return self._code(func)
        if (qualified == "tensorflow.device" and isinstance(func, cst.Attribute)
                and "tensorflow" in self._names(func.value)):
            return f"{self._code(func.value)}.compat.v1.device"
        return self._v1_device_import

    def _resolve(self, statement: cst.CSTNode) -> _Wrapper | None:
        """Report a site's findings; the wrapper to apply, or None."""
        site = self._sites.get(statement)
        if site is None:
            return None
        live = [v for v in site.variables if not self.suppressed(v.call)]
        if not live:
            return None
        if len(live) < len(site.variables):
            wrapper, note = None, ("; not fixed: another variable in this statement is "
                                   "suppressed")
        else:
            wrapper, note = self._wrapper(site)
        for variable in live:
            self.report(variable.call, self._message(variable, site.scope) + note,
                        fixable=wrapper is not None, severity=self._severity(variable))
        return wrapper

    def _wrap(self, wrapper: _Wrapper, statements: list[cst.BaseStatement]) -> cst.With:
        first = statements[0]
        template = cst.ensure_type(cst.parse_statement(f"with {wrapper.text}:\n    pass\n"), cst.With)
        body = [first.with_changes(leading_lines=()), *statements[1:]]
        return template.with_changes(body=cst.IndentedBlock(body=body),
                                     leading_lines=first.leading_lines)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        wrappers = [self._resolve(s) for s in original_node.body]
        if not any(wrappers):
            return updated_node
        body: list[cst.BaseStatement] = []
        i, count = 0, len(wrappers)
        while i < count:
            wrapper = wrappers[i]
            if wrapper is None:
                body.append(updated_node.body[i])
                i += 1
                continue
            end = j = i + 1
            while j < count:
                if wrappers[j] == wrapper:
                    end = j = j + 1
                elif (wrapper.bridges and wrappers[j] is None
                      and isinstance(original_node.body[j], cst.SimpleStatementLine)
                      and original_node.body[j] not in self._with_variables):
                    j += 1
                else:
                    break
            body.append(self._wrap(wrapper, list(updated_node.body[i:end])))
            i = end
        return updated_node.with_changes(body=body)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite) -> cst.BaseSuite:
        wrapper = self._resolve(original_node)
        if wrapper is None:
            return updated_node
        line = cst.SimpleStatementLine(body=updated_node.body,
                                       trailing_whitespace=updated_node.trailing_whitespace)
        return cst.IndentedBlock(body=[self._wrap(wrapper, [line])])


VariablesToCpu.codemod = VariablesToCpuCodemod
