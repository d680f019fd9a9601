"""The physical choice per operator: which ones Spark Structured Streaming runs natively.

Spark runs an operator natively when its append-mode streaming operator gives Flink's
results exactly: projections and filters, TUMBLE and HOP aggregations (emitted once the
watermark passes the window), inner stream-stream joins (regular, interval, window),
lookups into a bounded table, UNION ALL. SESSION window aggregates run on Spark's
session_window. The others — aggregates that update, Top-N,
deduplication, OVER, outer joins, CUMULATE windows, COUNT DISTINCT in a
window, windows over the output of another stateful operator — have no append-mode
operator in Spark; they need streamsql's stateful operators (spark.stateful): GroupAggregate,
Rank (Top-N), Deduplicate, OverAggregate, regular joins (outer, or of a changelog),
window aggregates (CUMULATE, DISTINCT, or inside a chain of stateful operators), window
Top-N, window deduplication and event-time temporal joins run there; a CUMULATE window's rows are assigned
statelessly for them (spark.windows.window_sql). A query needing another one is computed
as one bounded computation over bounded input (Flink's final result), and over unbounded
input it is refused at plan time, naming the operator.

A GroupAggregate whose consumer takes UPDATE_AFTER only (plan.update_kinds: a blackhole, an
upsert sink keyed by the group keys) runs on Spark's own streaming aggregation in update
mode when Spark computes its calls as Flink does (``native_update_aggregate``): each
micro-batch then emits the new row of every key it changed, which is that changelog.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.aggregate_operators import (GroupAggregate, OverAggregate, WindowAggregate, WindowDeduplicate,
                                                WindowRank)
from streamsql.plan.changelog_functions import ProcessTableFunction
from streamsql.plan.join_operators import IntervalJoin, Join, TemporalJoin, WindowJoin
from streamsql.plan.match_recognize import MatchRecognize
from streamsql.plan.operators import Calc, Correlate, Operator, Scan, Sink, Sort, Union, Values, WindowAssign, walk

NATIVE_WINDOWS = ("TUMBLE", "HOP")
OPERATOR_WINDOWS = ("TUMBLE", "HOP", "CUMULATE")  # the windows streamsql's window operators take
_STATELESS = (Scan, Values, Calc, Correlate, Union, Sink, WindowAssign)


def needs_stateful_operator(root: Operator) -> Operator | None:
    """The first operator (from the sources up) Spark cannot stream natively, or None."""
    missing = stateful_operators(root)
    return missing[0] if missing else None


def stateful_operators(root: Operator) -> list[Operator]:
    """Every operator Spark cannot stream natively (sources first)."""
    aggregates = [node for node in walk(root) if isinstance(node, WindowAggregate)]
    ranks = [node for node in walk(root) if isinstance(node, (WindowRank, WindowDeduplicate, WindowJoin))]
    update = native_update_aggregate(root)
    direct = {id(child) for node in aggregates for child in node.inputs}
    into_aggregates = {id(below) for node in aggregates for below in _fed(node)}
    through = into_aggregates | {id(below) for node in ranks for below in _fed(node)}
    return [node for node in reversed(list(walk(root))) if node is not update
            and not _native(node, id(node) in direct, id(node) in through, id(node) in into_aggregates)]


# Spark's streaming aggregate computes these as Flink does (spark.dialect spells their types);
# the others keep an order (LISTAGG, FIRST_VALUE, ...), a set (DISTINCT) or are Flink's own.
_UPDATE_CALLS = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)


def native_update_aggregate(root: Operator) -> GroupAggregate | None:
    """The GroupAggregate Spark runs itself, in update output mode, or None: the query's
    last operator below its sink and projections, told to emit UPDATE_AFTER only
    (plan.update_kinds), over inserts from stateless operators (or lookups), grouped by
    plain keys (no GROUPING SETS), calling COUNT, SUM, MIN, MAX and AVG (with FILTER) only.
    Spark's update mode emits, each micro-batch, the new row of each key the batch changed:
    Flink's [I,UA] changelog of it, one change per key and batch (Flink's mini-batch)."""
    from streamsql.dialect.flink import Flink
    from streamsql.plan.update_kinds import top_operator

    node = top_operator(root)
    if not isinstance(node, GroupAggregate) or node.update_before or _stateful_below(node):
        return None
    if any(isinstance(below, WindowAssign) for below in walk(node)) or not node.group_by \
            or any(word in key.upper() for key in node.group_by for word in ("GROUPING SETS", "ROLLUP", "CUBE")):
        return None
    for item in node.select:
        try:
            parsed = exp.maybe_parse(item, dialect=Flink)
        except Exception:  # noqa: BLE001 - a text the planner wrote; unreadable means not native
            return None
        calls = [f for f in parsed.find_all(exp.Func) if isinstance(f, exp.AggFunc) or isinstance(f, exp.Anonymous)]
        if any(not isinstance(f, _UPDATE_CALLS) or f.find(exp.Distinct) for f in calls):
            return None
    return node


STATEFUL_KINDS = ("GroupAggregate", "Rank", "Deduplicate", "OverAggregate", "Join", "WindowAggregate", "WindowRank",
                  "WindowDeduplicate", "TemporalJoin", "WindowJoin", "ChangelogNormalize", "SortLimit", "Limit",
                  "ProcessTableFunction")  # streamsql's own stateful operators


def changelog_scan(node: Operator) -> bool:
    """A source read as a changelog (a debezium-json topic, an upsert-kafka table under its
    ChangelogNormalize): its rows carry their kinds into streamsql's operators, never into
    Spark's (which would take them as inserts)."""
    return isinstance(node, Scan) and not node.mode.insert_only


def runs_on_stateful_operators(root: Operator) -> bool:
    """Whether every operator Spark lacks is one streamsql's stateful operators run: a
    GroupAggregate, a Top-N (Rank), a Deduplicate, an OverAggregate, a regular Join or a
    WindowAggregate (spark.stateful.chain then cuts the
    query around them; a shape it cannot cut is still refused there)."""
    missing = stateful_operators(root)
    return bool(missing) and all(node.kind in STATEFUL_KINDS or changelog_scan(node)
                                 or isinstance(node, Sort) and node.temporal for node in missing)


def _fed(node: Operator) -> list[Operator]:
    """The operators feeding a window aggregate through projections and filters only."""
    found = []
    for child in node.inputs:
        found.append(child)
        if isinstance(child, Calc):
            found += _fed(child)
    return found


def _native(node: Operator, aggregated: bool = False, filtered_into_aggregate: bool = False,
            into_window_aggregate: bool = False) -> bool:
    if isinstance(node, WindowAssign):
        # A SESSION window's rows only as a window aggregate's direct input (Spark's sessions
        # are built from the rows it aggregates); a CUMULATE window's rows, assigned row by row,
        # also through projections and filters into one, or into a window Top-N,
        # deduplication or join (streamsql's window operators).
        window = node.window
        kinds = NATIVE_WINDOWS + (("SESSION",) if aggregated else ()) + (
            ("CUMULATE",) if aggregated or filtered_into_aggregate else ())
        # A processing-time window's rows only into streamsql's window operator (Spark's
        # own windows are event time).
        proctime_ok = not window.proctime or aggregated or filtered_into_aggregate if window is not None else False
        # Over a stateful operator's rows (a window aggregate's window_time), only into a
        # window aggregate: streamsql's window operator then runs both (cascading windows).
        cascade = (into_window_aggregate and window is not None and window.kind in OPERATOR_WINDOWS
                   and _fired_by_watermark(node))
        return (window is not None and window.kind in kinds and proctime_ok
                and (cascade or not _stateful_below(node)))
    if isinstance(node, Scan) and not node.mode.insert_only:
        return False  # a changelog source
    if isinstance(node, ProcessTableFunction):  # TO_CHANGELOG of inserts is a projection; FROM_CHANGELOG makes changes
        return node.mode.insert_only and node.inputs[0].mode.insert_only and not _stateful_below(node)
    if isinstance(node, _STATELESS):
        return True
    if isinstance(node, WindowAggregate):
        window = node.window
        distinct = any("DISTINCT" in s.upper() for s in node.select)
        return (window is not None and not window.proctime and not distinct and not _stateful_below(node)
                and (window.kind in NATIVE_WINDOWS or _native_session(node)))
    if isinstance(node, MatchRecognize):  # spark.match_stream over unbounded input
        return not node.bounded and not _stateful_below(node)
    if isinstance(node, TemporalJoin) and node.rowtime:  # versions by event time: streamsql's operator
        return False
    if isinstance(node, TemporalJoin):  # a lookup: Spark's stream-static join (the table read as a static one)
        return node.join_type in ("InnerJoin", "LeftOuterJoin") and not _stateful_below(node)
    if type(node) is Join and (node.state_ttl or any(node.side_ttls)):
        return False  # a regular join with a state TTL: Spark's stream-stream join has none
    if isinstance(node, WindowJoin) and node.window.kind not in NATIVE_WINDOWS:
        return False  # a CUMULATE window's rows carry no event time Spark's join could evict by
    if isinstance(node, IntervalJoin):  # Spark's stream-stream join evicts by the time bounds, pads once
        return node.join_type in ("InnerJoin", "LeftOuterJoin", "RightOuterJoin", "FullOuterJoin") \
            and not _stateful_below(node)
    if isinstance(node, Join):  # regular, window and lookup joins alike
        return node.join_type == "InnerJoin" and not _stateful_below(node, _chained_join(node))
    return False


def _chained_join(node: Operator) -> bool:
    """Whether ``node`` is a regular inner join that Spark chains onto the regular inner joins
    of inserts below it (``a JOIN b JOIN c``): each keeps its rows unbounded, as Flink's do
    without a TTL, and emits inserts only, so Spark's stream-stream joins give Flink's rows."""
    return type(node) is Join and node.join_type == "InnerJoin" and not node.state_ttl and not any(node.side_ttls)


def _native_join_below(node: Operator) -> bool:
    return (_chained_join(node) and all(below.mode.insert_only for below in node.inputs)
            and _native(node))


def pads_as_time_passes(root: Operator) -> bool:
    """Whether an outer interval join pads rows once the watermark passes their bounds:
    over bounded input Spark's run to the end (availableNow) never gets there, so such a
    query runs as one batch unless the end of input is streamed ('execution.bounded-input')."""
    return any(isinstance(node, IntervalJoin) and node.join_type != "InnerJoin" for node in walk(root))


def _fired_by_watermark(node: Operator) -> bool:
    """Whether a node's rows come, through projections and filters, from window aggregates
    or OVER aggregates: operators that emit rows as the watermark passes them."""
    for below in node.inputs:
        while isinstance(below, Calc):
            below = below.inputs[0]
        if not isinstance(below, (WindowAggregate, OverAggregate)):
            return False
    return True


def _native_session(node: WindowAggregate) -> bool:
    """A SESSION window aggregate grouped by its PARTITION BY keys: Spark's session_window
    (sessions per group key, merged as rows arrive, emitted once the watermark passes)."""
    window = node.window
    return window.kind == "SESSION" and set(window.partition_by) <= {g.split(".")[-1] for g in node.group_by}


def _stateful_below(node: Operator, joins_chain: bool = False) -> bool:
    """Whether a stateful operator feeds this one: Spark's append mode cannot chain them
    with Flink's results (a window over a window aggregate, a join of two aggregates).
    ``joins_chain``: regular inner joins of inserts below do not count (see _chained_join)."""
    return any(_stateful(child, joins_chain) for child in node.inputs)


def _stateful(node: Operator, joins_chain: bool) -> bool:
    if joins_chain and _native_join_below(node):
        return False  # _native has checked what feeds it
    lookup = isinstance(node, TemporalJoin) and not node.rowtime  # a lookup join keeps no state
    projects = isinstance(node, ProcessTableFunction) and all(i.mode.insert_only for i in node.inputs)  # TO_CHANGELOG
    if not (isinstance(node, _STATELESS) or lookup or projects) or not node.mode.insert_only:
        return True
    return any(_stateful(child, joins_chain) for child in node.inputs)
