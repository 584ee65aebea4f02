"""Write graphfix/graph/op_signatures.json from the installed TensorFlow's op registry.

graphfix needs each op's input and output argument types (is it a ref? a resource?) to form
colocation groups as TF's placer does, without importing the TF runtime. This snapshot is
that knowledge; tests/test_op_signatures.py checks it still matches the installed TF.

Run: .venv/bin/python tools/gen_op_signatures.py
"""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def encode_arg(arg) -> str:
    """One argument as a short string: '&' ref, then '=ENUM' or the type attr name,
    then '*N' for a number_attr repeat or '[L]' for a type_list_attr."""
    out = "&" if arg.is_ref else ""
    if arg.type_list_attr:
        return out + "[" + arg.type_list_attr + "]"
    out += arg.type_attr if arg.type_attr else "=" + str(arg.type)
    if arg.number_attr:
        out += "*" + arg.number_attr
    return out


def current_signatures() -> dict:
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.core.framework import op_def_pb2

    buffer = pywrap_tf_session.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer))
    table = {}
    for op in ops.op:
        table[op.name] = {
            "in": [encode_arg(a) for a in op.input_arg],
            "out": [encode_arg(a) for a in op.output_arg],
        }
        if op.is_stateful:
            table[op.name]["stateful"] = True
        # SavedModels may strip attrs that hold their default value; keep the defaults
        # of the attrs that decide argument types and counts.
        used = {a.type_attr or a.number_attr or a.type_list_attr
                for a in list(op.input_arg) + list(op.output_arg)}
        defaults = {}
        for attr in op.attr:
            if attr.name in used and attr.HasField("default_value"):
                value = attr.default_value
                kind = value.WhichOneof("value")
                if kind == "type":
                    defaults[attr.name] = value.type
                elif kind == "i":
                    defaults[attr.name] = value.i
                elif kind == "list":
                    defaults[attr.name] = list(value.list.type)
        if defaults:
            table[op.name]["defaults"] = defaults
    return dict(sorted(table.items()))


def main() -> None:
    import tensorflow as tf

    path = pathlib.Path(__file__).resolve().parents[1] / "graphfix" / "graph" / "op_signatures.json"
    ops = current_signatures()
    # One op per line: graphfix decodes only the lines of the ops a graph uses.
    lines = [f'{json.dumps(op)}:{json.dumps(sig, separators=(",", ":"), sort_keys=True)}'
             for op, sig in sorted(ops.items())]
    head = json.dumps({"tensorflow": tf.__version__})[:-1] + ',"ops":{'
    path.write_text(head + "\n" + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {path} ({len(ops)} ops)")


if __name__ == "__main__":
    main()
