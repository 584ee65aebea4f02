"""Custom-op libraries for verify: loaded with TF's loader before the graph is imported (a
graph with a custom op does not import without its library). Whether TF folds such an op is
stateful-custom-ops' check (`Transform.verify_check`), asked once they are loaded.
"""

from __future__ import annotations

from typing import Sequence

from graphfix.tf_runtime import load_op_library, op_library_stat
# (run imports this module inside verify_graph, so this import finds run complete)
from graphfix.verification.run import VerifyError


def check_libraries(paths: Sequence[str]) -> None:
    """VerifyError for a library path that cannot be read (said before TF is imported)."""
    for path in paths:
        op_library_stat(path, VerifyError)


def load_libraries(paths: Sequence[str]) -> None:
    """Register the ops of each library in this process (`tf.load_op_library`)."""
    check_libraries(paths)
    for path in paths:
        load_op_library(path, VerifyError)
