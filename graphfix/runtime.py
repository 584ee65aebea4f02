"""Run-time help for code that cannot be rewritten: feed dicts that feed variables.

Feeding a variable that an optimizer updates fails with "... incompatible with expected
float_ref". `load_variable_feeds` assigns those values through each variable's own
initializer (as `Variable.load` does: no op is added to the graph, so calling it every step
does not grow the graph) and returns the feeds that remain::

    feeds = graphfix.runtime.load_variable_feeds(sess, {embeddings: value, x: batch})
    sess.run(train_op, feed_dict=feeds)
"""

from __future__ import annotations

from typing import Any

from graphfix.graph.index import VARIABLE_OPS


def _variable_op(session, key):
    """The variable op a feed key stands for (tf.Variable, its tensor, or a name), or None."""
    op = None
    if hasattr(key, "initializer") and hasattr(key, "op"):  # a tf.Variable
        op = key.op
    elif hasattr(key, "op") and hasattr(key, "dtype"):  # a tf.Tensor
        op = key.op
    elif isinstance(key, str):
        try:
            element = session.graph.as_graph_element(key)
        except (KeyError, ValueError, TypeError):
            return None
        op = getattr(element, "op", element)
    return op if op is not None and op.type in VARIABLE_OPS else None


def _initializer_of(graph, variable_op):
    """The variable's initializing assign (`VAR/Assign`): its value input can be fed."""
    try:
        assign = graph.get_operation_by_name(f"{variable_op.name}/Assign")
    except KeyError:
        assign = None
    if assign is None or assign.type not in ("Assign", "AssignVariableOp"):
        raise ValueError(f"variable {variable_op.name} has no initializer to assign through")
    return assign


def split_feed_dict(session, feed_dict: dict) -> tuple[dict, dict]:
    """(variable op -> value, the other feeds) for a feed dict."""
    variables, feeds = {}, {}
    for key, value in feed_dict.items():
        op = _variable_op(session, key)
        if op is None:
            feeds[key] = value
        else:
            variables[op] = value
    return variables, feeds


def load_variable_feeds(session, feed_dict: dict) -> dict[Any, Any]:
    """Assign every fed variable its value now; return the feeds left to pass to `run`."""
    variables, feeds = split_feed_dict(session, feed_dict)
    for op, value in variables.items():
        assign = _initializer_of(session.graph, op)
        session.run(assign, feed_dict={assign.inputs[1]: value})
    return feeds
