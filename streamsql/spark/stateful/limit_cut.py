"""``ORDER BY .. LIMIT n`` (Flink's SortLimit) and ``LIMIT n`` (its Limit) over a stream, as
Flink's planner runs them: a Top-N of the whole input, one partition (Flink runs it on one
task). The SELECT is rewritten (no Spark here) into the Top-N shape streamsql's Rank
operator takes,

    SELECT <outputs> FROM (SELECT <outputs>, <hidden keys>, ROW_NUMBER() OVER (ORDER BY ..)
                           AS __rn FROM (<the SELECT without ORDER BY and LIMIT>) __sorted)
    WHERE __rn <= n

so the rows that drop out of the top n are retracted as better ones arrive. Without ORDER
BY every row ties, and ties go to the earlier row: the first n rows are emitted and never
changed (insert-only over insert-only input, as Flink's Limit). An ORDER BY key that is not
an output column is computed as a hidden column the outputs leave out.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.spark.stateful.stages import Unsupported, same_form
from streamsql.spark.stateful.over_cut import TEMPORAL_SORT

SORTED, RANKED, NUMBER, ORDERED = "__sorted", "__ranked", "__rn", "__ordered"


def sorted_by_time(compiler, select: exp.Select) -> exp.Select:
    """``ORDER BY`` a rowtime ascending without LIMIT (Flink's TemporalSort): each row waits
    until the watermark passes its time and leaves then, in time order (of equal times, in
    arrival order); a late row is dropped. That is the OVER operator with a frame of the
    current row alone, so the SELECT is rewritten into one whose OVER call is not output.
    Further ORDER BY keys order rows of equal time (as Flink sorts them); a key that is no
    output column is computed as a hidden one."""
    from streamsql.plan.operators import Sort

    order = select.args.get("order")
    node = compiler.builder.query(select)
    if not isinstance(node, Sort) or not node.temporal:
        raise Unsupported()
    base, names = _unordered(compiler, select, "order")
    keys = []
    for i, ordered in enumerate(order.expressions):
        name = _output_name(ordered.this, base, names)
        if name is None:  # computed as a hidden column the outputs leave out
            if base.args.get("distinct"):
                raise Unsupported()  # a hidden key would change what DISTINCT compares
            name = f"__o{i}"
            base.append("expressions", exp.alias_(ordered.this.copy(), name))
        keys.append(exp.Ordered(this=exp.column(name, SORTED), desc=ordered.args.get("desc"),
                                nulls_first=ordered.args.get("nulls_first")))
    frame = exp.WindowSpec(kind="ROWS", start="CURRENT ROW", end="CURRENT ROW")
    call = exp.Window(this=exp.Count(this=exp.Star()), order=exp.Order(expressions=keys), spec=frame, over="OVER")
    call.meta[TEMPORAL_SORT] = True  # its further ORDER BY keys order rows of equal time
    numbered = exp.select(*[exp.alias_(exp.column(n, SORTED), n) for n in names], exp.alias_(call, NUMBER)).from_(
        base.subquery(SORTED, copy=False))
    return exp.select(*[exp.alias_(exp.column(n, ORDERED), n) for n in names]).from_(
        numbered.subquery(ORDERED, copy=False))


def ranked_limit(compiler, select: exp.Select) -> exp.Select:
    """The Top-N form of a SELECT with LIMIT (see the module); refused: an OFFSET, a LIMIT
    that is not a positive integer literal."""
    limit = select.args.get("limit")
    value = limit.args.get("expression") or limit.this if limit is not None else None
    if select.args.get("offset") is not None or not (
            isinstance(value, exp.Literal) and value.name.isdigit() and int(value.name) > 0):
        raise Unsupported()
    order = select.args.get("order")
    base, names = _unordered(compiler, select, "order", "limit")
    keys, hidden = [], []
    for i, ordered in enumerate(order.expressions if order is not None else []):
        if ordered.args.get("nulls_first") is not None and bool(ordered.args["nulls_first"]) == bool(
                ordered.args.get("desc")):
            raise Unsupported()  # NULLs ordered otherwise than the Rank operator's (first ascending, last descending)
        name = _output_name(ordered.this, base, names)
        if name is None:
            if base.args.get("distinct"):
                raise Unsupported()  # a hidden key would change what DISTINCT compares
            name = f"__o{i}"
            base.append("expressions", exp.alias_(ordered.this.copy(), name))
            hidden.append(name)
        keys.append(exp.Ordered(this=exp.column(name, SORTED), desc=bool(ordered.args.get("desc")),
                                nulls_first=ordered.args.get("nulls_first")))
    number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=keys) if keys else None)
    ranked = exp.select(*[exp.column(n, SORTED) for n in names + hidden], exp.alias_(number, NUMBER)).from_(
        base.subquery(SORTED, copy=False))
    bound = exp.LTE(this=exp.column(NUMBER, RANKED), expression=exp.Literal.number(int(value.name)))
    return exp.select(*[exp.alias_(exp.column(n, RANKED), n) for n in names]).from_(
        ranked.subquery(RANKED, copy=False)).where(bound)


def _unordered(compiler, select: exp.Select, *clauses: str) -> tuple[exp.Select, list[str]]:
    """A copy of ``select`` without ``clauses``, and its output names, which the rewrite reads
    it by: refused when two are the same or one could clash with the rewrite's own."""
    base = select.copy()
    for clause in clauses:
        base.set(clause, None)
    names = [field.name for field in compiler.builder.select(base).fields]
    if len(set(names)) != len(names) or any(name.startswith("__") for name in names):
        raise Unsupported()
    return base, names


def _output_name(expression: exp.Expression, select: exp.Select, names: list[str]) -> str | None:
    """The output column an ORDER BY key is: one named so, one computed the same way, or
    one by its position (``ORDER BY 2``)."""
    if isinstance(expression, exp.Literal) and not expression.is_string and expression.name.isdigit():
        position = int(expression.name)
        if not 1 <= position <= len(names):
            raise Unsupported()
        return names[position - 1]
    if isinstance(expression, exp.Column) and expression.name in names and (
            not expression.table or not any(p.alias_or_name == expression.name and p.unalias() is not p
                                            for p in select.expressions)):
        return expression.name
    return next((p.alias_or_name for p in select.expressions
                 if p.alias_or_name in names and same_form(p.unalias()) == same_form(expression)), None)
