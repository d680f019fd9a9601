"""Cutting a window aggregate out of a query (spark.stateful.chain).

``SELECT .. FROM <window relation> w WHERE .. GROUP BY w.window_start, w.window_end, ..``
— a window TVF's rows grouped by their window — becomes a ``WindowAggregateStage``: the
GROUP BY split as a GroupAggregate's (``split``), its input reading the window relation
(one row per window a row belongs to) plus the row's event time, and the window operator
(``window_aggregate``). Inside a chain every window aggregate runs there, TUMBLE and HOP
too, so a stateful operator can read its rows. A window Top-N or deduplication over a
TVF's rows reads them with their window's end (``window_rows_end``) for the window rank
operator (``window_rank``); any other use of a window relation in a chain (a window join,
a bare TVF) is not cut yet.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.windows import WindowRelation
from streamsql.spark.physical import OPERATOR_WINDOWS
from streamsql.spark.stateful.stages import (
    CalcStage, OverStage, WindowAggregateStage, has_subquery, Unsupported, epoch_millis, read_stage, stage_view,
)
from streamsql.spark.stateful.specs import INSERT_ONLY, ORDERED, SPREADS
from streamsql.spark.stateful.split import split_group_aggregate

KINDS = OPERATOR_WINDOWS
EVENT_TIME = "__event_ms"


def window_tables(compiler, select: exp.Select) -> list[tuple[exp.Table, WindowRelation]]:
    """The window relations this SELECT reads itself (in its FROM or JOINs)."""
    found = []
    for item in [select.args.get("from_")] + list(select.args.get("joins") or []):
        if item is None or not isinstance(item.this, exp.Table) or item.this.db:
            continue
        relation = compiler.plan.derived.get(item.this.name)
        if isinstance(relation, WindowRelation):
            found.append((item.this, relation))
    return found


def _one_window(compiler, select: exp.Select, proctime: bool = False) -> tuple[exp.Table, WindowRelation]:
    """The one window relation a SELECT reads, alone (no join), of a kind the window
    operators take; anything else is refused. A processing-time window only where
    ``proctime`` says the operator takes one, over unbounded input (bounded input ends before
    the clock passes its last window: it is computed as one batch instead)."""
    tables = window_tables(compiler, select)
    if len(tables) != 1 or select.args.get("joins"):
        raise Unsupported()
    table, window = tables[0]
    if window.kind not in KINDS or (window.proctime and not (proctime and _unbounded(compiler))):
        raise Unsupported()
    return table, window


def _unbounded(compiler) -> bool:
    return not all(compiler.bounded(t) for t in compiler.plan.tables)


def cut_window_aggregate(compiler, select: exp.Select) -> WindowAggregateStage:
    """The stage of a window aggregate; anything else reading a window relation is refused."""
    if not select.args.get("group"):
        raise Unsupported()
    table, window = _one_window(compiler, select, proctime=True)
    alias = table.alias_or_name
    split = split_group_aggregate(select)
    if split is None:
        raise Unsupported()
    _check_python_calls(split, window.kind)
    bounds = {}
    for name, key in zip(split.keys, select.args["group"].expressions):
        if isinstance(key, exp.Column) and key.table in ("", alias) and key.name in ("window_start", "window_end"):
            bounds.setdefault(key.name, name)
    if set(bounds) != {"window_start", "window_end"}:
        raise Unsupported()  # Flink groups a window aggregate by both bounds
    time = epoch_millis(exp.column(window.time_column, alias))
    split.input_query.set("expressions", [*split.input_query.expressions, exp.alias_(time, EVENT_TIME)])
    stage = WindowAggregateStage(split=split, kind=window.kind, parameters=dict(window.parameters),
                                 start_key=bounds["window_start"], end_key=bounds["window_end"], time=EVENT_TIME,
                                 proctime=window.proctime)
    _slice(stage, window, alias)
    _cascade(compiler, stage, window)
    if stage.cascaded and any(c.function in INSERT_ONLY for c in split.calls):
        raise Unsupported()  # (the rows another window operator fires in one micro-batch come in no order)
    return stage


def _cascade(compiler, stage: WindowAggregateStage, window: WindowRelation) -> None:
    """A window over the rows of another window aggregate (its ``window_time``: Flink's
    cascading windows) reads that aggregate's stage; Spark assigns the windows over it.
    Those rows come as the watermark fires their windows, each at its window's last
    instant, so none is late, and a window they complete fires in the same micro-batch."""
    body = compiler.view_body(exp.Table(this=exp.to_identifier(window.input_name)))
    below = None if body is None else compiler.query(body)
    if below is None:
        return  # Spark streams the window's input natively
    if window.proctime or not _fired_by_watermark(below):
        raise Unsupported()  # a window over a changelog, or over rows of no event time
    view = stage_view()
    stage.inputs.append((view, below))
    stage.cascaded = True
    read, reading = window.input_name, view  # the sliced operator reads the window's input rows themselves
    if not stage.bounds:  # else Spark assigns the windows over the stage's rows
        read, reading = window.name, f"{window.name}_over{view}"
        stage.window_views.append((reading, window, view))
    for table in list(stage.split.input_query.find_all(exp.Table)):
        if table.name == read and not table.db:
            read_stage(table, reading)


def attached_bounds(compiler, select: exp.Select) -> tuple[int, int] | None:
    """For a GROUP BY of another window aggregate's rows by both their window bounds (Flink's
    window-attached aggregate, Nexmark q5's ``GROUP BY starttime, endtime``): the positions of
    the window_start and window_end keys among the GROUP BY's; else None. A window TVF's own
    rows are ``cut_window_aggregate``'s."""
    from streamsql.plan.logical_from import window_of
    from streamsql.plan.logical_from import from_clause

    group = select.args.get("group")
    if group is None or select.args.get("joins") or window_tables(compiler, select):
        return None
    try:
        _, scope, _ = from_clause(compiler.builder, select)
    except Exception:  # a shape the builder does not know: not this one
        return None
    keys = list(group.expressions)
    spec = window_of(keys, scope)
    if spec is None:
        return None
    roles = {}
    for i, key in enumerate(keys):
        field = scope.lookup(key)
        if field is not None and field.window is not None and field.window.spec == spec:
            roles.setdefault(field.window.role, i)
    return roles["start"], roles["end"]


def _check_python_calls(split, kind: str) -> None:
    """A Python aggregate function in a HOP or CUMULATE window (its slices' accumulators
    merged): one that defines ``merge``, as Flink asks."""
    for call in split.calls:
        if call.python is not None and kind != "TUMBLE" and not call.python.merges:
            raise Unsupported(f"Function {call.python.name} is used in a {kind} window, whose windows share slices:"
                              " its AggregateFunction must define merge(accumulator, accumulators)")


def cut_attached_window(inputs: list, changelogs: list, split, bounds: tuple[int, int]):
    """The stage of a window-attached aggregate (``attached_bounds``): the rows below, each in
    its one window already, grouped by the window's bounds and the other keys on the window
    operator, which fires a window as the watermark passes its end. The rows come from a
    window operator that fired them as the watermark passed their window (so none is late);
    a window the last of them completes fires in the same micro-batch, insert-only. None for
    other rows (a GroupAggregate then updates each window's row as its rows come)."""
    if len(inputs) != 1 or len(changelogs) != 1 or not _fired_by_watermark(inputs[0][1]) \
            or any(c.function in ORDERED for c in split.calls):
        return None  # (the order of rows a window operator fired in one micro-batch is no order)
    start, end = (split.keys[i] for i in bounds)
    # each row is in one window, as a TUMBLE window's rows are: its slice ends with the window
    return WindowAggregateStage(inputs=inputs, split=split, kind="TUMBLE", start_key=start, end_key=end,
                                cascaded=True)


def _fired_by_watermark(stage) -> bool:
    """Whether a stage's rows leave their operator as the watermark passes their event time
    (through projections and filters): a window aggregate's at their window's end, an OVER
    aggregate's (ordered by event time) at their own time. None is then late downstream."""
    if isinstance(stage, WindowAggregateStage):
        return not stage.proctime
    if isinstance(stage, OverStage):
        return stage.rowtime
    return (isinstance(stage, CalcStage) and len(stage.inputs) == 1
            and _fired_by_watermark(stage.inputs[0][1]))


def window_rows_end(compiler, select: exp.Select) -> exp.Alias:
    """For a window Top-N or deduplication reading a window TVF's rows (its SELECT's only
    FROM item, partitioned by both window bounds): the projection of the window's end in
    epoch ms, which the window rank operator fires by (``window_rank``)."""
    where = select.args.get("where")
    if where is not None and has_subquery(where):
        raise Unsupported()
    source = select.args["from_"].this if select.args.get("from_") else None
    if isinstance(source, exp.Subquery) and not select.args.get("joins"):  # the TVF's rows through a subquery
        if not (compiler._window_rows(source.this) and _keeps_window_end(source.this)):
            raise Unsupported()
        alias = source.alias_or_name
    else:
        alias = _one_window(compiler, select)[0].alias_or_name
    over = next(select.find_all(exp.Window))
    bounds = {p.name for p in over.args.get("partition_by") or []
              if isinstance(p, exp.Column) and p.table in ("", alias) and p.name in ("window_start", "window_end")}
    if bounds != {"window_start", "window_end"}:
        raise Unsupported()  # Flink's window Top-N partitions by both bounds
    return exp.alias_(epoch_millis(exp.column("window_end", alias)), WINDOW_END)


WINDOW_END = "__wend_ms"


def _keeps_window_end(body: exp.Select) -> bool:
    """Whether a subquery's ``window_end`` is its window TVF's, through every level."""
    projected = next((p for p in body.expressions if p.alias_or_name == "window_end"), None)
    if projected is None or not isinstance(projected.unalias(), exp.Column) or projected.unalias().name != "window_end":
        return False
    source = body.args["from_"].this
    return _keeps_window_end(source.this) if isinstance(source, exp.Subquery) else True


def _slice(stage: WindowAggregateStage, window: WindowRelation, alias: str) -> None:
    """Read the window's input rows instead of its windows' when the query reads window
    columns only as grouping keys: the operator then folds each row into one slice."""
    from streamsql.spark.stateful.window_slices import sliceable

    if not sliceable({"kind": window.kind, **window.parameters}) or \
            any(c.function in (*SPREADS, *ORDERED) for c in stage.split.calls):
        # (a STDDEV/VAR's centred sums do not add up across slices of different centres; the
        # value and list aggregates take a window's rows in arrival order, which slices lose)
        return
    query = stage.split.input_query
    bounds, kept = {}, []
    for projection in query.expressions:
        column = projection.unalias()
        if isinstance(column, exp.Column) and column.table in ("", alias) and column.name in _BOUNDS:
            bounds[projection.alias_or_name] = _BOUNDS[column.name]
        else:
            kept.append(projection)
    sliced = query.copy()
    sliced.set("expressions", kept)
    if any(c.name in _BOUNDS and c.table in ("", alias) for c in sliced.find_all(exp.Column)):
        return  # a window column in WHERE, an argument or an expression: the window relation's rows
    (table,) = [t for t in sliced.find_all(exp.Table) if t.name == window.name]
    table.set("this", exp.to_identifier(window.input_name))
    stage.split.input_query, stage.bounds = sliced, bounds


_BOUNDS = {"window_start": "start", "window_end": "end", "window_time": "time"}
