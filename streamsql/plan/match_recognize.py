"""MATCH_RECOGNIZE as a relation: checked at plan time, its output schema known.

`FROM t MATCH_RECOGNIZE (...) AS m` becomes a derived relation (`MatchRelation`, in
``plan.derived``) whose columns are Flink's: the PARTITION BY columns, then the MEASURES.
The rest of the query reads it like a table. Checked here, with positions: ORDER BY
starts with a time attribute, ascending; every variable of DEFINE, MEASURES and AFTER
MATCH SKIP is in the PATTERN; expressions are in the subset the matcher evaluates
(`plan.match_expressions`); what Flink does not support is refused naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from streamsql.dialect.flink import Flink
from streamsql.errors import Position, ValidationError
from streamsql.plan.match_expressions import Compiler, interval_value
from streamsql.plan.match_pattern import MatchSpec, parse_pattern
from streamsql.plan.objects import Column, identifier_position
from streamsql.plan.operators import Field, Operator
from streamsql.plan.positions import start_position


@dataclass
class MatchRelation:
    """A MATCH_RECOGNIZE over a table or view (``input_name``, its Spark name)."""

    name: str
    input_name: str
    spec: MatchSpec
    columns: list[Column]
    order_by: list[tuple[str, bool]]  # (column, ascending), the time attribute first
    integer_columns: list[str] = field(default_factory=list)  # input columns to keep integral
    sql: str = ""
    # The input table's watermark delay when the match orders by its watermarked rowtime:
    # rows the watermark has passed when they are read are late, and Flink's CEP drops them.
    late_delay_ms: int | None = None
    proctime: bool = False  # ORDER BY a processing-time attribute: arrival order


@dataclass(eq=False)
class MatchRecognize(Operator):
    """Flink's Match operator (CEP): buffers rows per partition key until the watermark
    passes them, then matches them in event-time order. Needs insert-only input."""

    relation: MatchRelation | None = None
    kind: ClassVar[str] = "Match"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def attributes(self):
        spec = self.relation.spec
        order = ", ".join(f"{c} {'ASC' if asc else 'DESC'}" for c, asc in self.relation.order_by)
        pattern = " ".join(str(t) for t in spec.terms)
        attributes = [("partitionBy", ", ".join(spec.partition_by)), ("orderBy", order),
                      ("measures", ", ".join(f"{sql} AS {name}" for name, sql in spec.measures)),
                      ("rowsPerMatch", "ONE ROW PER MATCH"), ("after", "SKIP " + " ".join(p for p in spec.skip if p)),
                      ("pattern", pattern)]
        if spec.within_ms is not None:
            attributes.append(("within", f"{spec.within_ms} ms"))
        attributes.append(("define", ", ".join(f"{v} AS {sql}" for v, sql in spec.define.items())))
        return attributes


def match_operator(relation: MatchRelation, source: Operator) -> MatchRecognize:
    fields = [Field(c.name, c.type, c.time_attribute) for c in relation.columns]
    return MatchRecognize(inputs=[source], fields=fields, relation=relation)


def match_relation(node: exp.MatchRecognize, name: str, input_name: str, columns: list[Column]) -> MatchRelation:
    """Check a MATCH_RECOGNIZE clause over an input with these columns; its relation."""
    by_name = {c.name: c for c in columns}
    if node.args.get("rows") is not None and node.args["rows"].name != "ONE ROW PER MATCH":
        raise ValidationError("MATCH_RECOGNIZE: ALL ROWS PER MATCH is not supported by Flink; use ONE ROW PER MATCH",
                              start_position(node))
    pattern_node = node.args.get("pattern")
    if pattern_node is None:
        raise ValidationError("MATCH_RECOGNIZE needs a PATTERN", start_position(node))
    start = Position(pattern_node.meta["line"], pattern_node.meta["col"]) if "line" in pattern_node.meta else None
    terms = parse_pattern(pattern_node.name, start)
    variables = [t.variable for t in terms]
    partition_by = _partition_by(node, by_name)
    order_by, time_column = _order_by(node, by_name)
    define = _define(node, variables, list(by_name), time_column.name)
    measures = _measures(node, variables, list(by_name), time_column.name)
    spec = MatchSpec(terms=terms, columns=list(by_name), define=define,
                     measures=[(alias, sql) for alias, sql, _ in measures], partition_by=partition_by,
                     time_column=time_column.name, skip=_skip(node, variables), within_ms=_within(node))
    output = [replace(by_name[p], time_attribute=None) for p in partition_by]
    output += [_measure_column(alias, expression, columns, time_column) for alias, _, expression in measures]
    names = [c.name for c in output]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationError(f"MATCH_RECOGNIZE: output column(s) {', '.join(duplicates)} appear twice"
                              " (PARTITION BY columns come first, then the MEASURES)", start_position(node))
    integers = [c.name for c in columns if c.type is not None and c.type.is_type(*exp.DataType.INTEGER_TYPES)]
    return MatchRelation(name, input_name, spec, output, order_by, integers, node.sql(dialect=Flink).strip(),
                         proctime=time_column.time_attribute == "proctime")


def _partition_by(node: exp.MatchRecognize, by_name: dict[str, Column]) -> list[str]:
    names = []
    for key in node.args.get("partition_by") or []:
        if not isinstance(key, exp.Column) or key.table:
            raise ValidationError("MATCH_RECOGNIZE: PARTITION BY takes columns of the input", start_position(key))
        if key.name not in by_name:
            raise ValidationError(f"MATCH_RECOGNIZE: PARTITION BY column '{key.name}' is not in the input",
                                  identifier_position(key))
        names.append(key.name)
    return names


def _order_by(node: exp.MatchRecognize, by_name: dict[str, Column]) -> tuple[list[tuple[str, bool]], Column]:
    order = node.args.get("order")
    keys = order.expressions if order is not None else []
    if not keys:
        raise ValidationError("MATCH_RECOGNIZE needs ORDER BY a time attribute (rowtime or proctime), ascending,"
                              " as its first key", start_position(node))
    result = []
    for ordered in keys:
        column = ordered.this
        if not isinstance(column, exp.Column) or column.name not in by_name:
            raise ValidationError(f"MATCH_RECOGNIZE: ORDER BY {column.sql()} is not a column of the input",
                                  start_position(column))
        result.append((column.name, not ordered.args.get("desc")))
    first = by_name[result[0][0]]
    if first.time_attribute is None or not result[0][1]:
        what = "is not a time attribute" if first.time_attribute is None else "is descending"
        raise ValidationError(
            f"MATCH_RECOGNIZE: the first ORDER BY key must be a time attribute (rowtime or proctime) in ascending"
            f" order; '{first.name}' {what}", identifier_position(keys[0].this))
    return result, first


def _define(node: exp.MatchRecognize, variables: list[str], columns: list[str], time_column: str) -> dict[str, str]:
    compiler = Compiler(columns, variables, "DEFINE", time_column)
    define = {}
    for item in node.args.get("define") or []:
        variable = item.alias
        if variable not in variables:
            raise ValidationError(f"DEFINE: '{variable}' is not a variable of the PATTERN ({', '.join(variables)})",
                                  identifier_position(item.args.get("alias")))
        if variable in define:
            raise ValidationError(f"DEFINE: '{variable}' is defined twice", identifier_position(item.args.get("alias")))
        compiler.compile(item.this)
        define[variable] = _sql(item.this)
    return define


def _measures(node, variables, columns, time_column) -> list[tuple[str, str, exp.Expression]]:
    compiler = Compiler(columns, variables, "MEASURES", time_column)
    measures = []
    for measure in node.args.get("measures") or []:
        expression = measure.this
        if not isinstance(expression, exp.Alias):
            raise ValidationError("MEASURES: every measure needs a name (expression AS name)", start_position(expression))
        compiler.compile(expression.this)
        measures.append((expression.alias, _sql(expression.this), expression.this))
    return measures


def _skip(node: exp.MatchRecognize, variables: list[str]) -> tuple[str, str | None]:
    after = node.args.get("after")
    if after is None:
        return ("TO NEXT ROW", None)  # Flink's default (Calcite's)
    words = after.name.split()[3:]  # past "AFTER MATCH SKIP"
    if words[:2] in (["TO", "FIRST"], ["TO", "LAST"]):
        variable = words[2]
        if variable not in variables:
            raise ValidationError(f"AFTER MATCH SKIP TO {words[1]} {variable}: '{variable}' is not a variable of the"
                                  f" PATTERN ({', '.join(variables)})", start_position(node))
        if words[1] == "FIRST" and variable == variables[0]:
            raise ValidationError(f"AFTER MATCH SKIP TO FIRST {variable} would start the next match where this one"
                                  " started (an endless loop); skip to a later variable", start_position(node))
        return (f"TO {words[1]}", variable)
    return (" ".join(words), None)


def _within(node: exp.MatchRecognize) -> int | None:
    within = node.args.get("within")
    if within is None:
        return None
    if not isinstance(within, exp.Interval):
        raise ValidationError("WITHIN takes an interval, e.g. WITHIN INTERVAL '1' HOUR", start_position(within))
    compiler = Compiler([], [], "WITHIN")
    return int(interval_value(within, compiler).total_seconds() * 1000)


def _measure_column(alias: str, expression: exp.Expression, columns: list[Column], time_column: Column) -> Column:
    """The measure's Flink type: the type of the value its navigation or aggregate returns."""
    proctime = exp.DataType.build("TIMESTAMP_LTZ(3)", dialect=Flink)
    for call in expression.find_all(exp.Anonymous):
        if call.name.upper() == "MATCH_ROWTIME" and time_column.time_attribute != "rowtime":
            raise ValidationError("MATCH_ROWTIME() needs ORDER BY an event-time attribute (rowtime); this"
                                  f" MATCH_RECOGNIZE orders by processing time ('{time_column.name}')",
                                  start_position(call) or start_position(expression))
    if isinstance(expression, exp.Anonymous) and expression.name.upper() == "MATCH_ROWTIME":
        return Column(alias, time_column.type, time_attribute="rowtime")
    if isinstance(expression, exp.Anonymous) and expression.name.upper() == "MATCH_PROCTIME":
        return Column(alias, proctime, time_attribute="proctime")
    types = {c.name: c.type for c in columns if c.type is not None}
    times = {"MATCH_ROWTIME": time_column.type, "MATCH_PROCTIME": proctime}
    value = expression.copy().transform(
        lambda n: exp.cast(exp.null(), times[n.name.upper()].copy())
        if isinstance(n, exp.Anonymous) and n.name.upper() in times else n)
    value = value.transform(_as_value)
    value = value.transform(lambda n: exp.cast(exp.null(), types[n.name].copy())
                            if isinstance(n, exp.Column) and n.name in types else n)
    typed = annotate_types(exp.select(value), dialect=Flink)
    return Column(alias, typed.selects[0].type)


def _as_value(node: exp.Expression) -> exp.Expression:
    """Navigation and aggregates replaced by an expression of the type they return."""
    if isinstance(node, (exp.First, exp.Last, exp.Sum, exp.Avg, exp.Min, exp.Max)):
        return node.this.copy()
    if isinstance(node, exp.Anonymous) and node.name.upper() == "PREV" and node.expressions:
        return node.expressions[0].copy()
    if isinstance(node, exp.Count):
        return exp.cast(exp.Literal.number(1), exp.DataType.build("BIGINT"))
    return node


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect=Flink)


def bind_match(planner, select: exp.Select, name: str, plan, replace_relation) -> None:
    """Plan `FROM t MATCH_RECOGNIZE (...) [AS m]` in ``select`` (t a table, a view or a
    subquery): the clause becomes the relation ``name`` (in plan.derived), which the FROM
    item now reads under alias m."""
    from streamsql.plan.steps import spark_name
    from streamsql.plan.windows import watermark_delay_ms

    node = select.args["match"]
    source = select.args.get("from_")
    item = source.this if source is not None else None
    if isinstance(item, exp.Subquery) and not select.args.get("joins"):
        (input_name, columns), obj = _subquery_input(planner, item, name, plan), None
    elif isinstance(item, exp.Table) and not select.args.get("joins") and isinstance(item.this, exp.Identifier):
        ctes = {cte.alias for cte in select.root().find_all(exp.CTE)}
        if item.name in ctes and not item.db:
            raise ValidationError(f"MATCH_RECOGNIZE reads a table, view or subquery; '{item.name}' is a WITH query:"
                                  " define a view and match over it", identifier_position(item))
        obj = planner._relation(item)
        columns = planner._input_columns(obj, plan, item)
        input_name = spark_name(obj.name)
    else:
        raise ValidationError("MATCH_RECOGNIZE reads one table, view or subquery (FROM t MATCH_RECOGNIZE (...));"
                              " for a join, define a view and match over it", start_position(node))
    relation = match_relation(node, name, input_name, columns)
    watermark = getattr(obj, "watermark", None)
    if watermark is not None and watermark.column == relation.spec.time_column:
        relation.late_delay_ms = watermark_delay_ms(obj)
    plan.derived[name] = relation
    alias = node.alias or item.alias_or_name or name
    node.pop()
    table = exp.Table(this=exp.to_identifier(name))
    item.replace(table)
    replace_relation(table, name, alias, relation.columns)


def _subquery_input(planner, subquery: exp.Subquery, name: str, plan) -> tuple[str, list[Column]]:
    """A subquery as the match's input: planned on its own (its columns keep their time
    attributes), registered like a view under ``<name>_input``."""
    inner = planner.plan_query(subquery.this)
    for table in inner.tables:
        if all(table is not t for t in plan.tables):
            plan.tables.append(table)
    for function in inner.functions:
        if all(function is not f for f in plan.functions):
            plan.functions.append(function)
    plan.derived.update(inner.derived)
    input_name = f"{name}_input"
    plan.derived[input_name] = inner.query
    return input_name, inner.columns
