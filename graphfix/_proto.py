"""The protobuf boundary: TensorFlow's message classes, loaded without the TF runtime.

`import tensorflow` costs seconds; its `*_pb2` modules cost milliseconds. They live under
the `tensorflow` package, whose `__init__` starts the runtime, so we import them beneath a
stand-in parent module and then remove the stand-in. The loaded `tensorflow.core.*` modules
stay in `sys.modules`, so a later real `import tensorflow` reuses them: its `GraphDef` is
our `GraphDef` (same class), and no descriptor is registered twice.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from functools import cache

_lock = threading.Lock()

_MODULES = {
    "graph_pb2": "tensorflow.core.framework.graph_pb2",
    "node_def_pb2": "tensorflow.core.framework.node_def_pb2",
    "attr_value_pb2": "tensorflow.core.framework.attr_value_pb2",
    "types_pb2": "tensorflow.core.framework.types_pb2",
    "tensor_shape_pb2": "tensorflow.core.framework.tensor_shape_pb2",
    "op_def_pb2": "tensorflow.core.framework.op_def_pb2",
    "meta_graph_pb2": "tensorflow.core.protobuf.meta_graph_pb2",
    "saved_model_pb2": "tensorflow.core.protobuf.saved_model_pb2",
}


@cache
def pb() -> types.SimpleNamespace:
    """Return a namespace of TF's `*_pb2` modules (graph_pb2, meta_graph_pb2, ...)."""
    with _lock:
        if "tensorflow" in sys.modules:  # the runtime is already here: use it as is
            return types.SimpleNamespace(
                **{k: importlib.import_module(v) for k, v in _MODULES.items()}
            )
        spec = importlib.util.find_spec("tensorflow")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("graphfix needs the 'tensorflow' package (pip install tensorflow)")
        stand_in = types.ModuleType("tensorflow")
        stand_in.__path__ = list(spec.submodule_search_locations)
        sys.modules["tensorflow"] = stand_in
        try:
            loaded = {k: importlib.import_module(v) for k, v in _MODULES.items()}
        finally:
            if sys.modules.get("tensorflow") is stand_in:
                del sys.modules["tensorflow"]
        return types.SimpleNamespace(**loaded)
