"""The TF vocabulary every source rule reads: how a spelling names a TF symbol, and one table
each of the symbols the rules look for.

A TF symbol is named canonically: what follows `tensorflow.`, `tensorflow.compat.v1.` (and
the other compat prefixes) in its qualified name, `Variable`, `train.Saver`,
`layers.dense`, `python.framework.ops.device`; tf-slim's as `slim.NAME` whether it is
reached through `tf_slim`, `tensorflow.contrib.slim` or `tensorflow.contrib.framework`.
The libcst rules resolve an expression to its qualified name through the file's imports and
module aliases (`graphfix.source.codemod.TfNames`), then to its canonical name here; the
stdlib pre-checks, which cannot resolve names, read the last names of the same tables
(`last_names`).

Plain Python, no libcst: the pre-filter and the transforms' packages import it freely.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Qualified-name prefixes that mean "TensorFlow's TF1 API", longest first.
TF_PREFIXES = (
    "tensorflow.compat.v1.",
    "tensorflow.compat.v2.",
    "tensorflow._api.v2.compat.v1.",
    "tensorflow.",
)
SLIM_PREFIXES = ("tf_slim.", "tensorflow.contrib.slim.", "tensorflow.contrib.framework.")
SLIM_MODULES = frozenset({"tf_slim", "tensorflow.contrib.slim"})
# The qualified names of the compat.v1 module itself (`import tensorflow.compat.v1 as tf`).
V1_MODULES = frozenset({"tensorflow.compat.v1", "tensorflow._api.v2.compat.v1"})


# TF 1.x's private module paths that user code imports from, and the public module that
# re-exports them (`from tensorflow.contrib.layers.python import layers as tf_layers`,
# cbfinn/maml's utils.py, names contrib.layers' batch_norm), longest first.
PRIVATE_MODULES = (
    ("contrib.layers.python.layers.layers.", "contrib.layers."),
    ("contrib.layers.python.layers.", "contrib.layers."),
)


def canonical_tf_name(qualified: str) -> str | None:
    """`tensorflow.compat.v1.get_variable` -> `get_variable`; `tf_slim.conv2d` ->
    `slim.conv2d`; a private module's path as its public one
    (`tensorflow.contrib.layers.python.layers.batch_norm` -> `contrib.layers.batch_norm`);
    None for a name outside TensorFlow and tf-slim."""
    for prefix in SLIM_PREFIXES:
        if qualified.startswith(prefix):
            return "slim." + qualified[len(prefix) :].rsplit(".", 1)[-1]
    if qualified in SLIM_MODULES:
        return "slim"
    for prefix in TF_PREFIXES:
        if qualified.startswith(prefix):
            name = qualified[len(prefix) :]
            for private, public in PRIVATE_MODULES:
                if name.startswith(private):
                    return public + name[len(private) :]
            return name
    return None


def last_names(symbols) -> frozenset[str]:
    """The last names of canonical TF symbols (`slim.batch_norm` -> `batch_norm`): what the
    stdlib pre-checks, which see only how a call is spelled, look for."""
    return frozenset(symbol.rsplit(".", 1)[-1] for symbol in symbols)


# -- variables ------------------------------------------------------------------------------


class VariableArgs(NamedTuple):
    """How a variable constructor takes its arguments: positions count from 0, None where
    the argument is keyword-only or absent."""

    trainable: bool  # the default of `trainable`
    trainable_at: int | None
    dtype_at: int | None
    value_at: int | None  # the initial value (None: `get_variable`'s name, shape, dtype, ...)


VARIABLE_CONSTRUCTORS = {
    "Variable": VariableArgs(True, 1, None, 0),
    "VariableV1": VariableArgs(True, 1, None, 0),
    "get_variable": VariableArgs(True, 5, 2, None),
    "slim.variable": VariableArgs(True, 5, 2, None),
    "slim.model_variable": VariableArgs(True, 5, 2, None),
    "get_local_variable": VariableArgs(False, None, 2, None),
    "slim.local_variable": VariableArgs(False, None, None, 0),
    "slim.global_variable": VariableArgs(False, None, None, 0),
}
# Where a constructor takes `collections=` (its position), for those that honour it; a
# variable outside GLOBAL_VARIABLES is no model state the workers share.
VARIABLE_COLLECTIONS_AT = {"Variable": 2, "VariableV1": 2, "get_variable": 6,
                           "slim.variable": 6}
LOCAL_VARIABLE_MAKERS = frozenset({"get_local_variable", "slim.local_variable"})
# The collection keys (`tf.GraphKeys.X`, or the string) that make a variable global.
GLOBAL_COLLECTION_KEYS = frozenset({"GLOBAL_VARIABLES", "VARIABLES", "variables"})
# Initial value first (`Variable(initial_value, trainable, ...)`):
VARIABLE_CALLS = frozenset(n for n, a in VARIABLE_CONSTRUCTORS.items() if a.value_at == 0)
# Name first (`get_variable(name, shape, dtype, initializer, ...)`):
GET_VARIABLE_CALLS = frozenset(n for n, a in VARIABLE_CONSTRUCTORS.items() if a.value_at is None)
# Gives an existing variable back (tf-slim's): a variable, but no constructor.
UNIQUE_VARIABLE_GETTER = "slim.get_unique_variable"

# What creates the global step. (`get_global_step` only finds one: it creates no variable,
# so it is no maker; a rule asking what a name holds reads both tables.)
GLOBAL_STEP_MAKERS = frozenset(
    {"train.get_or_create_global_step", "train.create_global_step",
     "slim.get_or_create_global_step", "slim.create_global_step"}
)
GLOBAL_STEP_GETTERS = frozenset({"train.get_global_step", "slim.get_global_step"})

# Calls that give a list of variables: "variable" (an optimizer may update them) or "frozen".
VARIABLE_LISTS = {
    "trainable_variables": "variable", "global_variables": "variable",
    "all_variables": "variable", "model_variables": "variable",
    "local_variables": "frozen", "moving_average_variables": "frozen",
    "slim.get_variables": "variable", "slim.get_model_variables": "variable",
    "slim.get_trainable_variables": "variable", "slim.get_variables_to_restore": "variable",
    "slim.get_variables_by_name": "variable", "slim.get_variables_by_suffix": "variable",
    "slim.get_local_variables": "frozen",
}
COLLECTION_GETTERS = frozenset({"get_collection", "get_collection_ref"})
# What adds an op to collections: `add_to_collection(key, op)`, `add_to_collections(keys, op)`.
COLLECTION_ADDERS = frozenset({"add_to_collection", "add_to_collections"})
# The strings of TF 1.x's `GraphKeys`: TF's own collections (TF's machinery runs some of
# them itself: a Scaffold's init_op, local_init_op and table_initializer), no project's.
TF_COLLECTION_KEYS = frozenset({
    "_SUMMARY_V2", "activations", "asset_filepaths", "biases", "concatenated_variables",
    "cond_context", "eval_step", "global_step", "init_op", "local_init_op", "local_resources",
    "local_variables", "losses", "metric_variables", "model_variables",
    "moving_average_variables", "queue_runners", "ready_for_local_init_op", "ready_op",
    "regularization_losses", "resources", "saveable_objects", "savers",
    "streaming_model_ports", "summaries", "summary_op", "table_initializer", "train_op",
    "trainable_resource_variables", "trainable_variables", "update_ops", "variables",
    "weights", "while_context",
})
# Collection keys (`tf.GraphKeys.X`, or the string) that hold variables, as VARIABLE_LISTS.
VARIABLE_COLLECTION_KEYS = {
    "TRAINABLE_VARIABLES": "variable", "GLOBAL_VARIABLES": "variable", "VARIABLES": "variable",
    "MODEL_VARIABLES": "variable", "LOCAL_VARIABLES": "frozen",
    "trainable_variables": "variable", "variables": "variable",
    "model_variables": "variable", "local_variables": "frozen",
}
# What writes a variable in place, as a function taking it first or as its method.
VARIABLE_UPDATES = frozenset({
    "assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
    "scatter_mul", "scatter_div", "scatter_max", "scatter_min", "scatter_nd_update",
    "scatter_nd_add", "scatter_nd_sub", "batch_scatter_update"})

# tf-slim's model functions (tf_slim/nets, as tf.contrib.slim.nets before it: `from
# tensorflow.contrib.slim.nets import resnet_v1`, then `resnet_v1.resnet_v1_50(images)`):
# each builds a whole network of slim layers, so it makes their variables (get_variable,
# through slim.model_variable) under the caller's device scope and computes, as a layer
# does. The `*_arg_scope` functions make none.
SLIM_NET_CALLS = frozenset(f"slim.{n}" for n in (
    "alexnet_v2", "overfeat", "vgg_a", "vgg_16", "vgg_19", "vgg_d", "vgg_e",
    "inception_v1", "inception_v1_base", "inception_v2", "inception_v2_base",
    "inception_v3", "inception_v3_base",
    "resnet_v1", "resnet_v1_50", "resnet_v1_101", "resnet_v1_152", "resnet_v1_200",
    "resnet_v2", "resnet_v2_50", "resnet_v2_101", "resnet_v2_152", "resnet_v2_200",
    "stack_blocks_dense", "conv2d_same", "bottleneck"))

# Layers: they create variables and compute.
LAYER_CALLS = frozenset(
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
    # An RNN cell makes its kernels (get_variable) at its first call, inside these.
    | {f"{prefix}.{n}" for prefix in ("nn", "contrib.rnn") for n in (
        "dynamic_rnn", "bidirectional_dynamic_rnn", "static_rnn", "static_bidirectional_rnn",
        "static_state_saving_rnn")}
    | SLIM_NET_CALLS
)
CREATES_VARIABLES = VARIABLE_CALLS | GET_VARIABLE_CALLS | GLOBAL_STEP_MAKERS | LAYER_CALLS
# The makers that go through `get_variable`: under a variable scope with reuse=True they give
# back the variable made earlier (wherever it was placed) and create none. `tf.Variable`,
# `create_global_step` and the metrics' variables are made anew every time (seed 003).
REUSED_UNDER_REUSE = GET_VARIABLE_CALLS | LAYER_CALLS | frozenset(
    {"train.get_or_create_global_step", "slim.get_or_create_global_step"})
# tf.metrics: each makes local variables (LOCAL_VARIABLES, METRIC_VARIABLES: float32 totals
# and counts, float64 for the *_at_k ones and mean_iou's confusion matrix, all VariableV2 in
# graph mode) and computes its value and update op. Not in CREATES_VARIABLES: a worker's
# local variables are its own on purpose, no parameter server's.
METRIC_CALLS = frozenset(f"metrics.{n}" for n in (
    "accuracy", "auc", "average_precision_at_k", "false_negatives",
    "false_negatives_at_thresholds", "false_positives", "false_positives_at_thresholds", "mean",
    "mean_absolute_error", "mean_cosine_distance", "mean_iou", "mean_per_class_accuracy",
    "mean_relative_error", "mean_squared_error", "mean_tensor", "percentage_below", "precision",
    "precision_at_k", "precision_at_thresholds", "precision_at_top_k", "recall", "recall_at_k",
    "recall_at_thresholds", "recall_at_top_k", "root_mean_squared_error",
    "sensitivity_at_specificity", "sparse_average_precision_at_k", "sparse_precision_at_k",
    "specificity_at_sensitivity", "true_negatives", "true_negatives_at_thresholds",
    "true_positives", "true_positives_at_thresholds"))

# -- batch norms ----------------------------------------------------------------------------


class BatchNormArgs(NamedTuple):
    """How a batch-norm function is told it trains, and where its updates go."""

    training: str  # the argument that says it trains
    training_at: int
    trains_by_default: bool
    updates_collections: tuple[str, int] | None  # (argument, position); None: no such


# Batch-norm functions that put their moving-average updates in UPDATE_OPS:
BATCH_NORMS = {
    "slim.batch_norm": BatchNormArgs("is_training", 9, True, ("updates_collections", 8)),
    "contrib.layers.batch_norm": BatchNormArgs("is_training", 9, True,
                                               ("updates_collections", 8)),
    "layers.batch_normalization": BatchNormArgs("training", 14, False, None),
}
BATCH_NORM_LAYER = "layers.BatchNormalization"  # tf.layers' class: `training` goes to its call
ARG_SCOPE = "slim.arg_scope"
# tf-slim model functions built on slim.batch_norm (`is_training=True` by default), from
# tf_slim.nets or tensorflow/models' research/slim `nets` package: their last names.
SLIM_NET_NAME = re.compile(r"resnet_v[12](_\d+)?|inception_v[234]|inception_resnet_v2"
                           r"|mobilenet(_v\d)?(_\d+)?")
# The slim nets that build no batch norm of their own: each one is a layer's
# `normalizer_fn`, called with the layer's `normalizer_params` (resnet_v1's convolutions;
# resnet_v2 calls `batch_norm` itself for its pre-activations).
SLIM_NETS_NORMALIZED_BY_LAYERS = re.compile(r"resnet_v1(_\d+)?")

# -- library modules: objects that make their variables when called ------------------------
#
# A TF-ecosystem library's modules are objects: constructing one makes no variable, its
# first call ("connecting" it) makes them under the caller's device scope, and its later
# calls reuse them (Sonnet 1.x wraps each module's `_build` in `tf.make_template`). They are
# named `LIBRARY.Class` whatever module path reaches them (`snt.Linear` for
# `sonnet.python.modules.basic.Linear`): Sonnet's classes are flat, one last name each.

# The qualified-name prefix of each library -> the short name its modules are spelled with.
LIBRARY_PREFIXES = {"sonnet.": "snt."}
# Words without which a file's text names no library module (the facts' pre-filter).
LIBRARY_WORDS = ("sonnet",)
# Sonnet 1.x (deepmind/sonnet, tag v1.36, sonnet/python/modules/): the module classes whose
# `_build` makes variables with `tf.get_variable` (directly, or through the modules it
# constructs: the nets), and `snt.Module(build)`, whose build function is the project's
# and is there to make them. Modules without variables (BatchFlatten, BatchReshape,
# SliceByDim, ...) are not listed; nor are wrappers whose variables are their inner
# modules' (Sequential, DeepRNN, BatchApply).
LIBRARY_VARIABLE_MODULES = frozenset(
    {f"snt.{n}" for n in (
        "Linear", "ConcatLinear", "AddBias", "TrainableVariable", "Embed", "LayerNorm",
        "MovingAverage", "BatchNorm", "BatchNormV2",
        "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
        "CausalConv1D", "InPlaneConv2D", "DepthwiseConv2D", "SeparableConv1D",
        "SeparableConv2D",
        "VanillaRNN", "LSTM", "GRU", "BatchNormLSTM", "Conv1DLSTM", "Conv2DLSTM", "HighwayCore",
        "MLP", "ConvNet2D", "ConvNet2DTranspose", "AlexNet", "AlexNetFull", "AlexNetMini",
        "VectorQuantizer", "VectorQuantizerEMA",
        "Module")})
# What a call of a module object runs: Sonnet 1.x's `AbstractModule.__call__` runs the
# template of the subclass's `_build` (a project's module is such a subclass).
LIBRARY_BUILD_METHOD = "_build"


class ModuleBatchNormArgs(NamedTuple):
    """How a library's batch-norm module is told it trains (an argument of its call: its
    input first) and where its updates go (an argument of its constructor)."""

    training: str
    training_at: int  # among the call's arguments
    updates_collection: str  # the constructor's keyword
    updates_default: str | None  # the collection by default (None: updated in place)


# Sonnet 1.x's batch norms (batch_norm.py, batch_norm_v2.py at v1.36): BatchNorm adds its
# moving-average updates to `update_ops_collection`, by default "update_ops" (UPDATE_OPS),
# where `is_training` of its call is or may be True; BatchNormV2 updates in place by
# default (`update_ops_collection=None`).
LIBRARY_BATCH_NORMS = {
    "snt.BatchNorm": ModuleBatchNormArgs("is_training", 1, "update_ops_collection",
                                         "update_ops"),
    "snt.BatchNormV2": ModuleBatchNormArgs("is_training", 1, "update_ops_collection", None),
}


# A batch norm written by hand (JZDSS/multi-gpus' layers.batch_norm: `assign_moving_average`
# of its moving mean and variance) that adds its updates to UPDATE_OPS, TF's batch norms'
# collection, with `add_to_collection`: a batch norm as the library ones are, in findings
# named by that call.
UPDATE_OPS_ADDED = "add_to_collection(UPDATE_OPS)"

# Calls that tie ops together: a train op and the update ops in one of them run together.
OP_TIES = frozenset({"group", "tuple", "with_dependencies", "control_dependencies"})
# A name that says it holds the update ops where the code does not show it (a parameter, an
# attribute): update_ops, extra_update_ops, UPDATE_OPS, bn_updates, model.updates; not
# grad_updates (an optimizer's) or lr_update_op.
UPDATE_OPS_NAME = re.compile(r"^(\w*_)?update_?ops$|^(bn|batch_?norm)\w*updates?$|^updates$",
                             re.IGNORECASE)


def library_name(qualified: str) -> str | None:
    """`sonnet.python.modules.basic.Linear` -> `snt.Linear`: a library's symbol by its
    short name; None for a name outside the libraries listed."""
    for prefix, short in LIBRARY_PREFIXES.items():
        if qualified.startswith(prefix):
            return short + qualified.rsplit(".", 1)[-1]
    return None


# -- training, sessions, devices ------------------------------------------------------------

# Optimizer methods that make the train op (a variable given second is the global step).
TRAIN_METHODS = frozenset({"minimize", "apply_gradients"})
# What differentiates a loss, each taking `colocate_gradients_with_ops`: an optimizer's
# methods, and `tf.gradients` (its keyword in v1 only: TF 2's `tf.gradients` colocates always).
GRADIENT_METHODS = frozenset({"minimize", "compute_gradients"})
GRADIENT_CALLS = GRADIENT_METHODS | {"gradients"}
# Names of TF 1.x's top level that TF 2 dropped from it (compat.v1 keeps them): a program
# reaching one through plain `tensorflow` runs on TF 1.x, where `tf.gradients` is v1's.
TF2_DROPPED = frozenset({
    "contrib", "placeholder", "Session", "InteractiveSession", "ConfigProto", "get_variable",
    "variable_scope", "global_variables_initializer", "global_variables",
    "trainable_variables", "GraphKeys", "get_collection", "layers", "train.Saver",
    "train.GradientDescentOptimizer", "train.AdamOptimizer", "train.MomentumOptimizer"})
# TF functions whose op writes variables when fetched: train ops made in one call, a counter
# (any `raw_ops.` op counts too: what it writes is its own).
TRAIN_OP_MAKERS = frozenset({"contrib.layers.optimize_loss", "slim.create_train_op",
                             "contrib.training.create_train_op", "count_up_to"})
# Contrib's `optimize_loss` (tf-slim's copy too), which runs the UPDATE_OPS collection
# unless its `update_ops=` argument names the update ops to run instead.
OPTIMIZE_LOSS = frozenset({"contrib.layers.optimize_loss", "slim.optimize_loss"})
# An optimizer's constructor, canonically (`train.AdamOptimizer`, `keras.optimizers.SGD`,
# `contrib.opt.LazyAdamOptimizer`): what it is given (a learning rate, a momentum) steers
# the updates; the loss has no gradient to it.
OPTIMIZER_CLASS = re.compile(r"train\.\w+Optimizer|contrib\.opt\.\w+Optimizer"
                             r"|keras\.optimizers\.(legacy\.)?[A-Z]\w*")
MONITORED_SESSIONS = frozenset(
    {"train.MonitoredSession", "train.MonitoredTrainingSession", "train.SingularMonitoredSession"}
)
DEVICE_CALLS = frozenset({"device", "python.framework.ops.device"})
# TF's gather of rows (its gradient measures the table inside `colocate_with(table)`).
GATHER_CALLS = frozenset({"gather", "compat.v1.gather"})
REPLICA_DEVICE_SETTER = "train.replica_device_setter"
# Words without which a file's text names no ps job (conservative, as the pre-filter).
PS_JOB_WORDS = ("job:ps", "'ps'", '"ps"')

# -- deprecated names -----------------------------------------------------------------------

# TF 1.x's deprecated initializer family -> the name that replaced it: what TF's own
# `@deprecated` decorators say (tensorflow/python/ops/variables.py, lookup_ops.py). The old
# names work on TF 1.x with a warning; TF 2 keeps them in compat.v1 only.
DEPRECATED_INITIALIZERS = {
    "initialize_all_variables": "global_variables_initializer",
    "initialize_variables": "variables_initializer",
    "initialize_local_variables": "local_variables_initializer",
    "all_variables": "global_variables",
    "initialize_all_tables": "tables_initializer",
}
# Ops that run every variable initializer they are made for (each an assign), by their
# current names and the deprecated ones above.
_VARIABLE_INITIALIZERS = frozenset(
    {"global_variables_initializer", "local_variables_initializer", "variables_initializer"})
INITIALIZER_CALLS = _VARIABLE_INITIALIZERS | frozenset(
    old for old, new in DEPRECATED_INITIALIZERS.items() if new in _VARIABLE_INITIALIZERS)
