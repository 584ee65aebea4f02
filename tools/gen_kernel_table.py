"""Write graphfix/graph/kernel_table.json from the installed TensorFlow's kernel registry.

`graphfix fix` asks TF's kernel registry which device types can run each op (with its type
attrs). Asking the live registry means importing the TF runtime, seconds a graph rewrite
must not pay; this table holds the registry's answers (CPU, GPU and DEFAULT kernels, and the
type attrs' defaults) for the TensorFlow it was written from, and is used only when the
installed TensorFlow is that one (`graphfix.graph.kernels`, `_Bundled`).
tests/test_graph_model.py checks it still matches the installed TF.

Run: .venv/bin/python tools/gen_kernel_table.py
"""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

TABLE = pathlib.Path(__file__).resolve().parents[1] / "graphfix" / "graph" / "kernel_table.json"


def current_table() -> dict:
    """op -> {"kernels": [[device type, label, [[attr, [types]], ...]], ...], "defaults":
    {attr: [type]}}, as graphfix's snapshot keeps the registry's answers."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    from graphfix.graph import kernels

    buffer = pywrap_tf_session.TF_GetAllOpList()
    ops = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer))
    table = {}
    for op in sorted(ops.op, key=lambda o: o.name):
        table[op.name] = {
            "kernels": [k for k in kernels._registered_kernels(op.name)
                        if k[0] in kernels.BUNDLED_DEVICE_TYPES],
            "defaults": kernels._registered_defaults(op.name),
        }
    return table


def main() -> None:
    from graphfix.graph import kernels

    table = current_table()
    head = json.dumps(kernels.bundled_install())[:-1] + ',"ops":{'
    # One op per line: graphfix decodes only the lines of the ops a graph uses.
    lines = [f'{json.dumps(op)}:{json.dumps(entry, separators=(",", ":"), sort_keys=True)}'
             for op, entry in table.items()]
    TABLE.write_text(head + "\n" + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {TABLE} ({len(table)} ops)")


if __name__ == "__main__":
    main()
