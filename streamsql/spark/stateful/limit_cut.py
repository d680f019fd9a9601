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

from streamsql.spark.stateful.chain import _same, _Unsupported

SORTED, RANKED, NUMBER = "__sorted", "__ranked", "__rn"


def ranked_limit(compiler, select: exp.Select) -> exp.Select:
    """The Top-N form of a SELECT with LIMIT (see the module); refused: an OFFSET, a LIMIT
    that is not a positive integer literal."""
    limit = select.args.get("limit")
    value = limit.args.get("expression") or limit.this if limit is not None else None
    if select.args.get("offset") is not None or not (
            isinstance(value, exp.Literal) and value.name.isdigit() and int(value.name) > 0):
        raise _Unsupported()
    base = select.copy()
    order = base.args.get("order")
    for arg in ("order", "limit"):
        base.set(arg, None)
    names = [field.name for field in compiler.builder.select(base).fields]
    if len(set(names)) != len(names) or any(name.startswith("__") for name in names):
        raise _Unsupported()
    keys, hidden = [], []
    for i, ordered in enumerate(order.expressions if order is not None else []):
        name = _output_name(ordered.this, base, names)
        if name is None:
            if base.args.get("distinct"):
                raise _Unsupported()  # a hidden key would change what DISTINCT compares
            name = f"__o{i}"
            base.append("expressions", exp.alias_(ordered.this.copy(), name))
            hidden.append(name)
        keys.append(exp.Ordered(this=exp.column(name, SORTED), desc=bool(ordered.args.get("desc")),
                                nulls_first=ordered.args.get("nulls_first")))
    number = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=keys) if keys else None)
    ranked = exp.select(*[exp.column(n, SORTED) for n in names + hidden], exp.alias_(number, NUMBER)).from_(
        exp.Subquery(this=base, alias=exp.TableAlias(this=exp.to_identifier(SORTED))))
    bound = exp.LTE(this=exp.column(NUMBER, RANKED), expression=exp.Literal.number(int(value.name)))
    return exp.select(*[exp.alias_(exp.column(n, RANKED), n) for n in names]).from_(
        exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier(RANKED)))).where(bound)


def _output_name(expression: exp.Expression, select: exp.Select, names: list[str]) -> str | None:
    """The output column an ORDER BY key is: one named so, or one computed the same way."""
    if isinstance(expression, exp.Column) and expression.name in names and (
            not expression.table or not any(p.alias_or_name == expression.name and p.unalias() is not p
                                            for p in select.expressions)):
        return expression.name
    return next((p.alias_or_name for p in select.expressions
                 if p.alias_or_name in names and _same(p.unalias()) == _same(expression)), None)
