"""What `graphfix verify` feeds each placeholder: a value synthesized from what consumes it.

A placeholder says only a dtype and a shape with holes; the graph says the rest. Each value is
drawn from a generator seeded by the placeholder's name, so two graphs that share a
placeholder (a fixed graph and its original, under `--compare`) are fed the same value, and
two towers' placeholders (`tower_0/ids`, `tower_1/ids`) different ones. A `--feed` value is
used as given.

Shapes (the unknown dimensions). Each placeholder's unknown first dimension is the batch,
one size for every placeholder: `UNKNOWN_DIM`, raised to a multiple of each `Split`'s count
where a placeholder's value is split along its first dimension (a batch split across
towers: each tower gets a share). The other unknown dimensions are chosen so that the
graph's own shape constraints hold: TF's shape functions, which `import_graph_def` runs
over the whole graph, are the judge. Where a
placeholder has an unknown dimension past the first (a tf_keras target `[None, None]`), the
graph with every placeholder's shape written in is imported; if a shape function refuses it
("Dimensions must be equal"), other sizes are tried for those dimensions: the known
dimensions of the tensors the placeholder is combined with (the other inputs and the
outputs of the ops its value reaches: a loss's logits, an elementwise op's other side),
then 1, fewest changes first, at most `MAX_SHAPE_TRIES` imports. So a sparse target
`[None, None]` beside logits `[None, 3]` is fed `[2, 1]` (`[2, 2]` flattens to 4 labels for
2 rows of logits and `[2, 3]` to 6, which `SparseSoftmaxCrossEntropyWithLogits`'s shape
function refuses), and a one-hot target `[None, None]` multiplied with probabilities
`[None, 3]` is fed `[2, 3]`. A constraint only a run sees (a shape computed from a tensor's
value) is not checked.

Values (from the ops the value reaches, followed through any op, into function bodies: a
`StatefulPartitionedCall`'s, a `While`'s, an `If`'s branches):

* a string read by an image decoder (`DecodeJpeg`, `DecodePng`, `DecodeImage`, `DecodeBmp`,
  `DecodeGif`, `DecodeAndCropJpeg`): a valid encoded image, of the size a `Resize*` after the
  decoder resizes to, else `IMAGE_SIZE` square, with the decoder's channels;
* a string read by `ParseExample`, `ParseExampleV2` or `ParseSingleExample`: a serialized
  `tf.train.Example` with every dense key (its dtype and shape, read from the node's attrs
  and its constant key inputs) and two values of each sparse and ragged key; a bytes
  feature that is itself decoded as an image is an image;
* a string read by `DecodeRaw`: bytes for the element count a constant `Reshape` after it
  asks for (else 16 elements); by `DecodeCSV`: one record with a number for each numeric
  column and `x` for each string one, in its delimiter; by `StringToNumber`: `"1"`; by
  `DecodeBase64`: base64 of `x`;
* an integer that indexes a variable (`Gather`, `GatherV2`, `ResourceGather`: an embedding's
  ids): ids in `[0, rows)` of the variable's first dimension, distinct where the batch
  allows, so each tower's share of a split batch differs from the others'; labels of a
  sparse softmax cross-entropy: below the logits' last dimension; `OneHot` indices: below its
  depth; a float cast to such an index (a tf_keras sparse target, a float placeholder cast
  to the labels' type) likewise; a `*Dataset`'s scalar (its batch size, a count): 2; any
  other integer scalar: 1 (a count, a size or an index, never an empty count); any other
  integer: 0 or 1;
* a float: standard normal; a bool: 0 or 1; any other string: `x`;
* a `sparse_placeholder`'s indices (`P/indices` beside `P/values`): one entry per batch row,
  row `i`'s at column 0, so the SparseTensor is valid and in row order (its values are
  synthesized as above: ids in an embedding's range); its shape (`P/shape`), where fed, the
  batch by 1s.

Not covered (fed `x`): `ParseSequenceExample`, `ParseTensor`, `DecodeProtoV2`,
`DecodeJSONExample`, file names (a `TFRecordDataset`'s), `DecodeWav`, `DecodeCompressed`.
"""

from __future__ import annotations

import base64
import itertools
import math
import struct
import zlib
from collections import deque
from typing import Any, Iterator

import numpy as np

from graphfix.graph import proto

UNKNOWN_DIM = 2  # the batch: the size of each placeholder's unknown first dimension
SEED = 1234
IMAGE_SIZE = 8  # the side of an encoded image where the graph does not resize it
MAX_SHAPE_TRIES = 24  # imports spent looking for shapes the graph's shape functions accept
_REACH = 64  # ops followed from a placeholder looking for what reads its value
# Ops that run Python code of the process that built the graph (`tf.py_func`,
# `tf.numpy_function`, `tf.py_function`): their functions are not in the graph.
PYTHON_FUNCTION_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
IMAGE_DECODERS = frozenset({"DecodeJpeg", "DecodePng", "DecodeImage", "DecodeBmp",
                            "DecodeGif", "DecodeAndCropJpeg"})
EXAMPLE_PARSERS = frozenset({"ParseExample", "ParseExampleV2", "ParseSingleExample"})
_STRING_READERS = IMAGE_DECODERS | EXAMPLE_PARSERS | {
    "DecodeRaw", "DecodeCSV", "StringToNumber", "DecodeBase64"}
_GATHERS = frozenset({"Gather", "GatherV2", "ResourceGather"})
_VARIABLES = frozenset({"VariableV2", "Variable", "VarHandleOp"})
_KEEPING_VALUES = frozenset({"Cast", "Identity", "Reshape", "Squeeze", "ExpandDims"})
_RESIZES = ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea")
# Where a functional op's inputs go: (attribute naming the function(s), inputs skipped).
_CALLS = {"PartitionedCall": (("f",), 0), "StatefulPartitionedCall": (("f",), 0),
          "While": (("body", "cond"), 0), "StatelessWhile": (("body", "cond"), 0),
          "If": (("then_branch", "else_branch"), 1),
          "StatelessIf": (("then_branch", "else_branch"), 1)}


def python_function_nodes(graph_def) -> list[str]:
    """The nodes of the graph and of its function bodies that call a Python function
    (`PYTHON_FUNCTION_OPS`): a graph that has one runs only in the process that built it."""
    nodes = [n.name for n in graph_def.node if n.op in PYTHON_FUNCTION_OPS]
    for function in graph_def.library.function:
        nodes += [f"{function.signature.name}/{n.name}" for n in function.node_def
                  if n.op in PYTHON_FUNCTION_OPS]
    return nodes


def feed_values(graph, graph_def, given: dict[str, np.ndarray]) -> dict[Any, np.ndarray]:
    """A value for every placeholder of the imported `graph` (`graph_def` is what it was
    imported from): the given one (by op or tensor name), else a synthesized one (see the
    module docstring); a PlaceholderWithDefault only where given."""
    from graphfix.graph.training import FED_OPS, FEEDABLE_OPS

    placeholders = [op for op in graph.get_operations() if op.type in FEEDABLE_OPS]
    chosen = {op.name: given.get(op.name, given.get(op.outputs[0].name)) for op in placeholders}
    fed = [op for op in placeholders if chosen[op.name] is not None or op.type in FED_OPS]
    flow = _Flow(graph_def)
    shapes = _shapes(graph, graph_def, flow, [op for op in fed if chosen[op.name] is None],
                     chosen)
    values = {}
    for op in fed:
        value = chosen[op.name]
        if value is None:
            rng = np.random.default_rng([SEED, zlib.crc32(op.name.encode())])
            value = _synthesized(op, shapes[op.name], flow, graph, rng)
        values[op.outputs[0]] = value
    by_name = {op.name: op for op in fed}
    for indices, shape in _sparse_placeholders(by_name):
        if chosen[indices.name] is None:
            _sparse_indices(values, indices, by_name.get(shape) if chosen.get(shape) is None
                            else None)
    return values


def _sparse_placeholders(fed: dict) -> Iterator[tuple]:
    """`sparse_placeholder`'s parts among the fed placeholders (TF names them `P/indices`,
    `P/values` and `P/shape`): (the indices placeholder, the shape's name) of each."""
    for name, op in fed.items():
        prefix = name[:-len("indices")]
        if name.endswith("/indices") and f"{prefix}values" in fed and op.outputs[0].shape.rank == 2:
            yield op, f"{prefix}shape"


def _sparse_indices(values: dict, indices, shape) -> None:
    """One valid SparseTensor: entry i at row i, column 0 (in row order, as TF's sparse
    ops ask; each batch row one entry), and where its shape is fed too, a shape that holds
    them."""
    count, rank = np.shape(values[indices.outputs[0]])
    positions = np.zeros((count, rank), dtype=np.int64)
    positions[:, 0] = np.arange(count)
    values[indices.outputs[0]] = positions
    if shape is not None:
        values[shape.outputs[0]] = np.array([max(count, 1)] + [1] * (rank - 1), dtype=np.int64)


def synthetic_value(dtype, shape, rng: np.random.Generator) -> np.ndarray:
    """A seeded value of a dtype (a TF DType) and shape, knowing nothing of its consumers
    (unknown dims: UNKNOWN_DIM)."""
    dims = [UNKNOWN_DIM if d is None or d < 0 else d for d in (shape or [])]
    np_dtype = dtype.as_numpy_dtype
    if dtype.is_floating:
        return rng.standard_normal(dims).astype(np_dtype)
    if dtype.is_integer:
        return rng.integers(0, 2, size=dims).astype(np_dtype)
    if dtype.is_bool:
        return rng.integers(0, 2, size=dims).astype(bool)
    return np.full(dims, b"x", dtype=object)


# ---- where a value goes -------------------------------------------------------------------

class _Flow:
    """The consumers of each node's outputs, in the graph and in each function body, by
    name; an op's inputs followed into the functions it calls."""

    def __init__(self, graph_def):
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self._graph_def = graph_def
        self._nodes: dict[str, dict] = {}
        self._consumers: dict[str, dict] = {}

    def _scope(self, scope: str):
        return self.functions[scope].node_def if scope else self._graph_def.node

    def node(self, scope: str, name: str):
        """The node of that name in `scope`, or None."""
        table = self._nodes.get(scope)
        if table is None:
            table = self._nodes[scope] = {n.name: n for n in self._scope(scope)}
        return table.get(name)

    def consumers(self, scope: str, name: str, port: str | None = None) -> list[tuple]:
        """(node, input position) reading node `name`'s output `port` (any output: None) in
        `scope` ("" the graph, else a function's name; a function's argument: its name)."""
        table = self._consumers.get(scope)
        if table is None:
            table = self._consumers[scope] = {}
            for node in self._scope(scope):
                for position, ref in enumerate(node.input):
                    if ref.startswith("^"):
                        continue
                    source, _, rest = ref.partition(":")
                    table.setdefault(source, []).append((node, position, rest or "0"))
        return [(node, position) for node, position, got in table.get(name, ())
                if port is None or got == port]

    def reached(self, scope: str, name: str, port: str | None = None,
                through: frozenset | None = None) -> Iterator[tuple]:
        """(scope, node, input position) of every op the value reaches, nearest first,
        through any op (or only those in `through`) and into called functions' arguments
        (at most `_REACH` ops)."""
        pending = deque([(scope, name, port)])
        seen = set()
        count = 0
        while pending and count < _REACH:
            scope, name, port = pending.popleft()
            for node, position in self.consumers(scope, name, port):
                if (scope, node.name) in seen:
                    continue
                seen.add((scope, node.name))
                count += 1
                yield scope, node, position
                if through is not None and node.op not in through and node.op not in _CALLS:
                    continue
                pending.append((scope, node.name, None))
                called, skipped = _CALLS.get(node.op, ((), 0))
                for attr in called:
                    function = self.functions.get(node.attr[attr].func.name)
                    if function is not None and position >= skipped and (
                            position - skipped < len(function.signature.input_arg)):
                        arg = function.signature.input_arg[position - skipped].name
                        pending.append((function.signature.name, arg, None))

    def const(self, scope: str, ref: str) -> np.ndarray | None:
        """The value of the Const that input `ref` names in `scope` (through Identity)."""
        from tensorflow.python.framework import tensor_util

        node = self.node(scope, ref.lstrip("^").split(":")[0])
        while node is not None and node.op == "Identity" and node.input:
            node = self.node(scope, node.input[0].split(":")[0])
        if node is None or node.op != "Const":
            return None
        return tensor_util.MakeNdarray(node.attr["value"].tensor)

    def input_node(self, scope: str, ref: str):
        """The node input `ref` names, through Identity and ReadVariableOp."""
        node = self.node(scope, ref.split(":")[0])
        while node is not None and node.op in ("Identity", "ReadVariableOp") and node.input:
            node = self.node(scope, node.input[0].split(":")[0])
        return node


# ---- shapes -------------------------------------------------------------------------------

def _shapes(graph, graph_def, flow: _Flow, synthesized: list, given: dict) -> dict:
    """Placeholder name -> the concrete shape it is fed (see the module docstring)."""
    batch = UNKNOWN_DIM
    for op in synthesized:
        for scope, node, position in flow.reached("", op.name):
            # (Split's inputs: axis, value; SplitV's: value, sizes, axis.)
            value_input, axis_input = {"Split": (1, 0), "SplitV": (0, 2)}.get(node.op, (-1, 0))
            if position != value_input or node.attr["num_split"].i < 1:
                continue
            axis = flow.const(scope, node.input[axis_input])
            if axis is not None and int(axis) == 0:
                batch = math.lcm(batch, node.attr["num_split"].i)
    base: dict[str, list[int]] = {}
    holes = []  # (placeholder, dim) of each unknown dimension past the first
    for op in synthesized:
        shape = op.outputs[0].shape
        dims = shape.as_list() if shape.rank is not None else []
        base[op.name] = [(batch if i == 0 else UNKNOWN_DIM) if d is None else d
                         for i, d in enumerate(dims)]
        holes += [(op.name, i) for i, d in enumerate(dims) if d is None and i > 0]
    if not holes:
        return base
    fixed = {name: list(np.shape(value)) for name, value in given.items() if value is not None}
    choices = []
    for name, dim in holes:
        # (1 last: it broadcasts against anything, so it fits where a neighbour's size is meant.)
        sizes = [base[name][dim], *sorted(_neighbour_dims(graph, name) - {1, base[name][dim]})]
        choices.append([*sizes[:4], 1])
    # Every combination of the sizes, fewest departures from the first size first.
    combos = sorted(itertools.product(*[range(len(c)) for c in choices]),
                    key=lambda picks: (sum(p > 0 for p in picks), picks))
    for picks in combos[:MAX_SHAPE_TRIES]:
        trial = {name: list(dims) for name, dims in base.items()}
        for (name, dim), sizes, pick in zip(holes, choices, picks):
            trial[name][dim] = sizes[pick]
        if _shapes_accepted(graph_def, {**trial, **fixed}):
            return trial
    return base


def _neighbour_dims(graph, name: str) -> set[int]:
    """The known dimensions of the tensors a placeholder's value meets within a few ops:
    the other inputs and the outputs of each op it reaches."""
    sizes: set[int] = set()
    frontier = [graph.get_operation_by_name(name)]
    seen = set()
    for _ in range(4):
        following = []
        for op in frontier:
            for consumer in {c for t in op.outputs for c in t.consumers()}:
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                following.append(consumer)
                for tensor in (*consumer.inputs, *consumer.outputs):
                    if tensor.shape.rank is not None:
                        sizes.update(d for d in tensor.shape.as_list() if d)
        frontier = following
    return sizes


def _shapes_accepted(graph_def, shapes: dict[str, list[int]]) -> bool:
    """Whether TF's shape functions accept the graph with these placeholder shapes."""
    import tensorflow as tf

    trial = type(graph_def)()
    trial.CopyFrom(graph_def)
    for node in trial.node:
        if node.name in shapes and "shape" in node.attr:
            shape = node.attr["shape"].shape
            shape.unknown_rank = False
            del shape.dim[:]
            for size in shapes[node.name]:
                shape.dim.add(size=size)
    try:
        with tf.Graph().as_default():
            tf.compat.v1.import_graph_def(proto.to_tf(trial), name="")
    except (ValueError, TypeError):  # (a shape function's refusal)
        return False
    return True


# ---- values -------------------------------------------------------------------------------

def _synthesized(op, shape: list[int], flow: _Flow, graph, rng) -> np.ndarray:
    dtype = op.outputs[0].dtype
    if dtype == "string":
        reader = next(((s, n, p) for s, n, p in flow.reached("", op.name)
                       if n.op in _STRING_READERS), None)
        if reader is None:
            return synthetic_value(dtype, shape, rng)
        try:
            one = _string_for(flow, *reader, rng)
        except (KeyError, ValueError, TypeError, IndexError):  # (a node unlike TF's own)
            return synthetic_value(dtype, shape, rng)
        value = np.empty(shape, dtype=object)
        value.fill(one)
        return value
    if dtype.is_integer or dtype.is_floating:
        # (A float reaches an index only through ops that keep its values: a tf_keras
        # target cast to the labels' type.)
        allowed = _index_range(flow, graph, op.name,
                               None if dtype.is_integer else _KEEPING_VALUES)
        if allowed is None and dtype.is_integer and not shape:
            allowed = _SCALAR  # (a count, a size or an index: 1 is each, 0 not a count)
        if allowed is None:
            return synthetic_value(dtype, shape, rng)
        count = int(np.prod(shape)) if shape else 1
        ids = rng.choice(np.arange(allowed.start, allowed.stop), size=count,
                         replace=count > len(allowed))
        return ids.reshape(shape).astype(dtype.as_numpy_dtype)
    return synthetic_value(dtype, shape, rng)


def _index_range(flow: _Flow, graph, name: str, through: frozenset | None) -> range | None:
    """The values a placeholder used as an index may take (see the module docstring), None
    where nothing it reaches says; `through`: the ops it is followed through (None: any)."""
    for scope, node, position in flow.reached("", name, through=through):
        if node.op in _GATHERS and position == 1:
            rows = _variable_rows(flow.input_node(scope, node.input[0]))
            if rows:
                return range(rows)
        if node.op == "SparseSoftmaxCrossEntropyWithLogits" and position == 1 and not scope:
            logits = graph.get_operation_by_name(node.name).inputs[0].shape
            if logits.rank and logits.as_list()[-1]:
                return range(logits.as_list()[-1])
        if node.op == "OneHot" and position == 0:
            depth = flow.const(scope, node.input[1])
            if depth is not None and int(depth) > 0:
                return range(int(depth))
        if "Dataset" in node.op and position > 0 and node.op not in _DATASETS_OF_VALUES:
            return _DATASET_SCALARS  # (a dataset op's first input is the dataset it reads)
    return None


_SCALAR = range(1, 2)  # an integer scalar that nothing said more of
_DATASETS_OF_VALUES = frozenset({"TensorSliceDataset", "TensorDataset"})
_DATASET_SCALARS = range(2, 3)  # an integer a dataset reads (a batch size, a count): never 0


def _variable_rows(node) -> int | None:
    if node is None or node.op not in _VARIABLES:
        return None
    dims = node.attr["shape"].shape.dim
    return dims[0].size if dims and dims[0].size > 0 else None


def _string_for(flow: _Flow, scope: str, reader, position: int, rng) -> bytes:
    """One string the op `reader` (in `scope`) accepts as input `position`."""
    op = reader.op
    if op in IMAGE_DECODERS:
        return _image_for(flow, scope, reader)
    if op in EXAMPLE_PARSERS:
        return _example_for(flow, scope, reader, rng)
    if op == "DecodeRaw":
        item = np.dtype(_numpy_dtype(reader.attr["out_type"].type)).itemsize
        return bytes(item * _raw_elements(flow, scope, reader))
    if op == "DecodeCSV":
        delimiter = reader.attr["field_delim"].s.decode() if "field_delim" in reader.attr else ","
        types = [_numpy_dtype(t) for t in reader.attr["OUT_TYPE"].list.type]
        return (delimiter or ",").join("x" if t == object else "1" for t in types).encode()
    if op == "StringToNumber":
        return b"1"
    if op == "DecodeBase64":
        return base64.urlsafe_b64encode(b"x")
    return b"x"


def _numpy_dtype(enum: int):
    import tensorflow as tf

    return tf.dtypes.as_dtype(enum).as_numpy_dtype


def _raw_elements(flow: _Flow, scope: str, reader) -> int:
    for _, node, position in flow.reached(scope, reader.name):
        if node.op == "Reshape" and position == 0:
            target = flow.const(scope, node.input[1])
            if target is not None:
                return int(np.prod([d for d in np.ravel(target) if d > 0])) or 1
    return 16


def _image_for(flow: _Flow, scope: str, decoder) -> bytes:
    """A valid image for `decoder` (see the module docstring)."""
    height = width = IMAGE_SIZE
    for _, node, position in flow.reached(scope, decoder.name):
        if node.op.startswith(_RESIZES) and position == 0:
            size = flow.const(scope, node.input[1])
            if size is not None and np.size(size) == 2 and min(np.ravel(size)) > 0:
                height, width = (int(s) for s in np.ravel(size))
                break
    channels = decoder.attr["channels"].i if "channels" in decoder.attr else 0
    channels = channels or 3
    pixels = (np.arange(height * width * channels) % 251).astype(np.uint8)
    pixels = pixels.reshape(height, width, channels)
    if decoder.op == "DecodeGif":
        return _gif(height, width)
    if decoder.op == "DecodeBmp":
        return _bmp(pixels[:, :, :3] if channels >= 3 else np.repeat(pixels, 3, axis=2))
    if decoder.op == "DecodePng" or channels == 4:
        return _png(pixels)
    return _jpeg(pixels)


def _jpeg(pixels: np.ndarray) -> bytes:
    """`pixels` encoded by TF's own JPEG encoder, in a graph of its own (eager or not)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        encode = tf.io.encode_jpeg(tf.constant(pixels), quality=95)
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run(encode)


def _png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG (gray, RGB or RGBA by the last dimension), unfiltered rows."""
    height, width, channels = pixels.shape
    color = {1: 0, 3: 2, 4: 6}[channels]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def _bmp(pixels: np.ndarray) -> bytes:
    """A 24-bit BMP: rows bottom-up, blue-green-red, each padded to four bytes."""
    height, width, _ = pixels.shape
    stride = (width * 3 + 3) // 4 * 4
    rows = b"".join(pixels[y, :, ::-1].tobytes().ljust(stride, b"\x00")
                    for y in reversed(range(height)))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(rows), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    return header + info + rows


def _gif(height: int, width: int) -> bytes:
    """A one-frame GIF of one color: a two-entry palette, every pixel index 0, written as
    LZW codes of 3 bits with a clear code before each run of two (the table never grows)."""
    count = height * width
    codes = []
    for start in range(0, count, 2):
        codes += [4] + [0] * min(2, count - start)  # clear, then indices
    codes.append(5)  # end of information
    bits, length = 0, 0
    out = bytearray()
    for code in codes:
        bits |= code << length
        length += 3
        while length >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            length -= 8
    if length:
        out.append(bits & 0xFF)
    blocks = b"".join(bytes([len(out[i:i + 255])]) + bytes(out[i:i + 255])
                      for i in range(0, len(out), 255))
    screen = struct.pack("<6sHHBBB", b"GIF89a", width, height, 0x80, 0, 0)
    palette = b"\x80\x40\x20\xff\xff\xff"
    image = struct.pack("<cHHHHB", b",", 0, 0, width, height, 0)
    return screen + palette + image + b"\x02" + blocks + b"\x00;"


def _example_for(flow: _Flow, scope: str, parser, rng) -> bytes:
    """A serialized tf.train.Example holding every feature `parser` reads."""
    from tensorflow.core.example import example_pb2

    dense, sparse = _parsed_features(flow, scope, parser)
    example = example_pb2.Example()
    for (key, dtype, shape), output in dense:
        size = int(np.prod([d for d in shape if d > 0])) if shape else 1
        _fill(example.features.feature[key], dtype, size or 1, rng,
              lambda: _image_in(flow, scope, parser, output))
    for key, dtype in sparse:
        _fill(example.features.feature[key], dtype, 2, rng, lambda: None)
    return example.SerializeToString()


def _fill(feature, dtype, size: int, rng, image) -> None:
    kind = np.dtype(_numpy_dtype(dtype))
    if kind.kind == "f":
        feature.float_list.value.extend(rng.standard_normal(size).tolist())
    elif kind.kind in "iu":
        feature.int64_list.value.extend(rng.integers(0, 2, size).tolist())
    else:
        encoded = image()
        feature.bytes_list.value.extend([encoded or b"x"] * size)


def _image_in(flow: _Flow, scope: str, parser, output: str) -> bytes | None:
    """An image where the parser's dense output `output` (a port) reaches an image decoder."""
    for inner_scope, node, _ in flow.reached(scope, parser.name, output):
        if node.op in IMAGE_DECODERS:
            return _image_for(flow, inner_scope, node)
    return None


def _parsed_features(flow: _Flow, scope: str, parser):
    """([((key, dtype enum, shape), output port)], [(key, dtype enum)]) of a parser: its
    dense and (sparse and ragged) features."""
    attrs = parser.attr
    dense_types = list(attrs["Tdense"].list.type)
    dense_shapes = [[d.size for d in s.dim] for s in attrs["dense_shapes"].list.shape]
    sparse_types = list(attrs["sparse_types"].list.type)
    if parser.op == "ParseSingleExample":
        dense_keys = [k.decode() for k in attrs["dense_keys"].list.s]
        sparse_keys = [k.decode() for k in attrs["sparse_keys"].list.s]
    elif parser.op == "ParseExample":
        count_sparse = attrs["Nsparse"].i
        count_dense = attrs["Ndense"].i
        keys = [flow.const(scope, ref) for ref in parser.input[2:2 + count_sparse + count_dense]]
        keys = [np.ravel(k)[0].decode() if k is not None else "" for k in keys]
        sparse_keys, dense_keys = keys[:count_sparse], keys[count_sparse:]
    else:  # ParseExampleV2: the keys are 1-D constants
        sparse_keys, dense_keys, ragged_keys = (
            [k.decode() for k in np.ravel(v)] if (v := flow.const(scope, parser.input[i]))
            is not None else [] for i in (2, 3, 4))
        sparse_keys += ragged_keys
        sparse_types += list(attrs["ragged_value_types"].list.type)
    # The dense values' outputs follow the sparse ones (indices, values and shapes).
    first_dense = 3 * len(attrs["sparse_types"].list.type)
    ports = ([f"dense_values:{i}" for i in range(len(dense_keys))] if scope
             else [str(first_dense + i) for i in range(len(dense_keys))])
    dense = list(zip(zip(dense_keys, dense_types, dense_shapes), ports))
    return dense, list(zip(sparse_keys, sparse_types))
