"""Planning windows: legacy group windows become TVFs, TVFs become window relations.

A window TVF is planned as a relation of its own (its input's columns plus
window_start, window_end, window_time) that the Spark translation computes, so the
query around it is ordinary SQL over a derived table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from streamsql.dialect.flink import Flink
from streamsql.dialect.windows import GroupWindow, GroupWindowProperty, TableArgument, WindowTVF, group_window_parameters
from streamsql.errors import ValidationError
from streamsql.plan.objects import Column, TableDef, identifier_position
from streamsql.plan.positions import start_position
from streamsql.plan.types import build_type

_UNIT_MS = {
    "MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000,
}
_PROPERTY_COLUMNS = {"START": "window_start", "END": "window_end", "ROWTIME": "window_time", "PROCTIME": "window_time"}


@dataclass
class WindowRelation:
    """One window TVF application: how to assign each input row to its windows."""

    name: str
    kind: str
    input_name: str
    input_columns: list[Column]
    time_column: str
    parameters: dict[str, int]  # SIZE/SLIDE/STEP/GAP/OFFSET in milliseconds
    partition_by: list[str] = field(default_factory=list)
    proctime: bool = False
    late_source: TableDef | None = None  # set when late rows of this table can be told apart
    late_table: TableDef | None = None  # where late rows go ('late-rows.table' on the source)

    @property
    def columns(self) -> list[Column]:
        time_type = next(c.type for c in self.input_columns if c.name == self.time_column)
        bound = build_type("TIMESTAMP(3)")
        window_time = Column("window_time", time_type.copy(), time_attribute=None if self.proctime else "rowtime")
        return [*self.input_columns, Column("window_start", bound), Column("window_end", bound.copy()), window_time]


def interval_ms(node: exp.Expression, what: str) -> int:
    """An INTERVAL literal in milliseconds; anything else is an error naming the parameter."""
    if isinstance(node, exp.Interval) and isinstance(node.this, exp.Literal):
        unit = (node.args.get("unit").name if node.args.get("unit") else "SECOND").upper().rstrip("S")
        if unit in _UNIT_MS:
            try:
                return int(float(node.this.name) * _UNIT_MS[unit])
            except ValueError:
                pass
    raise ValidationError(f"{what} must be an interval literal such as INTERVAL '10' SECOND, not {node.sql()}")


def window_parameters(tvf: WindowTVF) -> dict[str, int]:
    from streamsql.dialect.windows import TVF_PARAMETERS

    values = {name: interval_ms(tvf.parameter(name), f"{tvf.kind} {name}") for name in TVF_PARAMETERS[tvf.kind]
              if tvf.parameter(name) is not None}
    for name, value in values.items():
        if name != "OFFSET" and value <= 0:
            raise ValidationError(f"{tvf.kind} {name} must be positive")
    if tvf.kind in ("HOP", "CUMULATE"):
        unit = "SLIDE" if tvf.kind == "HOP" else "STEP"
        if values["SIZE"] % values[unit]:
            raise ValidationError(f"{tvf.kind} SIZE must be an integral multiple of {unit}")
    return values


def rewrite_group_windows(query: exp.Expression) -> None:
    """`GROUP BY k, TUMBLE(ts, size)` over one relation becomes a TUMBLE TVF over it,
    grouped by window_start and window_end; TUMBLE_START(...) becomes window_start."""
    for select in list(query.find_all(exp.Select)):
        group = select.args.get("group")
        windows = [e for e in (group.expressions if group else []) if isinstance(e, GroupWindow)]
        if not windows:
            _check_no_stray_properties(select)
            continue
        if len(windows) > 1:
            raise ValidationError("A GROUP BY can have only one group window")
        _rewrite_one(select, windows[0])


def _rewrite_one(select: exp.Select, window: GroupWindow) -> None:
    source = select.args["from_"].this
    if select.args.get("joins") or not isinstance(source, exp.Table):
        raise ValidationError(f"GROUP BY {window.kind}(...) needs a single table or view in FROM")
    time_column = window.args["time_column"]
    if not isinstance(time_column, exp.Column):
        raise ValidationError(f"{window.kind}: the time attribute must be a column, not {time_column.sql()}")
    keys = [e for e in select.args["group"].expressions if e is not window]
    alias = source.alias_or_name
    if time_column.table and time_column.table != alias:  # (the TVF takes the column by its name alone)
        raise ValidationError(f"Column '{time_column.name}' could not be resolved for table: '{time_column.table}'",
                              start_position(time_column))
    parameters = {name.lower(): value.copy() for name, value in group_window_parameters(window).items()}
    table_argument = TableArgument(
        this=exp.Table(this=source.this.copy(), db=source.args.get("db")),
        partition_by=[exp.column(k.name) for k in keys if isinstance(k, exp.Column)] if window.kind == "SESSION" else None,
    )
    tvf = WindowTVF(this=exp.var(window.kind), table=table_argument, time_column=exp.column(time_column.name), **parameters)
    wrapper = exp.Table(this=exp.Anonymous(this="TABLE", expressions=[tvf]), alias=exp.TableAlias(this=exp.to_identifier(alias)))
    source.replace(wrapper)
    select.args["group"].set("expressions", keys + [exp.column("window_start", alias), exp.column("window_end", alias)])
    for prop in list(select.find_all(GroupWindowProperty)):
        if prop.this.name != window.kind or not _same_window(prop, window, alias):
            name = f"{prop.this.name}_{prop.args['property'].name}"
            raise ValidationError(f"{name}(...) does not match the GROUP BY's {window.sql(dialect=Flink)}: it takes"
                                  " the same time attribute and intervals", identifier_position(prop.args["time_column"]))
        prop.replace(exp.column(_PROPERTY_COLUMNS[prop.args["property"].name], alias))


def _same_window(prop: GroupWindowProperty, window: GroupWindow, alias: str) -> bool:
    """Whether TUMBLE_START(ts, ...) names the GROUP BY's window: its time column (of the
    same table) and its parameters, as Flink's validator matches them."""
    column, time_column = prop.args["time_column"], window.args["time_column"]
    if not isinstance(column, exp.Column) or column.name != time_column.name:
        return False
    if column.table and column.table not in (alias, time_column.table):
        return False
    mine, theirs = prop.args["parameters"].expressions, window.args["parameters"].expressions
    return len(mine) == len(theirs) and all(
        _interval_or_sql(a) == _interval_or_sql(b) for a, b in zip(mine, theirs))


def _interval_or_sql(node: exp.Expression):
    try:
        return interval_ms(node, "")
    except ValidationError:
        return node.sql()


def _check_no_stray_properties(select: exp.Select) -> None:
    for prop in select.find_all(GroupWindowProperty):
        if prop.find_ancestor(exp.Select) is select:
            raise ValidationError(f"{prop.sql()} needs a {prop.this.name}(...) group window in the GROUP BY")


def tvf_of(table: exp.Table) -> WindowTVF | None:
    """The TVF inside `TABLE(KIND(...))` in a FROM clause, if that is what this is."""
    inner = table.this
    if isinstance(inner, exp.Anonymous) and inner.name.upper() == "TABLE" and inner.expressions:
        if isinstance(inner.expressions[0], WindowTVF):
            return inner.expressions[0]
    if isinstance(inner, WindowTVF):
        return inner
    return None


def check_time_attribute(tvf: WindowTVF, columns: list[Column]) -> Column:
    """The DESCRIPTOR column must be a time attribute of the TVF's input."""
    name = tvf.args["time_column"].name
    column = next((c for c in columns if c.name == name), None)
    position = identifier_position(tvf.args["time_column"])
    if column is None:
        raise ValidationError(f"{tvf.kind}: column '{name}' does not exist in the input", position)
    if column.time_attribute is None:
        raise ValidationError(
            f"{tvf.kind}: column '{name}' is not a time attribute; use a column with a WATERMARK"
            " (event time) or a PROCTIME() column (processing time)",
            position,
        )
    return column


def watermark_delay_ms(table: TableDef) -> int:
    """`ts - INTERVAL 'n' UNIT` is a bounded out-of-orderness of n units; `ts` alone is 0."""
    expression = table.watermark.expression
    if isinstance(expression, exp.Column):
        return 0
    if isinstance(expression, exp.Sub) and isinstance(expression.expression, exp.Interval):
        return interval_ms(expression.expression, f"the WATERMARK delay of table '{table.name.name}'")
    raise ValidationError(
        f"Table '{table.name.name}': WATERMARK expression must be `{table.watermark.column}` or"
        f" `{table.watermark.column} - INTERVAL ...`"
    )
