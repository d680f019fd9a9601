"""Spark SQL that assigns rows to Flink's windows, with Flink's boundaries.

All arithmetic is on epoch milliseconds (Flink's time attributes are TIMESTAMP(3)):
- TUMBLE: start = ts - pmod(ts - offset, size)
- HOP: the size/slide windows whose start is in (ts - size, ts], one output row each
- CUMULATE: start = the size-aligned start; ends = start + k * step for every end > ts
- SESSION: per PARTITION BY key, a new session starts where the gap to the previous
  row exceeds GAP (Flink merges windows that touch); end = last row + GAP
window_time is window_end - 1 ms. Each window also knows its row's "slice end", the
earliest window end the row contributes to, which decides whether the row is late.
"""

from __future__ import annotations

from streamsql.plan.windows import WindowRelation

LATE_COLUMN = "__streamsql_late"
SEQ_COLUMN = "__streamsql_seq"
# A bounded read of a source whose watermark is per split (a Kafka partition, as Flink's
# Kafka source generates one per partition) carries each row's split: a row is late when
# its own split's watermark has passed its window (runtime.sources, kafka.frames).
SPLIT_COLUMN = "__streamsql_split"


def _q(name: str) -> str:
    return f"`{name}`"


def _ts(window: WindowRelation) -> str:
    return f"unix_millis({_q(window.time_column)})"


def _aligned(window: WindowRelation, unit: str) -> str:
    """The start of the unit-sized (SIZE or SLIDE) interval holding the row, offset-aligned."""
    ts, p = _ts(window), window.parameters
    return f"({ts} - pmod({ts} - {p.get('OFFSET', 0)}, {p[unit]}))"


def _first_step(window: WindowRelation) -> str:
    """CUMULATE: the number k of the first window (base + k * STEP) that holds the row."""
    return f"(({_ts(window)} - {_aligned(window, 'SIZE')}) div {window.parameters['STEP']} + 1)"


def slice_end_sql(window: WindowRelation) -> str:
    """The end of the earliest window a row belongs to, in epoch milliseconds."""
    p = window.parameters
    if window.kind == "TUMBLE":
        return f"({_aligned(window, 'SIZE')} + {p['SIZE']})"
    if window.kind == "HOP":
        return f"({_aligned(window, 'SLIDE')} + {p['SLIDE']})"
    if window.kind == "CUMULATE":
        return f"({_aligned(window, 'SIZE')} + {_first_step(window)} * {p['STEP']})"
    return f"({_ts(window)} + {p['GAP']})"


def late_flag_sql(window: WindowRelation, input_view: str, delay_ms: int, per_split: bool = False) -> str:
    """The input with a flag for rows Flink's window operator would drop as late.

    Flink's bounded-out-of-orderness watermark after a row is max(ts seen) - delay - 1 ms,
    and a row is late once the earliest window it belongs to has fired, i.e. when that
    window's end <= max(ts of the rows before it) - delay. Rows are taken in the order
    the source read them. ``per_split`` (the input has ``SPLIT_COLUMN``): each split's
    watermark is its own rows' — Flink's Kafka source keeps one per partition and takes the
    smallest, so a partition read ahead of another makes none of the other's rows late.
    """
    split = f"PARTITION BY {_q(SPLIT_COLUMN)} " if per_split else ""
    seen = (f"max({_ts(window)}) OVER ({split}ORDER BY {_q(SEQ_COLUMN)} ROWS BETWEEN UNBOUNDED PRECEDING"
            " AND 1 PRECEDING)")
    return (
        f"SELECT *, coalesce({slice_end_sql(window)} <= {seen} - {delay_ms}, false) AS {_q(LATE_COLUMN)}"
        f" FROM {_q(input_view)}"
    )


def window_sql(window: WindowRelation, input_view: str, keep_order: bool = False) -> str:
    """The TVF's output: the input's columns, window_start, window_end, window_time (and the
    input's read order, ``SEQ_COLUMN``, when ``keep_order``: spark.arrival_order)."""
    columns = _input_columns(window, keep_order)
    bounds = (
        "timestamp_millis(__ws) AS window_start, timestamp_millis(__we) AS window_end,"
        " timestamp_millis(__we - 1) AS window_time"
    )
    return f"SELECT {columns}, {bounds} FROM ({_assign(window, input_view)})"


def _input_columns(window: WindowRelation, keep_order: bool) -> str:
    """The TVF input's columns, and its read order (``SEQ_COLUMN``) when ``keep_order``."""
    return ", ".join(_q(c.name) for c in window.input_columns) + (f", {_q(SEQ_COLUMN)}" if keep_order else "")


def _assign(window: WindowRelation, source: str) -> str:
    """Rows with __ws/__we (window start/end in ms), one row per window."""
    p = window.parameters
    source = _q(source)
    if window.kind == "TUMBLE":
        start = _aligned(window, "SIZE")
        return f"SELECT *, {start} AS __ws, {start} + {p['SIZE']} AS __we FROM {source}"
    if window.kind == "HOP":
        first = f"__last - {(p['SIZE'] // p['SLIDE'] - 1) * p['SLIDE']}"
        return (
            f"SELECT *, __ws + {p['SIZE']} AS __we FROM (SELECT *, {_aligned(window, 'SLIDE')} AS __last FROM {source})"
            f" LATERAL VIEW explode(sequence({first}, __last, {p['SLIDE']})) __hop AS __ws"
        )
    if window.kind == "CUMULATE":
        steps = p["SIZE"] // p["STEP"]
        return (
            f"SELECT *, __base AS __ws, __base + __k * {p['STEP']} AS __we FROM"
            f" (SELECT *, {_aligned(window, 'SIZE')} AS __base, {_first_step(window)} AS __first FROM {source})"
            f" LATERAL VIEW explode(sequence(__first, {steps})) __cumulate AS __k"
        )
    return _session(window, source)


def _session(window: WindowRelation, source: str) -> str:
    keys = ", ".join(_q(k) for k in window.partition_by)
    by = f"PARTITION BY {keys} " if keys else ""
    session = f"PARTITION BY {keys + ', ' if keys else ''}__sid"
    gap = window.parameters["GAP"]
    starts = (
        f"SELECT *, CASE WHEN __t - lag(__t) OVER ({by}ORDER BY __t) <= {gap} THEN 0 ELSE 1 END AS __new"
        f" FROM (SELECT *, {_ts(window)} AS __t FROM {source} WHERE {_q(window.time_column)} IS NOT NULL)"
    )
    numbered = f"SELECT *, sum(__new) OVER ({by}ORDER BY __t ROWS UNBOUNDED PRECEDING) AS __sid FROM ({starts})"
    return (
        f"SELECT *, min(__t) OVER ({session}) AS __ws, max(__t) OVER ({session}) + {gap} AS __we"
        f" FROM ({numbered})"
    )


def streaming_window_sql(window: WindowRelation, input_view: str, keep_order: bool = False) -> str:
    """For Spark Structured Streaming: Spark's own window() column, which carries the
    watermark, so an aggregation grouped by it emits each window once the watermark
    passes its end (see group_by_window_struct). CUMULATE, which Spark lacks, assigns rows
    as in batch (streamsql's window operator aggregates them: spark.stateful.window_aggregate).
    ``keep_order``: as ``window_sql``'s."""
    if window.kind == "CUMULATE":  # one row per window, for streamsql's window operator
        return window_sql(window, input_view, keep_order)
    p = window.parameters
    columns = _input_columns(window, keep_order)
    if window.kind == "SESSION":
        # Flink merges sessions that touch (a row exactly GAP after the last joins it); Spark's
        # session_window only those that overlap: a GAP + 1 ms session, its end 1 ms earlier.
        struct = f"session_window({_q(window.time_column)}, '{p['GAP'] + 1} milliseconds')"
        return (
            f"SELECT {columns}, {STRUCT_COLUMN}, {STRUCT_COLUMN}.start AS window_start,"
            f" {STRUCT_COLUMN}.end - INTERVAL 1 MILLISECOND AS window_end,"
            f" {STRUCT_COLUMN}.end - INTERVAL 2 MILLISECOND AS window_time"
            f" FROM (SELECT *, {struct} AS {STRUCT_COLUMN} FROM {_q(input_view)})"
        )
    slide = p.get("SLIDE", p["SIZE"])
    offset = p.get("OFFSET", 0) % slide
    struct = (f"window({_q(window.time_column)}, '{p['SIZE']} milliseconds', '{slide} milliseconds',"
              f" '{offset} milliseconds')")
    return (
        f"SELECT {columns}, {STRUCT_COLUMN}, {STRUCT_COLUMN}.start AS window_start, {STRUCT_COLUMN}.end AS window_end,"
        f" {STRUCT_COLUMN}.end - INTERVAL 1 MILLISECOND AS window_time"
        f" FROM (SELECT *, {struct} AS {STRUCT_COLUMN} FROM {_q(input_view)})"
    )


STRUCT_COLUMN = "__window"


def group_by_window_struct(query, window_names: set[str], sessions: set[str] = frozenset()):
    """Rewrite `GROUP BY w.window_start, w.window_end` over a window relation into
    `GROUP BY w.__window` (and its bounds into fields of it), the form Spark streams.
    ``sessions``: the relations that are SESSION windows (their struct ends 1 ms late)."""
    from sqlglot import exp

    query = query.copy()
    for select in query.find_all(exp.Select):
        group = select.args.get("group")
        if not group:
            continue
        aliases = {t.alias_or_name for t in select.find_all(exp.Table) if t.name in window_names
                   and t.find_ancestor(exp.Select) is select}
        session_aliases = {t.alias_or_name for t in select.find_all(exp.Table) if t.name in sessions}
        for alias in aliases:
            keys = [e for e in group.expressions if isinstance(e, exp.Column) and e.table == alias
                    and e.name in ("window_start", "window_end", "window_time")]
            if not keys:
                continue
            for key in keys:
                key.pop()
            group.append("expressions", exp.column(STRUCT_COLUMN, alias))
            for column in list(select.find_all(exp.Column)):
                if column.table == alias and column.name in ("window_start", "window_end", "window_time"):
                    field = {"window_start": "start", "window_end": "end", "window_time": "end"}[column.name]
                    replacement = exp.Dot(this=exp.column(STRUCT_COLUMN, alias), expression=exp.to_identifier(field))
                    less = (column.name == "window_time") + (alias in session_aliases and column.name != "window_start")
                    if less:
                        replacement = exp.Sub(this=replacement, expression=exp.Interval(
                            this=exp.Literal.string(str(less)), unit=exp.var("MILLISECOND")))
                    column.replace(replacement)
    return query
