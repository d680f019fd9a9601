"""Scalar aggregate subqueries as joins (no Spark here), so they stream on streamsql's join
operator as Flink's planner decorrelates them: a SELECT whose WHERE or select list holds

    (SELECT AVG(b.price) FROM bid b WHERE b.auction = a.id AND b.price > 0)

reads the subquery grouped by the inner sides of its correlated equalities instead,

    LEFT JOIN (SELECT b.auction AS __e0, AVG(b.price) AS __v FROM bid b WHERE b.price > 0
               GROUP BY b.auction) __sq1 ON a.id = __sq1.__e0

and the subquery becomes ``__sq1.__v``: a group aggregate (a changelog) joined with the
outer rows, so the outer row's value is retracted and re-emitted as its group changes. An
outer row without a group reads NULL, as the scalar subquery over no rows is, except for a
COUNT, whose value over no rows is 0 (``COALESCE(__v, 0)``). When every use compares the
value in a WHERE conjunct, a row without a group is filtered anyway and the join is an
inner one, as Flink's. Uncorrelated, the subquery is one group, joined with every row on a
constant key (one bucket, as Flink runs such a join on one task).

Several scalar subqueries in a SELECT are taken one at a time, each a join of its own.
Shapes not rewritten (the query is then refused over unbounded input): a correlation
other than equalities, a subquery with GROUP BY,
HAVING, DISTINCT, ORDER BY or LIMIT, or one whose value over no rows is neither NULL nor a
bare COUNT's 0 (``COUNT(*) + 1``, ``COALESCE(SUM(x), 0)``).
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.plan.logical_from import conjuncts
from streamsql.spark.stateful.semi_cut import SUBQUERY, SemiJoin, _reads

VALUE = "__v"  # the subquery's value, a column of the joined subquery
_NAMES = itertools.count(1)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def scalar_join(select: exp.Select, names_of=None) -> SemiJoin | None:
    """Rewrite ``select`` in place: its one scalar aggregate subquery as a join of its
    single FROM item with the subquery grouped by its correlation. None, untouched, when
    there is none or the shape is one this does not rewrite. With several, and
    ``names_of`` (a FROM item's column names), they are taken one at a time (``_nested``)."""
    if select.args.get("joins") or select.args.get("from_") is None:
        return None
    found = [s for s in _own_subqueries(select)]
    if len(found) > 1 and names_of is not None:
        return _nested(select, found[0], names_of)
    if len(found) != 1 or not isinstance(found[0].this, exp.Select):
        return None
    subquery = found[0]
    body = subquery.this.copy()
    if len(body.expressions) != 1 or any(body.args.get(k) for k in (
            "group", "having", "order", "limit", "offset", "qualify", "distinct", "with_")):
        return None
    value = body.expressions[0].unalias()
    if not any(isinstance(n, exp.AggFunc) for n in value.walk()):
        return None  # a subquery of one row per outer row, not an aggregate: not a join
    bare_count = isinstance(value, exp.Count)
    if not bare_count and not _null_over_no_rows(value):
        return None  # its value over no rows is not NULL (COUNT + 1, COALESCE(SUM(..), 0)): not the join's NULL
    outer = {select.args["from_"].this.alias_or_name}
    inner = {body.args["from_"].this.alias_or_name} if body.args.get("from_") else set()
    inner |= {j.this.alias_or_name for j in body.args.get("joins") or []}
    outer -= inner  # an inner name hides the outer one
    keys, kept = [], []
    for condition in conjuncts(body.args.get("where")):
        if not _reads(condition, outer):
            kept.append(condition)
            continue
        pair = _correlation(condition, outer, inner)
        if pair is None:
            return None  # correlated beyond equalities
        keys.append(pair)
    if any(_reads(p, outer) for p in body.expressions) or any(_reads(j, outer) for j in body.args.get("joins") or []):
        return None
    alias = f"{SUBQUERY}{next(_NAMES)}"
    if keys:
        projected = [exp.alias_(inner_side.copy(), f"__e{i}") for i, (_, inner_side) in enumerate(keys)]
        on = [exp.EQ(this=outer_side.copy(), expression=exp.column(f"__e{i}", alias))
              for i, (outer_side, _) in enumerate(keys)]
        body.set("group", exp.Group(expressions=[inner_side.copy() for _, inner_side in keys]))
    else:  # one group, joined with every row on a constant
        projected = [exp.alias_(exp.Literal.number(0), "__e0")]
        on = [exp.EQ(this=exp.Literal.number(0), expression=exp.column("__e0", alias))]
    body.set("expressions", projected + [exp.alias_(value.copy(), VALUE)])
    body.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    column = exp.column(VALUE, alias)
    inner_join = not bare_count and _compared_in_where(select, subquery)
    subquery.replace(exp.func("COALESCE", column, exp.Literal.number(0)) if bare_count else column)
    select.set("joins", [exp.Join(this=body.subquery(alias, copy=False), on=exp.and_(*on),
                                  side=None if inner_join else "LEFT")])
    return SemiJoin("InnerJoin" if inner_join else "LeftOuterJoin")


def _nested(select: exp.Select, first: exp.Subquery, names_of) -> SemiJoin | None:
    """Several scalar subqueries: the first one's value becomes a column of the FROM item,
    read through a derived table of the same name, ``(SELECT b.*, (<first>) AS __s<n> FROM
    b) AS b``, which its own stage joins; the rest are rewritten over that (each level one
    join, as Flink's decorrelation chains one join per subquery)."""
    candidate = select.copy()
    first = next(s for s in _own_subqueries(candidate) if s == first)
    item = candidate.args["from_"].this
    columns = names_of(item)
    if not columns:
        return None
    alias, value = item.alias_or_name, f"__s{next(_NAMES)}"
    inner = exp.select(*[exp.alias_(exp.column(c, alias), c) for c in columns],
                       exp.Alias(this=first.copy(), alias=exp.to_identifier(value))).from_(item.copy())
    if scalar_join(inner.copy()) is None:
        return None
    first.replace(exp.column(value, alias))
    candidate.set("from_", exp.From(this=inner.subquery(alias, copy=False)))
    join = scalar_join(candidate, names_of)
    if join is not None:
        for key, part in candidate.args.items():
            select.set(key, part)
    return join


_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Paren, exp.Cast, exp.Literal, exp.DataType)


def _null_over_no_rows(value: exp.Expression) -> bool:
    """Whether a subquery's value is NULL when it aggregates no rows: aggregates other than
    COUNT, combined by operators that are NULL when an operand is (arithmetic, CAST)."""
    if isinstance(value, exp.AggFunc):
        return not isinstance(value, exp.Count)
    return isinstance(value, _STRICT) and all(_null_over_no_rows(child) for child in value.iter_expressions()
                                              if not isinstance(child, (exp.Literal, exp.DataType)))


def _own_subqueries(select: exp.Select) -> list[exp.Subquery]:
    """The scalar subqueries of this SELECT's select list and WHERE (not its FROM items, not
    an IN's or EXISTS' query, not those of nested SELECTs)."""
    found = []
    for part in list(select.expressions) + [select.args.get("where")]:
        if part is None:
            continue
        for node in part.walk():
            if isinstance(node, exp.Subquery) and node.find_ancestor(exp.Select) is select \
                    and not isinstance(node.parent, (exp.In, exp.Exists)):
                found.append(node)
    return found


def _correlation(condition: exp.Expression, outer: set[str], inner: set[str]):
    """(outer expression, inner expression) of an equality between the outer row and the
    subquery's own columns, else None."""
    if not isinstance(condition, exp.EQ):
        return None
    sides = []
    for side in (condition.this, condition.expression):
        tables = {c.table for c in side.find_all(exp.Column)}
        sides.append("outer" if tables and tables <= outer else "inner" if tables and tables <= inner else None)
    if sides == ["outer", "inner"]:
        return condition.this, condition.expression
    if sides == ["inner", "outer"]:
        return condition.expression, condition.this
    return None


def _compared_in_where(select: exp.Select, subquery: exp.Subquery) -> bool:
    """Whether the subquery's only use is inside a comparison that is a conjunct of WHERE,
    reached through arithmetic: a NULL value then filters the row out."""
    where = select.args.get("where")
    if where is None or not subquery.find_ancestor(exp.Where) is where:
        return False
    node = subquery
    while isinstance(node.parent, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Paren, exp.Neg)):
        node = node.parent
    comparison = node.parent
    return isinstance(comparison, _COMPARISONS) and any(c is comparison for c in conjuncts(where))
