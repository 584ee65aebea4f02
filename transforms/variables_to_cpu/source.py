"""The source surface of `variables-to-cpu`: the libcst codemod (see the
package docstring for the bug and the fix)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import BuiltinScope, FunctionScope, GlobalScope, ScopeProvider

from graphfix.source.codemod import (
    HOLE,
    RUNTIME_DIGITS,
    DeviceValues,
    Example,
    SourceCodemod,
    argument,
    device_argument,
    device_asked,
    device_template,
    device_template_filled,
    outside_global_variables,
    template_spec,
    trained,
)
from graphfix.source.fixes import Replace, WrapInWith
from graphfix.source.project.branches import first_variable_taken, taken_from
from graphfix.source.project.facts import library_module, tower_facts
from graphfix.source.project.names import AstTfNames
from graphfix.source.project.part import parsed
from graphfix.source.scopes import (
    descendants,
    enclosing,
    enclosing_function,
    inside,
    with_items_around,
)
from graphfix.source.vocabulary import (
    CREATES_VARIABLES,
    DEVICE_CALLS,
    GET_VARIABLE_CALLS,
    GLOBAL_STEP_MAKERS,
    LAYER_CALLS,
    LIBRARY_VARIABLE_MODULES,
    LIBRARY_WORDS,
    METRIC_CALLS,
    REUSED_UNDER_REUSE,
    SLIM_MODULES,
    VARIABLE_CALLS,
)

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
_INT32_MAX = 2**31 - 1
# Calls that create variables and compute too (a /cpu:0 scope would move the compute).
_COMPUTES = LAYER_CALLS | METRIC_CALLS


@dataclasses.dataclass(frozen=True)
class _GpuScope:
    """The innermost device scope over a variable, when it names a GPU."""

    call: cst.Call  # the `tf.device(...)` call
    device: str  # TF's spelling of the device, "N" for a runtime index: /device:GPU:N
    # A device function that means to pin variables but names only op type "Variable":
    # its name (it gives every op of another type, VariableV2 too, the GPU).
    misses_v2: str | None = None
    widening: Replace | None = None  # the fix: its comparison names today's variable ops too
    elsewhere: bool = False  # the device function is another file's (not this file's to fix)


@dataclasses.dataclass
class _Variable:
    """One variable-creating call under a GPU scope."""

    call: cst.Call
    name: str  # canonical TF name: Variable, layers.dense, slim.conv2d
    dtype: str | None
    resource: bool
    slim: str | None  # the slim module as the file spells it, for slim's own calls
    # For a call of a project function that creates variables (the project model's
    # answer): where the first of them is created, in words. It computes too.
    through: str | None = None


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


# The variable ops since TF 1.0: a device function that names one of them pins today's
# variables (one naming only "Variable", TF 0.x's op, pins none of them).
_VARIABLE_OPS_SINCE_1_0 = frozenset({"VariableV2", "VarHandleOp", "AutoReloadVariable"})
_WIDENED = ("Variable", "VariableV2", "VarHandleOp")  # what a widened test names


def _widened_note(scope: _GpuScope) -> str:
    if scope.elsewhere:
        return (f"; not fixed: make {scope.misses_v2} pin VariableV2 and VarHandleOp too, in "
                f"the file that defines it")
    if scope.widening is None:
        return (f"; not fixed: make {scope.misses_v2} pin VariableV2 and VarHandleOp too "
                "(its test is not a comparison graphfix rewrites)")
    return f"; fix: {scope.misses_v2}'s test names VariableV2 and VarHandleOp too"


def _classify_device(template: str) -> tuple[str, str, bool]:
    """(kind, TF's spelling, runtime index?) for a device template, as the graph surface's
    parser (`graphfix.graph.devices.DeviceSpec`) reads it. kind is `gpu`, `other` (names
    another device type), `partial` (no device type: `/job:worker`, which TF merges into
    the scope outside field by field, so the outer device type stays) or `unknown` (the
    device type is computed at run time)."""
    spec = template_spec(template)
    if spec is None:
        return "unknown", "", False
    if spec.device_type is None:
        return "partial", "", False
    kind = spec.device_type.upper()
    if RUNTIME_DIGITS in kind:
        return "unknown", "", False
    if kind not in ("GPU", "XLA_GPU"):
        return "other", "", False
    index = "*" if spec.device_index is None else str(spec.device_index)
    dynamic = RUNTIME_DIGITS in index
    text = "".join(f"/{field}:{value}" for field, value in (
        ("job", spec.job), ("replica", spec.replica), ("task", spec.task)) if value is not None)
    text += f"/device:{kind}:{'N' if dynamic else index}"
    return "gpu", text.replace(RUNTIME_DIGITS, "N"), dynamic


def _calls_in(function: cst.Lambda) -> list[cst.Call]:
    """The calls in a lambda's body, outermost first."""
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    function.body.visit(_Calls())
    return found


def _branches(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values an expression may take: each branch of a conditional expression
    (`a if test else b`), else the expression itself."""
    if isinstance(value, cst.IfExp):
        return _branches(value.body) + _branches(value.orelse)
    return [value]


def _target_path(target: cst.BaseExpression, name: str) -> tuple[int, ...] | None:
    """Where a loop target binds `name`: () for the name itself, the positions through
    nested tuples (`i, (d, x)`: d at (1, 0)); None where it does not bind it so."""
    if isinstance(target, cst.Name):
        return () if target.value == name else None
    if isinstance(target, (cst.Tuple, cst.List)):
        for position, element in enumerate(target.elements):
            if isinstance(element, cst.StarredElement):
                return None
            inner = _target_path(element.value, name)
            if inner is not None:
                return (position, *inner)
    return None


def _iterated_at(iterable: cst.BaseExpression, path: tuple[int, ...]
                 ) -> cst.BaseExpression | None:
    """The list whose items a loop target's part at `path` takes: `iterable` itself for the
    whole target, else through `enumerate(xs)` (position 1: xs) and `zip(a, b, ...)`
    (position k: its k-th list); None for any other iterable."""
    if not path:
        return iterable
    if not isinstance(iterable, cst.Call) or any(a.star or a.keyword for a in iterable.args):
        return None
    called = get_full_name_for_node(iterable.func)
    position, rest = path[0], path[1:]
    if called == "enumerate" and position == 1 and len(iterable.args) == 1:
        return _iterated_at(iterable.args[0].value, rest)
    if called == "zip" and position < len(iterable.args):
        return _iterated_at(iterable.args[position].value, rest)
    return None


def _small_value(statement: cst.BaseSmallStatement) -> cst.BaseExpression | None:
    """The value a small statement computes, for `x = v`, `x: T = v`, `v` and `return v`."""
    if isinstance(statement, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Return)):
        return statement.value
    return None


class VariablesToCpuCodemod(SourceCodemod):
    """Place variables created under a GPU `tf.device` scope on `/cpu:0`.

    Found: a call that creates variables (`tf.Variable`, `tf.get_variable`, `tf.layers.*`,
    slim layers and `slim.variable`/`slim.model_variable`, the global step, the local
    variables of `tf.metrics.*`; every import alias and compat.v1 spelling) whose innermost
    device scope, in the same function, is a GPU string: a literal, one built with `%`, `+`,
    `str.format` or an f-string, or a name looped over a literal list of device strings
    that names a GPU (`for d in ["/gpu:0", "/gpu:1"]: with tf.device(d):`). An inner
    `tf.device('/cpu:0')`, a device function (`replica_device_setter`, any non-string), a
    slim `arg_scope(..., device=...)` or `device=` argument, or no scope at all: left alone.
    An arg_scope places only what the functions it names make: slim's layers make their
    weights through `slim.model_variable`, which passes its own `device=` on to
    `slim.variable`, so `arg_scope([slim.variable], device='/cpu:0')` places a direct
    `slim.variable(...)` and leaves the layers' weights on the tower's GPU: found
    (yeekit24/CapsNet-Tensorflow).
    A dtype whose variable op has no GPU kernel (int32, int8, int16, uint8, string, ...) is
    an error, TF's own. Other variables are warnings in tower code only, as the graph surface
    finds the variables towers on two or more GPUs share: under a device built at run time
    (`'/gpu:%d' % i`), one looped over from a list, in a function that chooses a GPU so
    elsewhere, or in a file that names more than one fixed GPU. A single-GPU model's float
    variables are no finding (on the CPU, each step would copy every weight to the GPU),
    nor are those of a function on one fixed GPU beside another function's towers (a
    script's `train` beside its `train_multi_gpu`), nor those of the one fixed GPU where,
    after the tower loop and in no loop, the towers' results are gathered (their gradients
    summed and the optimizer's slots made there), where what the statement binds is read by
    no later tower: no two GPUs share them (openai/pixel-cnn's `adam_updates` under
    `tf.device('/gpu:0')`), nor those of one GPU beside tower code that chooses no GPU: a
    device built at run time naming the CPU (`local_job_device + '/cpu'`) is no tower
    function's scope, and a loop whose device scopes name only jobs, tasks or the CPU
    builds replicas on tasks, not towers on GPUs (deepmind/scalable_agent's learner
    under `tf.device('/gpu')` beside its loop of actors). The transform's `scope` decides as on
    the graph surface: `every-gpu-variable` finds every variable under a GPU scope, one GPU
    or towers; `no-kernel` only those without a GPU kernel.

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

    Reported but not fixed: a variable created in a compound statement's
    header (`for v in [tf.Variable(0)]:`), a statement of which another variable is
    suppressed, and a layer call where no compat.v1 `device` can be spelled.

    Devices the project gives from elsewhere. A name given to `tf.device` that one
    assignment of its scope binds is read as its value (`gpu_name = "/gpu:" + str(i)`,
    then `with tf.device(gpu_name):`). A name bound in several places (`device =
    available_devices[i]` in one branch, a device function in the other) is any of its
    values, and an item of a device list (`tf.device(available_devices[i])`) any of the
    list's: a literal list, a comprehension (`[worker_device + gpu for gpu in gpus()]`),
    the list a function of the project returns, the local devices' names
    (`[d.name for d in device_lib.list_local_devices() if d.device_type == "GPU"]`): a
    GPU among them makes the scope a tower's (mozilla/DeepSpeech's towers).
    A variable helper's own device scope that names only a job and a task
    (`with tf.device(worker_device)`, `worker_device = "/job:%s/task:%d" % ...`) places
    nothing: TF merges it into the caller's spec field by field and the tower's GPU stays,
    so a tower's call of it is found (a helper scope naming the CPU, `worker_device +
    "/cpu:0"`, or '/cpu:0' pins its variables: none). A device type filled in at run time from a flags
    object (`"/{}:{}".format(config.device_type, i)`) takes the default of the flag that a
    file connected by imports defines once (`flags.DEFINE_string("device_type", "gpu",
    ...)`, `add_argument("--device_type", default="gpu")`): the device the program runs
    with unless the user says otherwise. A device function that another module of the
    project defines (`from common import assign_to_gpu`) is read there as one of the file's
    own: pinning op type "Variable" only, it is a finding, not fixed (the test to widen is
    that module's). An int32 variable's finding is a warning where a script that imports
    the file (directly or not) sets allow_soft_placement=True, and says which.
    A tower's own state is no finding (unless `scope` is `every-gpu-variable`): a
    `tf.Variable` not trained (`trainable=False`) and kept out of GLOBAL_VARIABLES
    (`collections=[tf.GraphKeys.LOCAL_VARIABLES]`), made anew in each tower, read by that
    tower alone: no gradient or saver pairs it across towers, and the graph surface, which
    warns where towers on two GPUs read a variable, finds none (rafaljozefowicz/lm's
    recurrent states). Trained or global, a `tf.Variable` a tower's model function
    makes is the model's state the towers are meant to share: found. Nor are the
    variables a tower makes in its own variable scope (`with tf.variable_scope("tower_%d"
    % i)`, named from the tower loop's variable) that never reuses (no `reuse=True`,
    AUTO_REUSE or `reuse_variables()` in it): each tower has its own copy and no GPU reads another's (replicated training,
    tf_cnn_benchmarks' `replicated` mode; towers that should share and do not are
    shared-variables' finding). A get-or-create global step counts so in an `if` in that
    scope only (made by one tower: a later tower's call would get the first one's back).
    Nor is a float `tf.Variable` called in the body of the tower loop, in no `if` there
    (every pass makes its own), whose value is bound or listed, not handed to a call that
    may keep it (NVlabs/stylegan2's per-tower data buffers, tf_cnn_benchmarks' replicated
    copies): each is read on its own pass's GPU. A scope whose GPU is chosen at run time
    from names the module binds once (`tf.device('/gpu:' + str(FLAGS.gpu))`, in no loop)
    and a tower loop that turns once (`for i in range(0, gpu_num)`, `gpu_num = 1`) build
    one tower: a single-GPU script. Tower code is read in a module that has `tf` only
    through a star import of one of the project's modules (`from ops import *`, ops.py's
    `import tensorflow as tf`) as in one that imports it.

    The produced code needs TensorFlow only. Findings and fixes honour
    `# graphfix: ignore[variables-to-cpu]` on the line or on an enclosing `with` line.
    A call of one of the project's functions under a GPU scope counts where the function
    creates variables that no device scope of its own places, directly or through the
    functions it calls (the project model follows the calls, in the file and across
    modules: a tower's `conv_net(x)` building tf.layers; a `_variable_on_cpu` helper places
    its own). So do the project's methods (`self.build_model()` inherited from a base class
    in another module, `super().build_model()`, `model.build()` after `model = Model()`),
    the methods called on an attribute of an object's own that its class binds once
    (`self._model.compute_loss(x)` after `self._model = lanenet.LaneNet(cfg)`, followed in
    the calls a tower's call reaches), a name assignments bind to the project's functions
    (`inference, loss = resnet, resnet_loss` in one branch of a flag's test, `inference =
    cnn` in another: any of them),
    a class's constructor (a base's `__init__` calling `self.setup()` runs the subclass's
    `setup` where the base's is abstract; a layer chained on `self.feed(x).conv(...)` is
    self's `conv`), the functions a call is given one level deep (by name, or
    called in a lambda: `run(lambda x: model_fn(x))`), and the methods a function calls on
    an object it is given (`tower_loss(x, net)` calling `net.compute_loss`, where the caller
    made `net = Net(...)`). A variable made in an arm of an `if` on a parameter of its
    function (`if useMultiGPU:` pinning a get_variable on the CPU, `else: tf.Variable(...)`)
    counts only where some call path from the tower's call takes that arm: where every call
    reaching the function gives the parameter the other truth (a literal, or the caller's
    own parameter passed on, its value known: `inference(x, useMultiGPU=True)` passing it
    down), the arm is not built by the towers (binLearning/tensorflow_mnist). A call
    passing True as `reuse=` (a literal, or a name set True before it in its function,
    with no branch or loop between), or to a parameter the
    function passes on as `reuse=`, reuses what an earlier call created and counts for
    nothing: the finding is at the creating call. So does a call of a template (a name
    bound to `tf.make_template(...)`) after its first call, which makes its variables
    (pixel-cnn's `model(x_init, init=True)` outside every device scope, then `model(xs[i])`
    in the towers); a first call in tower 0 makes them on GPU 0, and is found.
    So does a later call of one of the file's functions whose whole body is one variable
    scope, named by a literal, that gets or creates (`reuse=tf.AUTO_REUSE`, or a `reuse`
    parameter defaulting to it and not given), after a call of it sure to run first:
    it gets back the same variables (taki0112/StyleGAN-Tensorflow's discriminator, called
    on the real and then the fake images in one tower).
    So does the get_variable family (`tf.get_variable`, layers, slim) where a variable scope
    with `reuse=True` is on already (or `reuse_variables()` was called, as the project model
    reads it: `FileView.reuses_at`): a tower rebuilt under a GPU scope for a second input
    gets back the variables made before, wherever they are; a `tf.Variable` there is made
    anew, and found.
    It computes too, so it gets the device function.
    A call of a function given as a parameter (`model_fn(features)`, its body out of
    sight) counts where a variable scope around it, in a loop, reuses on some passes and
    not the first (`reuse=i > 0`, read off the loop's variable, or get-or-create:
    `reuse=tf.AUTO_REUSE`, PaParaZz1/vehicle-triplet-reid), and no other call there
    creates variables or calls another parameter: the reuse is written for the variables
    the first pass makes, and this call is the one that can (vahidk/TensorflowFramework's
    make_parallel). It computes too: the device function.
    In tower code, a `tf.get_variable` call (direct, or first in a project function the
    call runs) under a context manager of the project that rebinds `tf.get_variable` to a
    getter opening a fixed GPU's scope (`with ops.variables_on_gpu0():`,
    brain-research/self-attention-gan) makes the shared variables on that GPU: a warning,
    not fixed (the getter's scope is innermost when the variable is made, so a scope
    around the call cannot move it; the context manager is what to change).
    A metric's variables (float totals and counts) have GPU kernels: a warning.
    Not seen: device strings passed in as parameters, a job-only device scope of a function
    between the tower and the helper (only the helper's own scopes are read so), Keras
    layer objects, RNN cells (the kernels `dynamic_rnn` makes for a cell: DeepSpeech at
    b61fb80982), methods of instances held in attributes bound more than once or not to a
    call (`self.model = model` given in), a function a factory returns (slim's
    `nets_factory.get_network_fn(...)`, calling one of a dict of nets).
    """

    DESCRIPTION = "Place variables created under GPU device scopes on /cpu:0."
    VALID = (
        """\
        import tensorflow.compat.v1 as tf

        with tf.device("/cpu:0"):
            step = tf.Variable(0, name="step")
        """,
        """\
        import tensorflow.compat.v1 as tf

        with tf.device("/gpu:0"):
            logits = tf.matmul(tf.ones([2, 4]), tf.ones([4, 10]))
        """,
        """\
        import tensorflow.compat.v1 as tf

        with tf.device("/gpu:0"):  # one GPU: its float variables stay on it
            w = tf.get_variable("w", [4, 2])
            logits = tf.matmul(tf.ones([2, 4]), w)
        """,
    )
    INVALID = (
        Example(
            """\
            import tensorflow.compat.v1 as tf

            with tf.device("/gpu:0"):
                step = tf.Variable(0, name="step")
            """,
            fixed="""\
            import tensorflow.compat.v1 as tf

            with tf.device("/gpu:0"):
                with tf.device("/cpu:0"):
                    step = tf.Variable(0, name="step")
            """,
            says='has no GPU kernel for int32'),
        Example(
            """\
            import tensorflow as tf

            for i in range(2):
                with tf.device("/gpu:%d" % i):
                    w = tf.compat.v1.get_variable("w", [4, 2])
            """,
            fixed="""\
            import tensorflow as tf

            for i in range(2):
                with tf.device("/gpu:%d" % i):
                    with tf.device("/cpu:0"):
                        w = tf.compat.v1.get_variable("w", [4, 2])
            """,
            says='a multi-GPU tower'),
    )

    # -- resolving names ----------------------------------------------------------------------

    # -- the module ---------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        # More than one fixed GPU named in the file: the towers spelled out, whichever
        # functions hold them (tower code proper is the project's, `_in_towers`).
        calls = self.nodes(cst.Call)
        gpus: set[str] = set()
        for call in calls:
            if self.tf_canonical(call.func) in DEVICE_CALLS:
                for template in self._device_templates(call):
                    kind, device, dynamic = _classify_device(template)
                    if kind == "gpu" and not dynamic:
                        gpus.add(device)
        self._stages = self._stages_of_one_model()
        self._several_gpus = len(gpus) > 1 and not self._stages
        self._sites: dict[cst.CSTNode, _Site] = {}
        self._with_variables: set[cst.CSTNode] = set()  # statements creating any variable
        for call in calls:
            self._find_variable(call)
        self._find_parameter_models(calls)
        self._find_under_patched_getters()
        plans = {statement: self._plan(site) for statement, site in self._sites.items()}
        # Under a device function that misses VariableV2 an inner wrap would not help (the
        # outer function has the last word): the fix is the function's own test.
        plans.update({statement: (live, None, _widened_note(self._sites[statement].scope))
                      for statement, (live, _, _) in plans.items()
                      if self._sites[statement].scope.misses_v2 is not None})
        wraps = self._wraps({s: wrapper for s, (_, wrapper, _) in plans.items()})
        for statement, (live, wrapper, note) in plans.items():
            site = self._sites[statement]
            fix = (site.scope.widening if site.scope.misses_v2 is not None
                   else wraps.get(statement))
            for variable in live:
                self.report(variable.call, self._message(variable, site.scope) + note,
                            fix=fix, severity=self._severity(variable))
        self.findings.sort(key=lambda f: (f.line or 0, f.col or 0))

    def _stages_of_one_model(self) -> list[tuple[int, int]]:
        """The line ranges of the `with tf.device(...)` blocks that hold stages of one
        model, no towers; none unless every device scope of the file naming a GPU names one
        fixed GPU at every entry (no `SourceCodemod.device_changes`, no GPU chosen at run
        time), two GPUs or more are named, and no function is called under two different
        GPUs (Linfeng-Tang/DRLIE's build_model: encoders and discriminators under
        `tf.device('/gpu:0')`, decoders under `tf.device('/gpu:1')`). Each stage's
        variables are made and read on its own GPU, none is shared between GPUs; the same
        code under two GPUs (towers spelled out) is no stage split."""
        callees_on: dict[str, set[str]] = {}
        blocks: list[tuple[int, int]] = []
        for call in self.nodes(cst.Call):
            if self.tf_canonical(call.func) not in DEVICE_CALLS:
                continue
            templates = [_classify_device(t) for t in self._device_templates(call)]
            if any(kind == "gpu" and dynamic for kind, _, dynamic in templates):
                return []
            fixed = {device for kind, device, _ in templates if kind == "gpu"}
            if not fixed:
                continue
            item = self.parent(call)
            block = self.parent(item) if isinstance(item, cst.WithItem) else None
            if not isinstance(block, cst.With) or len(fixed) > 1 or self.device_changes(item):
                return []
            (device,) = fixed
            callees_on.setdefault(device, set()).update(
                self.code(c.func) for c in descendants(block.body, cst.Call))
            span = self.code_range(block)
            blocks.append((span.start.line, span.end.line))
        devices = list(callees_on)
        if len(devices) < 2 or any(callees_on[a] & callees_on[b]
                                   for i, a in enumerate(devices) for b in devices[i + 1:]):
            return []
        return blocks

    def _stage_not_tower(self, scope: _GpuScope) -> bool:
        """Whether a GPU scope is one of the file's stage blocks (`_stages_of_one_model`)
        and the block itself runs once, in no tower code but what the stage blocks make
        (tower code reaches a stage block only through a tower loop or tower function
        around it)."""
        line = self.position(scope.call)[0]
        if not any(first <= line <= last for first, last in self._stages):
            return False
        towers = [(first, last) for first, last in self._tower_spans if not any(
            s_first <= first and last <= s_last for s_first, s_last in self._stages)]
        return not any(first <= line <= last for first, last in towers)

    def _outermost_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The top-level function or method holding `node`; None in the module body."""
        found, current = None, self.parent(node)
        while current is not None:
            if isinstance(current, cst.FunctionDef):
                found = current
            current = self.parent(current)
        return found

    def _in_towers(self, scope: _GpuScope, call: cst.Call) -> bool:
        """Whether the variables made under a GPU scope are the towers': the call is tower
        code (`FileView.tower_code`: it runs once per tower, in this file or called from
        towers elsewhere), the file names several fixed GPUs, or the function holding the
        scope builds towers elsewhere in its body (a first call before the tower loop;
        not where the towers' results are gathered, `_gathering`)."""
        if self._stage_not_tower(scope):
            return False
        if self._several_gpus or self._in_tower_code(self.position(call)[0]):
            return True
        function = self._outermost_function(scope.call)
        return (any(self._function_at(first) is function
                    and not self._towers_on_no_gpu(first, last)
                    for first, last in self._tower_spans)
                and not self._gathering(scope, call))

    def _towers_on_no_gpu(self, first: int, last: int) -> bool:
        """Whether the tower code at lines `first`..`last` of this file chooses no GPU: it
        holds device scopes, and every value the device reader knows for each names only
        a job, a task or a CPU (deepmind/scalable_agent's loop of actors, each enqueueing
        under `tf.device(shared_job_device)`, which is '' or '/job:learner/task:0'). Such
        a loop builds replicas on tasks, not towers on GPUs: a fixed GPU elsewhere in its
        function is the one GPU of a single-GPU model."""
        scopes = [call for call in self._device_calls()
                  if first <= self.position(call)[0] <= last]
        return bool(scopes) and all(
            (templates := self._device_templates(call))
            and all(_classify_device(t)[0] in ("partial", "other") for t in templates)
            for call in scopes)

    def _device_calls(self) -> list[cst.Call]:
        """The file's `device(...)` calls."""
        if "_devices" not in self.__dict__:
            self._devices = [call for call in self.nodes(cst.Call)
                             if self.tf_canonical(call.func) in DEVICE_CALLS]
        return self._devices

    def _function_at(self, line: int) -> cst.FunctionDef | None:
        """The top-level function or method whose lines hold `line`; None in the module
        body (`_outermost_function` of the code there)."""
        if "_outermost" not in self.__dict__:
            self._outermost = [(self.code_range(f).start.line, self.code_range(f).end.line, f)
                               for f in self.nodes(cst.FunctionDef)
                               if self._outermost_function(f) is None]
        return next((f for first, last, f in self._outermost if first <= line <= last), None)

    @property
    def _tower_spans(self) -> list[tuple[int, int]]:
        """This file's tower code, as line ranges (`FileView.tower_code`), read once."""
        if "_towers" not in self.__dict__:
            spans = set(self.project.tower_code()) | self._towers_through_star_imports()
            self._towers = [span for span in sorted(spans)
                            if not self._one_gpu_span(span[0])]
        return self._towers

    def _towers_through_star_imports(self) -> set[tuple[int, int]]:
        """This file's own tower code where the module its device scopes are called on
        (`tf.device`) comes to it only through a star import of one of the project's
        modules (taki0112/StyleGAN-Tensorflow: `from ops import *`, ops.py's `import
        tensorflow as tf`). The project model reads a file's towers through the file's own
        imports, which bind no such name; read here with the star-imported binding added."""
        star_bound: dict[str, str] = {}
        for call in self._device_calls():
            head = call.func
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name) and not self.tf_names.imported_names(head):
                qualified = self.project.tf_name_of_star(head.value)
                if qualified is not None:
                    star_bound[head.value] = qualified
        tree = parsed(self._tree_code()) if star_bound else None
        if tree is None:
            return set()
        names = AstTfNames(tree)
        for name, qualified in star_bound.items():
            names.imports.setdefault(name, set()).add(qualified)
        return {(first, last) for first, last in tower_facts(tree, names)["spans"]}

    def _one_gpu_span(self, first: int) -> bool:
        """Whether the tower code starting at line `first` of this file builds one tower
        only: a `with` whose GPU is chosen at run time from names the module binds once
        (`tf.device('/gpu:' + str(FLAGS.gpu))`, entered in no loop: the same GPU at every
        entry). A tower loop over a module constant of one GPU (`gpu_num = 1`) is not: the
        constant is the script's setting (lomyal/simple-word-embedding's authors ran theirs
        on several GPUs and fixed its placement, 5987ecf)."""
        for node in self.nodes(cst.With):
            if self.position(node)[0] != first:
                continue
            devices = [item.item for item in node.items
                       if self._chooses_gpu_at_run_time(item.item)]
            return bool(devices) and all(self._same_gpu_each_run(d) for d in devices)
        return False

    def _module_binds_once(self, name: cst.Name) -> bool:
        """Whether `name`, where it is read, is the module's (or a builtin): one binding,
        at the module's top level, or none of the file's (`str`)."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return False
        bindings = list(scope[name.value])
        if any(isinstance(b.scope, BuiltinScope) for b in bindings):
            return len(bindings) == 1
        return len(bindings) == 1 and isinstance(bindings[0].scope, GlobalScope)

    def _same_gpu_each_run(self, call: cst.Call) -> bool:
        """Whether a device scope chosen at run time names the same GPU at every entry: what
        it is given (through one assignment of its scope) reads only names the module binds
        once (a flag, a constant), none of its function's (a parameter, a loop's target,
        `self`)."""
        given = device_asked(call, lambda node: self.get_metadata(ScopeProvider, node, None),
                             self.parent)
        if given is None:
            return False
        names = [n for n in descendants(given, cst.Name)
                 if not (isinstance(self.parent(n), cst.Attribute) and self.parent(n).attr is n)
                 and not (isinstance(self.parent(n), cst.Arg) and self.parent(n).keyword is n)]
        return all(self._module_binds_once(n) for n in names)

    def _in_tower_code(self, line: int) -> bool:
        return any(first <= line <= last for first, last in self._tower_spans)

    def _gathering(self, scope: _GpuScope, call: cst.Call) -> bool:
        """Whether the fixed GPU scope over `call` is where a tower loop's results are
        gathered, no tower itself: in no loop, after a scope of its function that chooses
        the GPU at run time, and what the statement making the variables binds is read
        in no such scope after it (openai/pixel-cnn's train.py: the towers' gradients
        summed under `tf.device('/gpu:0')`, whose Adam moments no tower reads). Its
        variables live on one GPU and no two towers share them, as the graph surface,
        which warns where towers on two GPUs read a variable, finds."""
        if enclosing(scope.call, self.parent, cst.For, cst.While, within_function=True):
            return False
        statement = enclosing(call, self.parent, cst.SimpleStatementLine,
                              cst.SimpleStatementSuite, within_function=True)
        if statement is None:
            return False
        bound: set[str] = set()
        for small in statement.body:
            targets = ([t.target for t in small.targets] if isinstance(small, cst.Assign)
                       else [small.target] if isinstance(small, (cst.AugAssign, cst.AnnAssign))
                       else [])
            for target in targets:
                if descendants(target, cst.Attribute, cst.Subscript):
                    return False  # (an attribute or an item: read where this cannot see)
                bound |= {n.value for n in descendants(target, cst.Name)}
        function = self._outermost_function(scope.call)
        start = self.position(scope.call)
        towers = [w for w in self.nodes(cst.With)
                  if self._outermost_function(w) is function and any(
                      self._chooses_gpu_at_run_time(item.item) for item in w.items)]
        if not any(self.position(w) < start and not inside(scope.call, w, self.parent)
                   for w in towers):
            return False
        return not any(self.position(w) > start and any(
            name.value in bound for name in descendants(w.body, cst.Name)) for w in towers)

    def _chooses_gpu_at_run_time(self, expr: cst.BaseExpression) -> bool:
        """Whether a `with` item is a device scope whose GPU is chosen at run time."""
        if not (isinstance(expr, cst.Call) and self.tf_canonical(expr.func) in DEVICE_CALLS):
            return False
        return any(_classify_device(t)[0] == "gpu" and _classify_device(t)[2]
                   for t in self._device_templates(expr))

    # -- finding variables --------------------------------------------------------------------

    def _find_variable(self, node: cst.Call) -> None:
        """Note a call that creates variables: its statement, and under a GPU scope the site
        to wrap (or a finding, for one in a compound statement's header)."""
        name = self.tf_canonical(node.func)
        through = None
        if name in REUSED_UNDER_REUSE and self.project.reuses_at(self.position(node)[0]):
            return  # it gives back the variable an earlier call made, wherever that is
        if name not in CREATES_VARIABLES and name not in METRIC_CALLS:
            through = self._connected_module(node) if name is None else None
            if through is None and name is None:
                through = self._created_through(node)
            if through is None:
                through = self._created_by_arguments(node, name)
            if through is None:
                return
            name, where, dtype = through
        slim_family = name.startswith(("slim.", "contrib.layers."))
        statement, scope = self._scope_of(node, slim_family, name if slim_family else None)
        if statement is not None:
            self._with_variables.add(statement)
        if scope is None:
            return
        if slim_family and argument(node, "device", None) is not None:
            return  # slim.variable(..., device=...) places itself
        use_resource = argument(node, "use_resource", None)
        if through is not None:
            variable = _Variable(call=node, name=name, dtype=dtype, resource=False, slim=None,
                                 through=where)
        else:
            variable = _Variable(
                call=node,
                name=name,
                dtype=self._variable_dtype(node, name),
                resource=isinstance(use_resource, cst.Name) and use_resource.value == "True",
                slim=self._slim_module(node.func) if name.startswith("slim.") else None,
            )
        if (not self._flagged(variable, scope) or self._tower_private(variable)
                or self._in_own_tower_scope(variable) or self._made_per_pass(variable, scope)):
            return
        if statement is None:
            self.report(node, self._message(variable, scope)
                        + "; not fixed: it is created in a compound statement's header, "
                          "create it under tf.device(\"/cpu:0\") by hand",
                        severity=self._severity(variable))
            return
        site = self._sites.setdefault(statement, _Site(statement, scope, []))
        site.variables.append(variable)

    def _find_parameter_models(self, calls: list[cst.Call]) -> None:
        """Note the calls of a function given as a parameter that make a tower's shared
        variables, read off the reuse scope around them (`_passes_reusing`): in each pass
        of a tower loop, `with tf.variable_scope(scope, reuse=i > 0):` around
        `model_fn(...)` and no other call there that creates variables (vahidk's
        TensorflowFramework: make_parallel's towers, one per GPU). Reuse on every pass but
        the first is how shared variables are written: the first pass makes them, through
        get_variable, in the one call that can, on its GPU."""
        for call in calls:
            func = call.func
            if not isinstance(func, cst.Name) or not self._is_parameter(func):
                continue
            reusing = self._passes_reusing(call)
            block = None if reusing is None else self.parent(reusing).body
            if block is None or any(
                    statement in self._with_variables
                    for statement in descendants(block, cst.SimpleStatementLine)):
                continue
            others = [c for c in descendants(block, cst.Call)
                      if c is not call and isinstance(c.func, cst.Name)
                      and self._is_parameter(c.func)]
            if others:
                continue  # (which of them makes the variables, this cannot tell)
            statement, scope = self._scope_of(call, False)
            if statement is None or scope is None:
                continue
            where = (f"the function passed in as {func.value}, whose first pass under "
                     f"{self.code(reusing.item)} makes what the later "
                     f"passes reuse")
            variable = _Variable(call=call, name="get_variable", dtype=None, resource=False,
                                 slim=None, through=where)
            if not self._flagged(variable, scope) or self._in_own_tower_scope(variable):
                continue
            self._with_variables.add(statement)
            site = self._sites.setdefault(statement, _Site(statement, scope, []))
            site.variables.append(variable)

    def _find_under_patched_getters(self) -> None:
        """Report the get_variable calls, direct or through the project's functions, in tower
        code under a context manager of the project that rebinds `tf.get_variable` to one
        opening a fixed GPU's device scope (`_getter_patched_onto`: brain-research's
        self-attention-gan, `with ops.variables_on_gpu0():` in each tower). Every tower
        reads the variables made on that GPU. Not fixed: the patched getter's own scope is
        innermost at creation and wins over any scope put around the call; the context
        manager is what to change."""
        for item in self.nodes(cst.WithItem):
            patched = self._getter_patched_onto(item.item)
            if patched is None:
                continue
            manager, device = patched
            for call in descendants(self.parent(item).body, cst.Call, skip_lambdas=True):
                line = self.position(call)[0]
                if (enclosing_function(call, self.parent)
                        is not enclosing_function(item, self.parent)
                        or not self._in_tower_code(line)):
                    continue
                made = self._made_through_get_variable(call)
                if made is None:
                    continue
                statement, scope = self._scope_of(call, False)
                if statement in self._sites or scope is not None:
                    continue  # (a GPU scope of its own around it: found as such)
                self.report(call, (
                    f"{self.code(call.func)} creates {made} under {self.code(item.item)}, "
                    f"whose tf.get_variable places each variable on {device}, in a "
                    f"multi-GPU tower: every tower reads them there; shared variables belong "
                    f"on the CPU; not fixed: make {manager} pin \"/cpu:0\" (its getter's "
                    f"device scope, innermost when a variable is made, wins over any around "
                    f"the call)"), severity="warning")

    def _made_through_get_variable(self, call: cst.Call) -> str | None:
        """How `call` makes a variable with `tf.get_variable`, in words: a direct call
        spelled as an attribute of the module (`tf.get_variable(...)`: the rebound
        attribute is what it calls), or a call of the project's functions whose first
        variable comes from get_variable; None otherwise."""
        name = self.tf_canonical(call.func)
        if name is not None:
            return ("a variable" if name in GET_VARIABLE_CALLS
                    and isinstance(call.func, cst.Attribute) else None)
        through = self._created_through(call)
        if through is None or through[0].rsplit(".", 1)[-1] != "get_variable":
            return None
        return f"variables ({through[1]})"

    def _getter_patched_onto(self, expr: cst.BaseExpression) -> tuple[str, str] | None:
        """(the context manager as called, the device) where `expr` calls a context
        manager, in this module or another of the project, that assigns a function of its
        own to `<module>.get_variable` while it is open and whose function opens a device
        scope on a fixed GPU around the original getter (`tf.get_variable = new_fn`, `def
        new_fn(*args, **kwargs): with tf.device('/gpu:0'): return old_fn(*args,
        **kwargs)`); None for any other `with` item."""
        if not isinstance(expr, cst.Call) or self.tf_canonical(expr.func) is not None:
            return None
        spelled = get_full_name_for_node(expr.func)
        if spelled is None:
            return None
        tail = spelled.rsplit(".", 1)[-1]
        functions = [f for f in self._functions_named(tail) if "." not in spelled]
        if not functions:
            elsewhere = self._device_values_elsewhere(spelled)
            functions = [] if elsewhere is None else [elsewhere[1]]
        if len(functions) != 1:
            return None
        function = functions[0]
        if not descendants(function.body, cst.Yield):
            return None
        patches = {assign.value.value for assign in descendants(function.body, cst.Assign)
                   if isinstance(assign.value, cst.Name) and any(
                       isinstance(t.target, cst.Attribute)
                       and t.target.attr.value == "get_variable" for t in assign.targets)}
        for inner in descendants(function.body, cst.FunctionDef):
            if inner.name.value not in patches:
                continue
            for with_item in descendants(inner.body, cst.WithItem):
                given = (device_argument(with_item.item)
                         if isinstance(with_item.item, cst.Call)
                         and (get_full_name_for_node(with_item.item.func) or "")
                         .rsplit(".", 1)[-1] == "device" else None)
                template = None if given is None else device_template(given)
                if template is None:
                    continue
                kind, device, dynamic = _classify_device(template)
                if kind == "gpu" and not dynamic:
                    return f"{spelled}()", device
        return None

    def _is_parameter(self, name: cst.Name) -> bool:
        """Whether `name` is a parameter of the function whose body holds it."""
        function = enclosing_function(name, self.parent)
        if function is None:
            return False
        params = function.params
        return name.value in {p.name.value for p in (
            *params.posonly_params, *params.params, *params.kwonly_params)}

    def _passes_reusing(self, call: cst.Call) -> cst.WithItem | None:
        """The `with variable_scope(..., reuse=...)` item around `call`, in its function,
        that reuses on some passes of a loop around it and not on others: its `reuse=`
        reads that loop's variable (`reuse=i > 0`, `reuse=bool(i)`) or gets or creates in
        a loop (`_auto_reuse_in_a_loop`); None where there is none."""
        for around in with_items_around(call, self.parent):
            if isinstance(around, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            item = around.item
            if not (isinstance(item, cst.Call) and (self.tf_canonical(item.func) or "")
                    .rsplit(".", 1)[-1] == "variable_scope"):
                continue
            reuse = argument(item, "reuse", None)
            if self._auto_reuse_in_a_loop(item, reuse):
                return around
            if reuse is None or isinstance(reuse, cst.Name):
                continue  # (True, False, None, or a name bound elsewhere: no pass of ours)
            used = {node.value for node in descendants(reuse, cst.Name)}
            loop = enclosing(item, self.parent, cst.For, within_function=True)
            while loop is not None:
                if used & {node.value for node in descendants(loop.target, cst.Name)}:
                    return around
                loop = enclosing(loop, self.parent, cst.For, within_function=True)
        return None

    def _auto_reuse_in_a_loop(self, item: cst.Call, reuse: cst.BaseExpression | None
                              ) -> bool:
        """Whether a variable scope `item` gets or creates (`reuse=tf.AUTO_REUSE`) inside a
        loop of its function: the first pass creates what the later passes get back, as
        `reuse=i > 0` says in other words (PaParaZz1/vehicle-triplet-reid's
        make_parallel)."""
        return (reuse is not None and self.tf_canonical(reuse) == "AUTO_REUSE"
                and enclosing(item, self.parent, cst.For, within_function=True) is not None)

    def _created_through(self, call: cst.Call) -> tuple[str, str, str | None] | None:
        """(name, where, dtype) of the first variable a call of one of the project's
        functions creates where no device scope of that function places it (the project
        model follows the calls, across modules: `conv_net(x)` building tf.layers);
        None if it creates none, or `call` calls no project function."""
        callee = get_full_name_for_node(call.func)
        if callee is None:
            return None
        if (self._reuses(call, callee) or self._template_reuses(call)
                or self._cache_reuses(call, callee)
                or self._auto_reuse_repeats(call, callee)):
            return None  # the call reuses what an earlier call (the first tower's) created
        line = self.position(call)[0]
        found = self._described(first_variable_taken(self.project, callee, line))
        if found is None and isinstance(call.func, cst.Name):
            found = self._created_through_alias(call.func, line)
        if found is None and self._scope_of(call, False)[1] is not None:
            found = self._placed_without_device_type(callee, line)
        if found is not None:
            return found
        passed = [(i if given.keyword is None else given.keyword.value, given.value.value)
                  for i, given in enumerate(call.args)
                  if isinstance(given.value, cst.Name) and not given.star]
        through = self.project.variables_created_through_objects(callee, line, passed)
        if through is None:
            return self._created_through_attributes(call, callee, line)
        *first, method = through
        if not taken_from(self.project, callee, line, tuple(first)):
            return None
        return self._described(tuple(first), method=method)

    def _created_through_attributes(self, call: cst.Call, callee: str, line: int
                                    ) -> tuple[str, str, str | None] | None:
        """`_created_through` for a call under a GPU scope that reaches the variables
        through a method called on an attribute of an object's own, in it or in what it
        calls (`self._compute_net_gradients(x)` calling `self._model.compute_loss(x)`,
        where `__init__` bound `self._model = lanenet.LaneNet(cfg)`:
        `FileView.variables_created_through_attributes`)."""
        if self._scope_of(call, False)[1] is None:
            return None
        found = self.project.variables_created_through_attributes(callee, line)
        return self._described(found) if taken_from(self.project, callee, line, found) else None

    def _created_through_alias(self, name: cst.Name, line: int
                               ) -> tuple[str, str, str | None] | None:
        """`_created_through` for a call of a name that assignments bind to the project's
        functions (`inference, loss = resnet, resnet_loss` in one branch of a flag's test,
        `inference = cnn` in another): the first variable any of them creates, the model
        the program builds with that setting."""
        for function in self._functions_bound_to(name):
            found = self._described(self.project.variables_created_by(function, line=line))
            if found is not None:
                return (found[0], f"{found[1]}, in {function} bound to {name.value}",
                        found[2])
        return None

    def _functions_bound_to(self, name: cst.Name) -> list[str]:
        """The dotted names every binding of `name` in its scope assigns it, through
        tuple unpacking (`inference, loss = resnet, resnet_loss`); [] where some binding
        is anything else (a parameter, a loop, an import, a call's result)."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None or not scope[name.value]:
            return []
        found: list[str] = []
        for binding in scope[name.value]:
            node = getattr(binding, "node", None)
            statement = self.parent(node) if isinstance(node, cst.Name) else None
            while isinstance(statement, (cst.Tuple, cst.List, cst.Element, cst.AssignTarget)):
                statement = self.parent(statement)
            if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
                return []
            path = _target_path(statement.targets[0].target, name.value)
            value = statement.value
            for position in path or ():
                if not (isinstance(value, (cst.Tuple, cst.List))
                        and position < len(value.elements)
                        and not isinstance(value.elements[position], cst.StarredElement)):
                    return []
                value = value.elements[position].value
            text = (get_full_name_for_node(value)
                    if path is not None and isinstance(value, (cst.Name, cst.Attribute))
                    else None)
            if text is None or self._read_off_a_local(value):
                return []
            found.append(text)
        return found

    def _read_off_a_local(self, value: cst.BaseExpression) -> bool:
        """Whether a dotted name is read off a name its function binds (`agent._build`, a
        method saved before the object's is wrapped): the object's method, not a function
        of the project's modules, and no tower's model."""
        head = value
        while isinstance(head, cst.Attribute):
            head = head.value
        if head is value or not isinstance(head, cst.Name):
            return False
        scope = self.get_metadata(ScopeProvider, head, None)
        return scope is None or any(isinstance(binding.scope, FunctionScope)
                                    for binding in scope[head.value])

    def _placed_without_device_type(self, callee: str, line: int
                                    ) -> tuple[str, str, str | None] | None:
        """`_created_through` for a variable the project model reads as placed by a device
        scope of its own function (a `variable_on_worker_level` helper's `with
        tf.device(worker_device)`) where that scope names no device type in some value it
        may take (`worker_device = '/job:%s/task:%d' % ...`): TF merges an inner device
        spec into the outer one field by field, so the caller's GPU stays, and the helper
        places nothing on the CPU (mozilla/DeepSpeech's DeepSpeech.py at 8d21d0cbd2). A
        helper's scope that names the CPU (`'/cpu:0'`, `worker_device + '/cpu:0'`) or a
        device function places its variables: none."""
        for path, code, name, at, dtype in self.project.variables_placed_in_callees(
                callee, line):
            tail = name.rsplit(".", 1)[-1]
            if path == self.context.filename:  # (this file: its own tree and scopes)
                reader = self._device_values
                calls = [c for c in self._calls_named(tail) if self.position(c)[0] == at]
            else:
                reader = self.device_values_of(path, code)
                calls = [] if reader is None else [c for c in reader.calls_at(at) if (
                    get_full_name_for_node(c.func) or "").rsplit(".", 1)[-1] == tail]
            scopes = self._scopes_without_device_type(reader, calls)
            if scopes:
                found = self._described((path, name, at, dtype))
                return (found[0], f"{found[1]}, whose {scopes[0]} names no device type: "
                        f"the GPU around the call stays", found[2])
        return None

    def _calls_named(self, tail: str) -> list[cst.Call]:
        """The file's calls of a function named `tail` (`get_variable`: `tf.get_variable`)."""
        if "_by_tail" not in self.__dict__:
            self._by_tail: dict[str, list[cst.Call]] = {}
            for call in self.nodes(cst.Call):
                name = get_full_name_for_node(call.func)
                if name is not None:
                    self._by_tail.setdefault(name.rsplit(".", 1)[-1], []).append(call)
        return self._by_tail.get(tail, [])

    @staticmethod
    def _scopes_without_device_type(reader: DeviceValues, calls: list[cst.Call]) -> list[str]:
        """The device scopes (as spelled) around the first of `calls` (a variable's, in the
        module `reader` reads), within its function, where each may name no device type and
        none places the call otherwise; [] where one does (a CPU, a device function, slim's
        `device=`) or there is no call."""
        for call in calls[:1]:
            found = []
            for around in with_items_around(call, reader.parent):
                if not isinstance(around, cst.WithItem):
                    break
                item = around.item
                if not isinstance(item, cst.Call):
                    continue
                called = (get_full_name_for_node(item.func) or "").rsplit(".", 1)[-1]
                if called == "arg_scope" and argument(item, "device", None) is not None:
                    return []
                if called != "device":
                    continue
                given = device_argument(item)
                templates = None if given is None else reader.templates(given)
                if not templates or not any(_classify_device(t)[0] == "partial"
                                            for t in templates):
                    return []
                found.append(cst.Module([]).code_for_node(item))
            return found
        return []

    def _reuses(self, call: cst.Call, callee: str) -> bool:
        """Whether a call reuses the variables an earlier call made: it passes True
        (`reuse=True`, or a name set to True before it: `initialized = True`) as `reuse=`,
        or to a parameter that the project function it calls passes on as `reuse=`."""
        given = [i if a.keyword is None else a.keyword.value
                 for i, a in enumerate(call.args) if not a.star]
        as_reuse = self.project.reuse_arguments(callee, self.position(call)[0], given)
        for i, arg in enumerate(call.args):
            key = i if arg.keyword is None else arg.keyword.value
            if (key == "reuse" or key in as_reuse) and self._true_at(arg.value, call):
                return True
        return False

    def _template_reuses(self, call: cst.Call) -> bool:
        """Whether `call` calls a template (a name bound once in its scope to
        `tf.make_template(...)`, compat.v1 too) after the template's first call: a template
        creates its variables at its first call and its later calls reuse them, wherever
        their device scopes are (openai/pixel-cnn's train.py: `model(x_init, ...,
        init=True)` outside any device scope, then `model(xs[i], ...)` in each tower).
        The first call is the first in program order in the body that binds the template,
        one no `if`, `while` or `try` there may skip; where none is sure to run first, the
        call counts as creating."""
        template = self._template_called(call)
        return (template is not None and self.tf_canonical(template[0].func) == "make_template"
                and template[1] is not None and template[1] is not call
                and self.position(template[1]) < self.position(call))

    def _cache_reuses(self, call: cst.Call, callee: str) -> bool:
        """Whether `call` gets back the variables an earlier call of the same function made:
        each variable the function creates comes from a get-or-create cache (`if name not in
        _params:`, tflib's `lib.param`; `FileView.creates_only_through_caches`), and a call
        of it spelled alike, earlier in the same function, runs whenever this one does
        (igul222/improved_wgan_training: `Discriminator(real_data)`, then
        `Discriminator(fake_data)` in the same tower asks for the same names)."""
        function = enclosing_function(call, self.parent)
        around = set()
        current = self.parent(call)
        while current is not None:
            around.add(id(current))
            current = self.parent(current)
        for node in self._calls_named(callee.rsplit(".", 1)[-1]):
            if (node is call or get_full_name_for_node(node.func) != callee
                    or enclosing_function(node, self.parent) is not function
                    or self.position(node) >= self.position(call)):
                continue
            common = self.parent(node)  # (the nearest node holding both calls)
            while common is not None and id(common) not in around:
                common = self.parent(common)
            if common is not None and self._runs_surely(node, common):
                return self.project.creates_only_through_caches(callee,
                                                                self.position(call)[0])
        return False

    def _auto_reuse_repeats(self, call: cst.Call, callee: str) -> bool:
        """Whether `call` gets back what an earlier call of the same function made: the
        function (one of this file's, by its name) runs its whole body in one variable
        scope named by a literal that gets or creates (`reuse=tf.AUTO_REUSE`, or a `reuse`
        parameter defaulting to it that `call` does not give), and a call of it spelled
        alike runs first (taki0112/StyleGAN-Tensorflow: `self.discriminator(real_img)`,
        then `self.discriminator(fake_img)` in the same tower)."""
        functions = self._functions_named(callee.rsplit(".", 1)[-1])
        if len(functions) != 1:
            return False
        body = [s for s in functions[0].body.body if not (
            isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
            and isinstance(s.body[0], cst.Expr)
            and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
        if len(body) != 1 or not isinstance(body[0], cst.With) or len(body[0].items) != 1:
            return False
        scope = body[0].items[0].item
        if not (isinstance(scope, cst.Call) and (self.tf_canonical(scope.func) or "")
                .rsplit(".", 1)[-1] == "variable_scope"
                and isinstance(argument(scope, "name_or_scope", 0), cst.SimpleString)):
            return False
        reuse = argument(scope, "reuse", None)
        if isinstance(reuse, cst.Name):
            params = functions[0].params
            given = {a.keyword.value for a in call.args if a.keyword is not None}
            defaults = [p.default for p in (*params.params, *params.kwonly_params)
                        if p.name.value == reuse.value and reuse.value not in given]
            reuse = defaults[0] if defaults else reuse
        return (reuse is not None and self.tf_canonical(reuse) == "AUTO_REUSE"
                and self._called_before_in_its_block(call, callee))

    def _called_before_in_its_block(self, call: cst.Call, callee: str) -> bool:
        """Whether a call of `callee` spelled alike runs, whenever `call` does, in an earlier
        statement of the same block, or in a `with` there that opens no variable scope (a
        device scope: the fix's own wrap), so under the same variable scopes."""
        statement = enclosing(call, self.parent, cst.SimpleStatementLine, within_function=True)
        if statement is None:
            return False
        block = self.parent(statement)
        for node in self._calls_named(callee.rsplit(".", 1)[-1]):
            if (node is call or get_full_name_for_node(node.func) != callee
                    or self.position(node) >= self.position(call)):
                continue
            earlier = enclosing(node, self.parent, cst.SimpleStatementLine,
                                within_function=True)
            while earlier is not None and self.parent(earlier) is not block:
                earlier = self.parent(self.parent(earlier))  # (its block's `with`)
                if not isinstance(earlier, cst.With) or any(
                        isinstance(item.item, cst.Call) and (
                            self.tf_canonical(item.item.func) or "").endswith("variable_scope")
                        for item in earlier.items):
                    earlier = None
            if earlier is not None and self._runs_surely(node, earlier):
                return True
        return False

    def _connected_module(self, call: cst.Call) -> tuple[str, str, None] | None:
        """(name, where, None) for a call that connects a library module (`snt.Linear(10)(x)`,
        or the first call of a name bound once in its scope to one, `net =
        snt.Module(build)`, as `_template_reuses` finds a template's: a Sonnet module is a
        template): it makes the module's variables, under the caller's device scope."""
        if not any(word in self._tree_code() for word in LIBRARY_WORDS):
            return None
        if isinstance(call.func, cst.Call):
            module = library_module(self.tf_names, call.func.func)
        else:
            template = self._template_called(call)
            module = (None if template is None or template[1] is not call
                      else library_module(self.tf_names, template[0].func))
        if module not in LIBRARY_VARIABLE_MODULES:
            return None
        return module, f"{module}, connected here", None

    def _template_called(self, call: cst.Call) -> tuple[cst.Call, cst.Call | None] | None:
        """(what made it, its first call or None) for a call of a name bound once in its
        scope to a call's result; None for any other call."""
        if not isinstance(call.func, cst.Name):
            return None
        function = enclosing_function(call, self.parent)
        bindings = [node for node in self.nodes(cst.Assign)
                    if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value == call.func.value
                    and enclosing_function(node, self.parent) is function]
        if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call):
            return None
        binding = bindings[0]
        block = enclosing(binding, self.parent, cst.IndentedBlock, cst.Module)
        calls = [node for node in descendants(block, cst.Call)
                 if isinstance(node.func, cst.Name) and node.func.value == call.func.value
                 and enclosing_function(node, self.parent) is function
                 and self.position(node) > self.position(binding)]
        first = next((node for node in calls if self._runs_surely(node, block)), None)
        return binding.value, first

    def _runs_surely(self, node: cst.CSTNode, block: cst.CSTNode) -> bool:
        """Whether `node` runs whenever the statements of `block` do: no `if`, `while`,
        `try` or lambda between them (a `for` and a `with` run their bodies)."""
        current = self.parent(node)
        while current is not None and current is not block:
            if isinstance(current, (cst.If, cst.While, cst.Try, cst.Lambda, cst.IfExp,
                                    cst.FunctionDef, cst.ClassDef, cst.BooleanOperation)):
                return False
            current = self.parent(current)
        return current is block

    def _true_at(self, value: cst.BaseExpression, call: cst.Call) -> bool:
        """Whether `value` is True where `call` runs: the literal, or a name whose last
        assignment before the call in its function is `name = True` and runs whenever the
        call does (no `if`, loop or `try` between them: `initialized = True` after the first
        tower, before the validation net in the same tower)."""
        if not isinstance(value, cst.Name):
            return False
        if value.value == "True":
            return True
        function = enclosing(call, self.parent, cst.FunctionDef)
        line = self.position(call)[0]
        before = [node for node in self.nodes(cst.Assign)
                  if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                  and node.targets[0].target.value == value.value
                  and enclosing(node, self.parent, cst.FunctionDef) is function
                  and self.position(node)[0] < line]
        if not before:
            return False
        last = max(before, key=lambda node: self.position(node))
        if not (isinstance(last.value, cst.Name) and last.value.value == "True"):
            return False
        holder = self.parent(last)
        while holder is not None and not inside(call, holder, self.parent):
            if isinstance(holder, (cst.If, cst.For, cst.While, cst.Try, cst.FunctionDef,
                                   cst.Lambda, cst.ClassDef)):
                return False
            holder = self.parent(holder)
        return holder is not None

    def _described(self, found, passed: str | None = None, method: str | None = None
                   ) -> tuple[str, str, str | None] | None:
        if found is None:
            return None
        path, name, line, dtype = found
        where = f"line {line}" if path == self.context.filename else f"{path}:{line}"
        if passed is not None:
            where += f", in {passed} passed to it"
        if method is not None:
            where += f", in the {method} it calls on the object passed to it"
        dtype = _DTYPE_ALIASES.get(dtype, dtype)
        return name, f"{name} at {where}", dtype if dtype in _DTYPES else None

    def _created_by_arguments(self, call: cst.Call, name: str | None
                              ) -> tuple[str, str, str | None] | None:
        """`_created_through` for the project's functions a call under a GPU scope is
        given, one level deep: by name (`tf.map_fn(step, xs)`) or called in a lambda
        (`model_with_buckets(..., lambda x, y: seq2seq_f(x, y, False))`); the callee runs
        them while it builds, under the same scope. `make_template` and `partial` only keep
        the function for later calls."""
        if name == "make_template" or (get_full_name_for_node(call.func) or "").endswith(
                "partial") or self._scope_of(call, False)[1] is None:
            return None
        line = self.position(call)[0]
        for given in call.args:
            if isinstance(given.value, cst.Lambda):
                called = [inner.func for inner in _calls_in(given.value)]
            else:
                called = [given.value]
            for function in called:
                text = (get_full_name_for_node(function)
                        if isinstance(function, (cst.Name, cst.Attribute)) else None)
                found = None if text is None else self.project.variables_created_by(
                    text, line=line)
                if found is not None:
                    return self._described(found, passed=text)
        return None

    def _scope_of(self, call: cst.Call, slim_family: bool, made_by: str | None = None):
        """(statement, GPU scope): the simple statement holding `call` below its innermost
        device scope (None if it sits in a compound statement's header), and that scope if it
        is a GPU's (None for a CPU, a device function, a slim device, or no scope).
        `made_by`: the slim-family call that makes the variable, where known
        (`_slim_arg_scope_places`)."""
        statement = enclosing(call, self.parent, cst.SimpleStatementLine,
                              cst.SimpleStatementSuite, within_function=True)
        for around in with_items_around(call, self.parent):
            if isinstance(around, (cst.FunctionDef, cst.Lambda)):
                return statement, None  # runs when called, under the caller's scopes
            if isinstance(around, cst.WithItem):
                verdict = self._scope_verdict(around.item, slim_family, made_by)
                if verdict != "outer":
                    return statement, verdict if isinstance(verdict, _GpuScope) else None
        return statement, None

    def _scope_verdict(self, expr: cst.BaseExpression, slim_family: bool,
                       made_by: str | None = None):
        """A `_GpuScope`, "outer" (this with item places nothing: look further out) or
        "stop" (it decides, and not for a GPU)."""
        if not isinstance(expr, cst.Call):
            return "outer"
        name = self.tf_canonical(expr.func)
        if name == "slim.arg_scope":
            has_device = argument(expr, "device", None) is not None
            return ("stop" if slim_family and has_device
                    and self._slim_arg_scope_places(expr, made_by) else "outer")
        if name not in DEVICE_CALLS:
            return "outer"
        templates = self._device_templates(expr)
        if not templates:
            # None, a device function, a name: not ours to judge, unless the function is
            # one that pins TF 0.x's "Variable" only.
            return self._device_function_missing_v2(expr) or "stop"
        if self._configured_gpu_or_cpu(expr):
            return "stop"
        kinds = [_classify_device(template) for template in templates]
        gpus = [device for kind, device, _ in kinds if kind == "gpu"]
        if gpus:  # (a loop over a list naming a GPU places on it in some turn)
            return _GpuScope(expr, gpus[0])
        if all(kind == "partial" for kind, _, _ in kinds):
            return "outer"  # `/job:worker` merges with the device type from outside
        return "stop"

    def _slim_arg_scope_places(self, arg_scope: cst.Call, made_by: str | None) -> bool:
        """Whether `slim.arg_scope(functions, device=...)` gives its device to the variable
        that `made_by` (a slim-family call, as `tf_canonical` names it) makes. slim's layers
        make their weights through `slim.model_variable`, which calls `slim.variable` passing
        its own `device=` (None unless given): an argument given outright wins over an
        arg_scope's, so `arg_scope([slim.variable], device='/cpu:0')` places a direct
        `slim.variable(...)` only, and a layer's weights stay under the caller's GPU scope
        (yeekit24/CapsNet-Tensorflow). Where `made_by` is unknown, or some function of the
        list is not one TF's names read, the arg_scope is taken to place it."""
        if made_by is None or not arg_scope.args or arg_scope.args[0].keyword is not None:
            return True
        listed = arg_scope.args[0].value
        if not isinstance(listed, (cst.List, cst.Tuple)):
            return True
        needed = "variable" if made_by.rsplit(".", 1)[-1] == "variable" else "model_variable"
        tails = []
        for element in listed.elements:
            if isinstance(element, cst.StarredElement):
                return True
            canonical = self.tf_canonical(element.value)
            if canonical is None:
                return True
            tails.append(canonical.rsplit(".", 1)[-1])
        return needed in tails

    def _configured_gpu_or_cpu(self, expr: cst.Call) -> bool:
        """Whether `device(...)` is given a conditional between one fixed GPU and the CPU
        (`consolidation_device = '/gpu:0' if variable_strategy == 'GPU' else '/cpu:0'`, TF's
        cifar10_estimator): where the variables go is the user's setting, not towers
        placing on a GPU in turn (a loop's list does)."""
        asked = device_asked(expr, lambda node: self.get_metadata(ScopeProvider, node, None),
                             self.parent)
        if not isinstance(asked, cst.IfExp):
            return False
        specs = [template_spec(device_template(branch)) for branch in (asked.body, asked.orelse)]
        return all(specs) and sorted(
            (spec.device_type or "").upper() for spec in specs) == ["CPU", "GPU"] and not any(
            RUNTIME_DIGITS in str(spec.device_index) for spec in specs)

    def _device_function_missing_v2(self, expr: cst.Call) -> _GpuScope | None:
        """The GPU scope a device function of this file gives variables when it pins op
        type "Variable" and no other variable op (`if op.type == "Variable": return
        "/cpu:0"`): TF 0.x's op. TF 1.x makes VariableV2 (2.x VarHandleOp), which the
        function passes on to the device it gives every other op: the GPU, read from its
        string arguments (`assign_to_device('/gpu:%d' % i)`) or what it returns (either
        branch of a conditional expression). A lambda given to the scope itself counts too
        (`lambda op: "/cpu:0" if op.type == "Variable" else "/gpu:0"`). None where the
        function names VariableV2 or VarHandleOp, tests a prefix, or gives no GPU. A
        function no statement of this file defines is looked for in the project's other
        files (`_imported_function_missing_v2`)."""
        given = device_argument(expr)
        if isinstance(given, cst.Lambda):
            gpu = self._gpu_missing_v2(given, ())
            return None if gpu is None else _GpuScope(
                expr, gpu, misses_v2="the lambda", widening=self._widening(given))
        factory = isinstance(given, cst.Call) and isinstance(given.func, cst.Name)
        name = given.func if factory else given
        if not isinstance(name, cst.Name):
            return self._imported_function_missing_v2(expr)  # (`common.assign_to_gpu(i)`)
        functions = [f for f in self.nodes(cst.FunctionDef) if f.name.value == name.value]
        if not functions:
            return self._imported_function_missing_v2(expr)
        if len(functions) != 1:
            return None
        function = functions[0]
        gpu = self._gpu_missing_v2(function, given.args if factory else ())
        if gpu is None:
            return None
        return _GpuScope(expr, gpu, misses_v2=name.value, widening=self._widening(function))

    def _gpu_missing_v2(self, function: cst.FunctionDef | cst.Lambda, given: Sequence[cst.Arg],
                        assigns: list[cst.Assign] | None = None) -> str | None:
        """TF's spelling of the GPU that a device function (or a lambda) gives TF 1.x's
        variables when it pins op type "Variable" and no other variable op: read from the
        arguments its factory call is `given` or from what it returns, each branch of a
        conditional expression; None where it names VariableV2 or VarHandleOp, tests a
        prefix, or gives no GPU. `assigns`: the assignments of the module defining it (this
        file's by default)."""
        pinned = self._op_types_compared(function, assigns)
        if pinned is None or "Variable" not in pinned or pinned & _VARIABLE_OPS_SINCE_1_0:
            return None
        returned = ([function.body] if isinstance(function, cst.Lambda) else [
            r.value for r in descendants(function, cst.Return) if r.value is not None])
        candidates = [a.value for a in given] + returned
        for candidate in (branch for value in candidates for branch in _branches(value)):
            template = device_template(candidate)
            kind, device, _ = (_classify_device(template) if template is not None
                               else ("unknown", "", False))
            if kind == "gpu":
                return device
        return None

    def _imported_function_missing_v2(self, expr: cst.Call) -> _GpuScope | None:
        """`_device_function_missing_v2` for a device function another file of the project
        defines (`from common import assign_to_gpu`, then `tf.device(assign_to_gpu(i,
        ps))`), read from that file's code (the project model finds it); the names its test
        reads are that file's. Not fixed here: the test to widen is in the other file."""
        given = device_argument(expr)
        factory = isinstance(given, cst.Call)
        called = given.func if factory else given
        text = (get_full_name_for_node(called)
                if isinstance(called, (cst.Name, cst.Attribute)) else None)
        found = None if text is None else self.project.function_elsewhere(
            text, self.position(expr)[0])
        if found is None:
            return None
        path, code, unit, line = found
        module = self.module_of(path, code)
        functions = [] if module is None else [
            f for f in module.body if isinstance(f, cst.FunctionDef) and f.name.value == unit]
        if len(functions) != 1:
            return None
        gpu = self._gpu_missing_v2(functions[0], given.args if factory else (),
                                   descendants(module, cst.Assign))
        if gpu is None:
            return None
        return _GpuScope(expr, gpu, misses_v2=f"{text} ({path}:{line})", elsewhere=True)

    def _widening(self, function: cst.FunctionDef | cst.Lambda) -> Replace | None:
        """The edit that makes a device function's test of "Variable" pin VariableV2 and
        VarHandleOp too: `op.type == "Variable"` becomes `op.type in ("Variable",
        "VariableV2", "VarHandleOp")`; a list or tuple it tests with `in` (written there or
        assigned once in the file) gets the two names. One edit a function, shared by its
        findings (an edit reported twice is made once)."""
        cache = self.__dict__.setdefault("_widenings", {})
        if function not in cache:
            cache[function] = self._widening_of(function)
        return cache[function]

    def _widening_of(self, function: cst.FunctionDef | cst.Lambda) -> Replace | None:
        for comparison in descendants(function, cst.Comparison):
            left = comparison.left
            if not (isinstance(left, cst.Attribute) and left.attr.value in ("type", "op")):
                continue
            if len(comparison.comparisons) != 1:
                continue
            target = comparison.comparisons[0]
            tested = target.comparator
            if (isinstance(target.operator, cst.Equal) and isinstance(tested, cst.SimpleString)
                    and tested.evaluated_value == "Variable"):
                names = ", ".join(f"{tested.quote}{n}{tested.quote}" for n in _WIDENED)
                text = f"{self.code(left)} in ({names})"
                return Replace(comparison, lambda _, text=text: cst.parse_expression(text))
            if not isinstance(target.operator, cst.In):
                continue
            if isinstance(tested, cst.Name):
                assigned = [node.value for node in self.nodes(cst.Assign)
                            for a in node.targets if isinstance(a.target, cst.Name)
                            and a.target.value == tested.value]
                tested = assigned[0] if len(assigned) == 1 else None
            if (isinstance(tested, (cst.List, cst.Tuple)) and tested.elements
                    and "Variable" in self._strings_in(tested)):
                quote = next((e.value.quote for e in tested.elements
                              if isinstance(e.value, cst.SimpleString)), '"')
                present = self._strings_in(tested)
                added = [f"{quote}{n}{quote}" for n in _WIDENED if n not in present]
                codes = [self.code(e.value) for e in tested.elements] + added
                opening, closing = ("[", "]") if isinstance(tested, cst.List) else ("(", ")")
                text = f"{opening}{', '.join(codes)}{closing}"
                return Replace(tested, lambda _, text=text: cst.parse_expression(text))
        return None

    def _op_types_compared(self, function: cst.FunctionDef | cst.Lambda,
                           assigns: list[cst.Assign] | None = None) -> set[str] | None:
        """The strings a function compares an op's type with (`op.type == "Variable"`,
        `node_def.op in PS_OPS`, the list assigned once in the file); None if it tests a
        prefix or a substring (`op.type.startswith("Variable")`), which VariableV2 passes."""
        for call in descendants(function, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in (
                    "startswith", "endswith", "find", "match"):
                return None
        compared: set[str] = set()
        for comparison in descendants(function, cst.Comparison):
            left = comparison.left
            if not (isinstance(left, cst.Attribute) and left.attr.value in ("type", "op")):
                continue
            for target in comparison.comparisons:
                if isinstance(target.operator, (cst.Equal, cst.In)):
                    compared |= self._strings_in(target.comparator, assigns)
        return compared

    def _strings_in(self, expr: cst.BaseExpression,
                    assigns: list[cst.Assign] | None = None) -> set[str]:
        """The strings `expr` spells (in a list, tuple or set; through a name one
        assignment of `assigns`, the file's by default, binds)."""
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return {value} if isinstance(value, str) else set()
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return set().union(*(self._strings_in(e.value, assigns) for e in expr.elements))
        if isinstance(expr, cst.Name):
            assigned = [node.value for node in (self.nodes(cst.Assign) if assigns is None
                                                else assigns)
                        for a in node.targets if isinstance(a.target, cst.Name)
                        and a.target.value == expr.value]
            return self._strings_in(assigned[0], assigns) if len(assigned) == 1 else set()
        return set()

    def _device_templates(self, call: cst.Call) -> list[str]:
        """The device templates a `device(...)` call may be given: its string's, or for a
        name a `for` loop binds, those of the literal list of strings it loops over
        (`for d in ["/gpu:0", "/gpu:1"]`, `for i, d in enumerate(gpus)` with
        `gpus = [...]` assigned once in the file, `for i, d in enumerate(self.devices)` with
    `self.devices = ...` bound once in the class); [] when the code does not show them."""
        given = device_argument(call)
        if given is None:
            return []
        template = device_template(given)
        if template is None and isinstance(given, cst.Name) or template and HOLE in template:
            template = self._asked_template(call) or template
        if template is not None:
            return [template]
        if not isinstance(given, cst.Name):
            return self._read_through_names(given)
        looped = self._looped_over(given)
        if isinstance(looped, cst.Attribute):
            looped = self._attribute_bound_once(looped) or looped
        listed = looped
        if isinstance(listed, cst.Name):
            assigned = [node.value for node in self.nodes(cst.Assign)
                        for a in node.targets if isinstance(a.target, cst.Name)
                        and a.target.value == listed.value]
            listed = assigned[0] if len(assigned) == 1 else None
        if not isinstance(listed, (cst.List, cst.Tuple)) or not listed.elements:
            # (a list the code builds: a comprehension, a name bound to one, a function's)
            return self._read_through_names(given) or (
                [] if looped is None else self._device_values.items(looped) or [])
        templates = [device_template(e.value) for e in listed.elements]
        return self._read_through_names(given) if None in templates else templates

    def _attribute_bound_once(self, read: cst.Attribute) -> cst.BaseExpression | None:
        """The value of an attribute of a method's own object (`self.devices`) that one
        assignment in its class binds (`self.devices = get_available_gpus()` in
        `__init__`), for a loop over it (`for i, dev in enumerate(self.devices)`); None
        where the class binds it otherwise or more than once, or `read` is no such
        attribute."""
        method = enclosing_function(read, self.parent)
        params = method.params.params if method is not None else ()
        if not (isinstance(read.value, cst.Name) and params
                and params[0].name.value == read.value.value):
            return None
        owner = enclosing(method, self.parent, cst.ClassDef)
        if owner is None:
            return None
        spelled = self.code(read)
        values = [node.value for node in descendants(owner, cst.Assign)
                  if any(self.code(t.target) == spelled for t in node.targets)]
        changed = [node for node in descendants(owner, cst.AugAssign, cst.AnnAssign)
                   if self.code(node.target) == spelled]
        return values[0] if len(values) == 1 and not changed else None

    def _read_through_names(self, given: cst.BaseExpression) -> list[str]:
        """The device templates `codemod.DeviceValues` reads for what a `device(...)` call
        is given where the file spells no device string there: a name bound in several
        places (`device = available_devices[i]` or a device function), an item of a
        device list (`available_devices[i]`, the list a comprehension, a function of the
        project or `device_lib.list_local_devices()` gives), a conditional expression."""
        return self._device_values.templates(given) or []

    @property
    def _device_values(self) -> DeviceValues:
        """The reader of device strings through the file's names (`codemod.DeviceValues`),
        made when first asked."""
        if "_values" not in self.__dict__:
            self._values = DeviceValues(
                lambda node: self.get_metadata(ScopeProvider, node, None), self.parent,
                self._functions_named,
                self._device_values_elsewhere)
        return self._values

    def _functions_named(self, name: str) -> list[cst.FunctionDef]:
        """The file's functions (and methods) named `name`."""
        if "_defs" not in self.__dict__:
            self._defs: dict[str, list[cst.FunctionDef]] = {}
            for function in self.nodes(cst.FunctionDef):
                self._defs.setdefault(function.name.value, []).append(function)
        return self._defs.get(name, [])

    def _device_values_elsewhere(self, name: str) -> tuple[DeviceValues, cst.FunctionDef] | None:
        """The function of another module of the project a name of this file's module body
        refers to (`from util.gpu import get_available_gpus`), with a device string reader
        over that module (`codemod.DeviceValues`; one module further at most)."""
        found = self.project.function_elsewhere(name, 1)
        if found is None:
            return None
        path, code, unit, _ = found
        reader = self.device_values_of(path, code)
        functions = [] if reader is None else reader.functions(unit)
        return (reader, functions[0]) if len(functions) == 1 else None

    def _asked_template(self, call: cst.Call) -> str | None:
        """The device template of what `device(...)` asks for (`codemod.device_asked`): the
        value a name given there is bound to once in its scope (`gpu_name = "/gpu:" +
        str(i)` before `tf.device(gpu_name)`), a device type given at run time filled in
        with a flag's default (`"/{}:{}".format(config.device_type, i)`, the project
        defining flag `device_type` with default "gpu"); None where neither shows it."""
        asked = device_asked(call, lambda node: self.get_metadata(ScopeProvider, node, None),
                             self.parent)
        template = None if asked is None else device_template(asked)
        if template is not None and _classify_device(template)[0] == "unknown":
            template = device_template_filled(asked, self._flag_default) or template
        return template

    def _flag_default(self, expr: cst.BaseExpression) -> str | None:
        """The default of the command-line flag an attribute of a flags object reads
        (`config.device_type`, `FLAGS.device_type`, `args.device_type`), as the project
        defines it once (`FileView.flag_default`); None for anything else."""
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
            return None
        found = self.project.flag_default(expr.attr.value)
        return found[0] if found is not None and isinstance(found[0], str) else None

    def _read_as(self, scope: _GpuScope) -> str:
        """What a GPU scope whose device is read from elsewhere asks for, in words: the
        device, and each flag default it was read with (`, that is /device:GPU:N, flag
        device_type's default "gpu" at cli.py:8`); "" for a device spelled out."""
        given = device_argument(scope.call)
        if scope.misses_v2 is not None or given is None or (
                device_template(given) is not None
                and _classify_device(device_template(given))[0] == "gpu"):
            return ""
        asked = device_asked(scope.call,
                             lambda node: self.get_metadata(ScopeProvider, node, None),
                             self.parent)
        if asked is given and isinstance(given, cst.Name):
            return ""  # (a loop over listed devices: the list says them)
        flags = []
        for read in descendants(asked, cst.Attribute):
            found = (self.project.flag_default(read.attr.value)
                     if isinstance(read.value, cst.Name) else None)
            if found is not None and isinstance(found[0], str):
                flags.append(f"flag {read.attr.value}'s default {found[0]!r} at "
                             f"{found[1]}:{found[2]}")
        return f", that is {scope.device}" + "".join(f", {flag}" for flag in flags)

    def _looped_over(self, name: cst.Name) -> cst.BaseExpression | None:
        """What the innermost `for` around `name` that binds it loops over: the list whose
        items the name takes, through `enumerate` and `zip` where the name is part of a
        tuple target (`for i, d in enumerate(gpus)`, `for i, (d, x) in
        enumerate(zip(DEVICES, inputs))`: DEVICES); None if no loop of its function binds
        it so."""
        child, parent = name, self.parent(name)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Lambda)):
            if isinstance(parent, cst.For) and child is parent.body:
                path = _target_path(parent.target, name.value)
                if path is not None:
                    return _iterated_at(parent.iter, path)
            child, parent = parent, self.parent(parent)
        return None

    def _slim_module(self, func: cst.BaseExpression) -> str | None:
        """How the file spells the slim module in `func` (`slim` in `slim.conv2d`)."""
        current = func.value if isinstance(func, cst.Attribute) else None
        while isinstance(current, (cst.Attribute, cst.Name)):
            if self.tf_qualified(current) in SLIM_MODULES:
                return self.code(current)
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
            canonical = self.tf_canonical(expr)
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
            shape = _TENSOR_CALLS.get(self.tf_canonical(expr.func) or "")
            if shape is None:
                return None
            position, default = shape
            explicit = argument(expr, "dtype", position)
            if explicit is not None:
                return self._dtype_of(explicit)
            if isinstance(default, tuple):
                return self._value_dtype(argument(expr, *default))
            return default
        return None

    def _variable_dtype(self, call: cst.Call, name: str) -> str | None:
        if name in GLOBAL_STEP_MAKERS:
            return "int64"
        if name in VARIABLE_CALLS:
            explicit = argument(call, "dtype", None)
            if explicit is not None:
                return self._dtype_of(explicit)
            return self._value_dtype(argument(call, "initial_value", 0))
        if name in GET_VARIABLE_CALLS:
            initializer = argument(call, "initializer", 3)
            from_value = self._value_dtype(initializer)  # a tensor or value initializes
            if from_value is not None:
                return from_value
            explicit = argument(call, "dtype", 2)
            if explicit is not None:
                return self._dtype_of(explicit)
            if initializer is None or self._is_initializer(initializer):
                return "float32"
        return None  # layers: float, but we do not read their dtype

    def _is_initializer(self, expr: cst.BaseExpression) -> bool:
        """An initializer object (`tf.zeros_initializer()`): it takes the variable's dtype."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        name = self.tf_canonical(target) or ""
        return name.endswith("_initializer") or "initializers." in name

    # -- findings and fixes -------------------------------------------------------------------

    def _severity(self, variable: _Variable) -> str:
        return ("error" if self._no_gpu_kernel(variable) and not self._soft_placement()
                else "warning")

    def _soft_placement(self) -> bool:
        """Whether the file configures its sessions with `allow_soft_placement=True`
        (`ConfigProto(allow_soft_placement=True)`, `config.allow_soft_placement = True`):
        TF then moves a variable without a GPU kernel to the CPU instead of failing, as the
        graph surface says of a session known to soft-place (ildoonet/tf-pose-estimation's
        train.py: its int32 global step under a GPU DeviceSpec)."""
        if "_soft" not in self.__dict__:
            self._soft = any(
                argument(call, "allow_soft_placement", None) is not None
                and self.code(argument(call, "allow_soft_placement", None)) == "True"
                for call in self.nodes(cst.Call)
                if self.tf_canonical(call.func) in ("ConfigProto", "compat.v1.ConfigProto")
            ) or any(
                isinstance(t.target, cst.Attribute)
                and t.target.attr.value == "allow_soft_placement"
                and self.code(node.value) == "True"
                for node in self.nodes(cst.Assign) for t in node.targets)
        return self._soft or self._soft_placing_importer() is not None

    def _soft_placing_importer(self) -> str | None:
        """The file importing this one (directly or not) whose sessions soft-place, as the
        project model reads it (`FileView.soft_placing_importer`): a model module's graph
        runs in the script's session (allenai/bi-att-flow's basic/model.py, whose int32
        global step basic/main.py's sessions soft-place)."""
        if "_soft_importer" not in self.__dict__:
            self._soft_importer = self.project.soft_placing_importer()
        return self._soft_importer

    def _soft_placing_sessions(self) -> str:
        """Whose sessions set allow_soft_placement=True, in words."""
        if self._soft:
            return "the file's sessions set"
        return f"the sessions of {self._soft_placing_importer()}, which imports it, set"

    @staticmethod
    def _kernel_op(variable: _Variable) -> str:
        return "AssignVariableOp" if variable.resource else "VariableV2"

    def _no_gpu_kernel(self, variable: _Variable) -> bool:
        dtype = variable.dtype
        return dtype is not None and dtype not in _GPU_VARIABLE_DTYPES[self._kernel_op(variable)]

    def _flagged(self, variable: _Variable, scope: _GpuScope) -> bool:
        """Whether a variable under a GPU scope is a finding, as the graph surface's `scope`
        decides: one whose dtype has no GPU kernel always (TF refuses it); any other only
        in tower code (variables towers on several GPUs share) or, with `every-gpu-variable`,
        on any GPU. A single-GPU model's float variables are right where they are."""
        if self._no_gpu_kernel(variable):
            return True
        option = self.options.get("scope", "all")
        if option == "no-kernel":
            return False
        return option == "every-gpu-variable" or self._in_towers(scope, variable.call)

    def _tower_private(self, variable: _Variable) -> bool:
        """Whether a float variable is its tower's own by design, no finding unless scope
        `every-gpu-variable` asks for every GPU variable: made anew by each call
        (`tf.Variable`, which reuse never gives back), not trained (`trainable=False`) and
        kept out of GLOBAL_VARIABLES (`collections=[tf.GraphKeys.LOCAL_VARIABLES]`): the
        recurrent state each tower carries between steps. No gradient or saver pairs it
        across towers and only its tower reads it, so it is none of the shared variables
        that belong on the CPU; the graph surface, which warns where towers on two GPUs
        read a variable, finds none. Without a GPU kernel it is TF's error all the same."""
        return (variable.through is None and variable.name in VARIABLE_CALLS
                and not self._no_gpu_kernel(variable)
                and self.options.get("scope", "all") != "every-gpu-variable"
                and trained(variable.call, variable.name) is False
                and outside_global_variables(variable.call, variable.name))

    def _made_per_pass(self, variable: _Variable, scope: _GpuScope) -> bool:
        """Whether a float `tf.Variable` is its tower's own, no finding unless scope
        `every-gpu-variable` asks for every GPU variable: called in the body of a loop in its
        function that enters the GPU scope each pass (the tower loop), in no `if` or
        conditional expression within that loop (every pass makes a new one: reuse never
        gives a `tf.Variable` back), and what it makes is bound, listed or appended, not
        handed to a call that may keep one (NVlabs/stylegan2's per-tower data buffers,
        tf_cnn_benchmarks' replicated copies). Each variable is made on its pass's GPU and
        read there: no two GPUs share it, as the graph surface finds. A variable made in
        one pass only (`if w is None: w = tf.Variable(...)`) and the variables a project
        function called per tower makes are found."""
        if (variable.through is not None or variable.name not in VARIABLE_CALLS
                or self._no_gpu_kernel(variable)
                or self.options.get("scope", "all") == "every-gpu-variable"):
            return False
        loop = enclosing(scope.call, self.parent, cst.For, cst.While, within_function=True)
        if loop is None or not inside(variable.call, loop, self.parent):
            return False
        child, current = variable.call, self.parent(variable.call)
        while current is not None and current is not loop:
            if isinstance(current, (cst.If, cst.IfExp, cst.BooleanOperation, cst.Try,
                                    cst.Lambda, cst.FunctionDef, cst.ClassDef,
                                    cst.CompFor)):
                return False
            if isinstance(current, cst.Call):
                # only a list's own growth keeps what it is given
                if not (isinstance(current.func, cst.Attribute)
                        and current.func.attr.value in ("append", "extend", "insert")):
                    return False
            child, current = current, self.parent(current)
        return current is loop and child is loop.body

    def _in_own_tower_scope(self, variable: _Variable) -> bool:
        """Whether a float variable is made in its tower's own variable scope, no finding
        unless scope `every-gpu-variable` asks for every GPU variable: a `with
        variable_scope(...)` around the call, in its function, whose name is built from
        the target of a loop holding it (`tf.variable_scope("tower_%d" % i)`), given no
        `reuse=` but False or None, and no code in it runs where a scope reuses
        (`FileView.reuses_within`): each tower makes its own copy and no GPU reads
        another's (replicated training, tf_cnn_benchmarks' `replicated` mode). A
        get-or-create global step counts so only in an `if` inside that scope (made by one
        tower); elsewhere a later tower's call gives back the first one's. Towers that
        should share and do not are shared-variables' finding."""
        if (self._no_gpu_kernel(variable)
                or self.options.get("scope", "all") == "every-gpu-variable"):
            return False
        for around in with_items_around(variable.call, self.parent):
            if isinstance(around, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if self._per_tower_variable_scope(around.item):
                scope = self.parent(around)
                if (variable.name.endswith("get_or_create_global_step")
                        and not isinstance(enclosing(variable.call, self.parent, cst.If,
                                                     cst.With), cst.If)):
                    return False
                first, last = self.code_range(scope).start.line, self.code_range(scope).end.line
                return not self.project.reuses_within(first, last)
        return False

    def _per_tower_variable_scope(self, expr: cst.BaseExpression) -> bool:
        """Whether a `with` item opens a variable scope named after its tower and not
        reusing: its name (first argument or `name_or_scope=`) is a string built (`%`,
        `+`, `.format`, an f-string) from the target of a loop holding it, and its `reuse=`,
        if given, is False or None."""
        if not (isinstance(expr, cst.Call)
                and (self.tf_canonical(expr.func) or "").rsplit(".", 1)[-1] == "variable_scope"):
            return False
        reuse = argument(expr, "reuse", None)
        if reuse is not None and not (isinstance(reuse, cst.Name)
                                      and reuse.value in ("False", "None")):
            return False
        name = argument(expr, "name_or_scope", 0)
        if not isinstance(name, (cst.BinaryOperation, cst.FormattedString, cst.Call)):
            return False
        if isinstance(name, cst.Call) and not (isinstance(name.func, cst.Attribute)
                                               and name.func.attr.value == "format"):
            return False
        used = {node.value for node in descendants(name, cst.Name)}
        loop = enclosing(expr, self.parent, cst.For, within_function=True)
        while loop is not None:
            if used & {node.value for node in descendants(loop.target, cst.Name)}:
                return True
            loop = enclosing(loop, self.parent, cst.For, within_function=True)
        return False

    def _message(self, variable: _Variable, scope: _GpuScope) -> str:
        what = self.code(variable.call.func)
        where = f"under {self.code(scope.call)}{self._read_as(scope)}"
        if self._no_gpu_kernel(variable):
            article = "an" if variable.dtype[0] in "aeiou" else "a"
            if self._soft_placement():
                return (
                    f"{what} creates {article} {variable.dtype} variable {where}: "
                    f"{self._kernel_op(variable)} has no GPU kernel for {variable.dtype}; "
                    f"{self._soft_placing_sessions()} allow_soft_placement=True, which moves it "
                    f"to the CPU "
                    f"(without it TF fails with \"Could not satisfy explicit device "
                    f"specification\")"
                )
            return (
                f"{what} creates {article} {variable.dtype} variable {where}: TF fails with \"Could "
                f"not satisfy explicit device specification '{scope.device}' because no "
                f"supported kernel for GPU devices is available\" ({self._kernel_op(variable)} "
                f"has no GPU kernel for {variable.dtype})"
            )
        creates = "creates its variables" if variable.name in LAYER_CALLS else "creates a variable"
        if variable.through is not None:
            creates = f"creates variables ({variable.through})"
        if variable.name in METRIC_CALLS:
            through = "" if variable.through is None else f" ({variable.through})"
            return (f"{what} creates a metric's local variables{through} {where}: TF has GPU "
                    f"kernels for their float totals and counts, but variables belong on the CPU")
        if scope.misses_v2 is not None:
            return (f"{what} {creates} {where}: {scope.misses_v2} pins only op type "
                    f"\"Variable\", TF 0.x's; TF 1.x makes VariableV2 (2.x VarHandleOp), "
                    f"which it gives {scope.device}: the shared variables land on the GPU")
        if self._in_towers(scope, variable.call):
            return (f"{what} {creates} {where}, a multi-GPU tower: shared variables belong on "
                    f"the CPU (the _variable_on_cpu idiom)")
        # (one GPU: only scope every-gpu-variable finds it)
        return f"{what} {creates} {where}: scope every-gpu-variable puts every variable on the CPU"

    def _wrapper(self, site: _Site) -> tuple[_Wrapper | None, str]:
        """How to wrap a site's statement, and the note the findings end with."""
        variables = site.variables
        calls = {id(v.call) for v in variables  # (a project function computes too)
                 if v.name not in _COMPUTES and v.through is None}
        smalls = (site.statement.body if isinstance(site.statement, (
            cst.SimpleStatementLine, cst.SimpleStatementSuite)) else [])
        if len(calls) == len(variables) and all(
                id(_small_value(s)) in calls for s in smalls):
            text = f'{self.code(site.scope.call.func)}("/cpu:0")'
            return _Wrapper("cpu", text), f"; fix: create it under {text}"
        slims = {v.slim for v in variables}
        if len(slims) == 1 and None not in slims:
            slim = slims.pop()
            text = f'{slim}.arg_scope([{slim}.variable, {slim}.model_variable], device="/cpu:0")'
            return (_Wrapper("slim", text),
                    f"; fix: {slim}.arg_scope(..., device=\"/cpu:0\") places its variables on "
                    f"the CPU and leaves the compute on the GPU")
        device = self.v1_spelling_at(site.scope.call.func, "device")
        if device is None:
            return None, ("; not fixed: no compat.v1 `device` to place only the variables "
                          "with; put them on the CPU by hand")
        return (_Wrapper("device-function", f"{device}({_DEVICE_FUNCTION})"),
                "; fix: a device function places its variables on the CPU and leaves the "
                "compute on the GPU")

    def _plan(self, site: _Site) -> tuple[list[_Variable], _Wrapper | None, str]:
        """(the site's variables not suppressed, the wrapper to apply or None, the note on
        their findings: the fix or why there is none)."""
        live = [v for v in site.variables if not self.suppressed(v.call)]
        if not live:
            return live, None, ""
        if len(live) < len(site.variables):
            return live, None, "; not fixed: another variable in this statement is suppressed"
        wrapper, note = self._wrapper(site)
        return live, wrapper, note

    def _wraps(self, wrappers: dict[cst.CSTNode, _Wrapper | None]) -> dict[cst.CSTNode, WrapInWith]:
        """The `with` block each wrapped statement goes into: adjacent statements with the
        same wrapper share one, and so do plain statements between two of them where the
        wrapper places only variables."""
        out: dict[cst.CSTNode, WrapInWith] = {}
        blocks = {self.parent(s) for s, w in wrappers.items()
                  if w is not None and not isinstance(s, cst.SimpleStatementSuite)}
        for statement, wrapper in wrappers.items():
            if wrapper is not None and isinstance(statement, cst.SimpleStatementSuite):
                out[statement] = WrapInWith((statement,), wrapper.text)
        for block in blocks:
            body = list(block.body)
            found = [wrappers.get(s) for s in body]
            i = 0
            while i < len(body):
                wrapper = found[i]
                if wrapper is None:
                    i += 1
                    continue
                end = j = i + 1
                while j < len(body):
                    if found[j] == wrapper:
                        end = j = j + 1
                    elif (wrapper.bridges and found[j] is None
                          and isinstance(body[j], cst.SimpleStatementLine)
                          and body[j] not in self._with_variables):
                        j += 1
                    else:
                        break
                wrap = WrapInWith(tuple(body[i:end]), wrapper.text)
                for statement in body[i:end]:
                    out[statement] = wrap
                i = end
        return out


