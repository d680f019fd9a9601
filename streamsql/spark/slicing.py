"""Pane-based slicing of HOP and CUMULATE aggregations (Flink's slicing window operator).

Assigning rows to windows copies each row into every window it belongs to (SIZE/SLIDE
copies for HOP). When the aggregates can be combined (COUNT, SUM, MIN, MAX), the rows
are first aggregated per pane (a SLIDE- or STEP-sized slice, which no window boundary
cuts), and only the pane results are copied into the windows and combined there:

    SELECT k, COUNT(*), window_start, window_end FROM TABLE(HOP(...)) GROUP BY k, window_start, window_end
    => panes:  SELECT k, COUNT(*) AS a0, pane FROM input GROUP BY k, pane      (one pass over the rows)
       then:   SELECT k, SUM(a0), window_start, window_end FROM panes x windows GROUP BY k, window_start, window_end

Other aggregations (DISTINCT, FILTER, AVG, HAVING, grouping sets) keep row assignment.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.windows import WindowRelation
from streamsql.spark.dialect import to_spark_sql

# Partial aggregate per pane -> how the partials combine per window.
COMBINE = {exp.Count: exp.Sum, exp.Sum: exp.Sum, exp.Min: exp.Min, exp.Max: exp.Max}
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")


def slice_window_aggregates(query: exp.Expression, windows: dict[str, WindowRelation], sources: dict[str, str],
                            register, prefix: str = "") -> exp.Expression:
    """``query`` with every sliceable window aggregation reading pre-aggregated panes.

    ``sources`` maps a window relation to the view of its (on-time) input rows;
    ``register(name, sql)`` creates a pane view (named from ``prefix``).
    """
    query = query.copy()
    for number, select in enumerate(list(query.find_all(exp.Select))):
        rewritten = _sliced(select, windows, sources, register, f"{prefix}__panes_{number}")
        if rewritten is not None:
            select.replace(rewritten)
    return query


def _sliced(select: exp.Select, windows, sources, register, view: str) -> exp.Select | None:
    table = (select.args.get("from_") or exp.From()).this
    if not isinstance(table, exp.Table) or table.name not in windows or select.args.get("joins"):
        return None
    window = windows[table.name]
    group = select.args.get("group")
    if window.kind not in ("HOP", "CUMULATE") or group is None or table.name not in sources:
        return None
    if any(select.args.get(k) for k in ("having", "distinct", "qualify")) or any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube")):
        return None
    alias = table.alias_or_name
    window_keys = {e.name for e in group.expressions if _is_window_column(e, alias)}
    if window_keys != {"window_start", "window_end"}:
        return None
    keys = [e for e in group.expressions if not _is_window_column(e, alias)]
    aggregates = [a for e in select.expressions for a in e.find_all(exp.AggFunc)]
    if not aggregates or any(type(a) not in COMBINE or isinstance(a.this, exp.Distinct) for a in aggregates):
        return None
    if any(select.find_all(exp.Filter, exp.Window)):
        return None

    rewritten = select.copy()
    replaced = {}
    for i, key in enumerate(keys):
        replaced[key] = exp.column(f"__k{i}", alias)
    for j, aggregate in enumerate(aggregates):
        replaced[aggregate] = COMBINE[type(aggregate)](this=exp.column(f"__a{j}", alias))
    expressions = [_replace(e, replaced) for e in rewritten.expressions]
    leftover = [c for e in expressions for c in e.find_all(exp.Column)
                if not (c.name.startswith(("__k", "__a")) or c.name in WINDOW_COLUMNS)]
    if leftover:
        return None  # a column outside the keys and aggregates: keep row assignment

    register(view, _panes_sql(window, sources[table.name], alias, keys, aggregates, select.args.get("where")))
    rewritten.set("expressions", expressions)
    rewritten.set("where", None)
    rewritten.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    rewritten.set("group", exp.Group(expressions=[
        *[exp.column(f"__k{i}", alias) for i in range(len(keys))],
        exp.column("window_start", alias), exp.column("window_end", alias),
    ]))
    return rewritten


def _is_window_column(node: exp.Expression, alias: str) -> bool:
    return isinstance(node, exp.Column) and node.table == alias and node.name in WINDOW_COLUMNS


def _replace(node: exp.Expression, replaced: dict) -> exp.Expression:
    def swap(current):
        for original, replacement in replaced.items():
            if current == original:
                return replacement.copy()
        return current

    return node.copy().transform(swap)


def _panes_sql(window: WindowRelation, source: str, alias: str, keys, aggregates, where) -> str:
    """Per key and pane: the partial aggregates, then one row per window holding the pane."""
    p = window.parameters
    ts = f"unix_millis(`{window.time_column}`)"
    unit = p["SLIDE"] if window.kind == "HOP" else p["STEP"]
    pane = f"({ts} - pmod({ts} - {p.get('OFFSET', 0)}, {unit}))"
    keys_sql = [to_spark_sql(k) for k in keys]
    partials = [f"{to_spark_sql(a)} AS __a{j}" for j, a in enumerate(aggregates)]
    inner = (
        f"SELECT {', '.join([*(f'{k} AS __k{i}' for i, k in enumerate(keys_sql)), *partials, '__pane'])}"
        f" FROM (SELECT *, {pane} AS __pane FROM `{source}`) AS `{alias}`"
        + (f" WHERE {to_spark_sql(where.this)}" if where is not None else "")
        + f" GROUP BY {', '.join([*keys_sql, '__pane'])}"
    )
    if window.kind == "HOP":
        first = f"__pane - {(p['SIZE'] // p['SLIDE'] - 1) * p['SLIDE']}"
        windows = (f"SELECT *, __ws + {p['SIZE']} AS __we FROM ({inner})"
                   f" LATERAL VIEW explode(sequence({first}, __pane, {p['SLIDE']})) __hop AS __ws")
    else:
        base = f"(__pane - pmod(__pane - {p.get('OFFSET', 0)}, {p['SIZE']}))"
        first = f"((__pane - {base}) div {p['STEP']} + 1)"
        windows = (f"SELECT *, {base} AS __ws, {base} + __k * {p['STEP']} AS __we FROM ({inner})"
                   f" LATERAL VIEW explode(sequence({first}, {p['SIZE'] // p['STEP']})) __cumulate AS __k")
    return (f"SELECT *, timestamp_millis(__ws) AS window_start, timestamp_millis(__we) AS window_end,"
            f" timestamp_millis(__we - 1) AS window_time FROM ({windows})")
