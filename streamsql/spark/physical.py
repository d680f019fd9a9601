"""The physical choice per operator: which ones Spark Structured Streaming runs natively.

Spark runs an operator natively when its append-mode streaming operator gives Flink's
results exactly: projections and filters, TUMBLE and HOP aggregations (emitted once the
watermark passes the window), inner stream-stream joins (regular, interval, window),
lookups into a bounded table, UNION ALL. The others — aggregates that update, Top-N,
deduplication, OVER, outer joins, CUMULATE and SESSION windows, COUNT DISTINCT in a
window, windows over the output of another stateful operator — have no append-mode
operator in Spark; they need streamsql's stateful operators. Until those run, such a
query over bounded input is computed as one bounded computation (Flink's final result),
and over unbounded input it is refused at plan time, naming the operator.
"""

from __future__ import annotations

from streamsql.plan.aggregate_operators import GroupAggregate, WindowAggregate
from streamsql.plan.join_operators import Join
from streamsql.plan.operators import Calc, Correlate, Operator, Scan, Sink, Union, Values, WindowAssign, walk

NATIVE_WINDOWS = ("TUMBLE", "HOP")
_STATELESS = (Scan, Values, Calc, Correlate, Union, Sink, WindowAssign)


def needs_stateful_operator(root: Operator) -> Operator | None:
    """The first operator (from the sources up) Spark cannot stream natively, or None."""
    for node in reversed(list(walk(root))):
        if not _native(node):
            return node
    return None


def stateful_operators(root: Operator) -> list[Operator]:
    """Every operator Spark cannot stream natively (sources first)."""
    return [node for node in reversed(list(walk(root))) if not _native(node)]


def top_level_group_aggregate(root: Operator) -> bool:
    """Whether the only operator Spark lacks is a GroupAggregate with nothing above it but
    projections and filters (and the sink): streamsql's stateful GroupAggregate runs it."""
    missing = stateful_operators(root)
    if len(missing) != 1 or not isinstance(missing[0], GroupAggregate):
        return False
    node = root
    while node is not missing[0]:
        if not isinstance(node, (Calc, Sink)) or len(node.inputs) != 1:
            return False
        node = node.inputs[0]
    return True


def _native(node: Operator) -> bool:
    if isinstance(node, WindowAssign):
        window = node.window
        return window is not None and window.kind in NATIVE_WINDOWS and not window.proctime and not _stateful_below(node)
    if isinstance(node, _STATELESS):
        return True
    if isinstance(node, WindowAggregate):
        window = node.window
        distinct = any("DISTINCT" in s.upper() for s in node.select)
        return (window is not None and window.kind in NATIVE_WINDOWS and not window.proctime and not distinct
                and not _stateful_below(node))
    if isinstance(node, Join):  # regular, interval, window and lookup joins alike
        return node.join_type == "InnerJoin" and not _stateful_below(node)
    return False


def _stateful_below(node: Operator) -> bool:
    """Whether a stateful operator feeds this one: Spark's append mode cannot chain them
    with Flink's results (a window over a window aggregate, a join of two aggregates)."""
    return any(not isinstance(below, _STATELESS) for child in node.inputs for below in walk(child))
