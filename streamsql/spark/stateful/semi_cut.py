"""IN and EXISTS subqueries as semi and anti joins (no Spark here), so they stream on
streamsql's join operator as Flink's planner runs them: a WHERE conjunct

    a.k IN (SELECT b.x FROM b WHERE ...)          LeftSemiJoin on a.k = b.x
    EXISTS (SELECT .. FROM b WHERE b.k = a.k ..)  LeftSemiJoin on a.k = b.k
    NOT EXISTS (...)                              LeftAntiJoin

becomes a join of the SELECT's FROM item with the subquery, decorrelated: each condition of
the subquery's WHERE that reads the outer row moves into the join's ON (the subquery
projects the inner columns it needs as ``__e<i>``), the others stay in the subquery.
``join_cut.cut_join`` then cuts it like any join. ``a.k NOT IN (SELECT b.x FROM b ..)``
is Flink's NULL-aware anti join: a NULL on either side makes the condition UNKNOWN (the
row is not emitted) unless the subquery is empty, so the rows of ``b`` are all the join's
partners of a row whose ``k`` is NULL, and a ``b`` row whose ``x`` is NULL is everyone's
partner; uncorrelated, Flink runs it with no keys, on one task, and so does the join
operator (``null_aware``: one bucket). Correlated by equalities only (``b.c = a.c``), the
same holds among the ``b`` rows of each ``c`` (the bucket is chosen by ``c``); a NOT IN
correlated otherwise is not rewritten.
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.plan.logical_from import conjuncts

SUBQUERY = "__sq"  # the alias the joined subquery gets
_NAMES = itertools.count(1)


class SemiJoin:
    """What ``cut_join`` reads of a join operator, for a rewritten subquery: a regular join's
    kind, or a window join's (its window, and the window_end equality's columns)."""

    side_ttls = (None, None)

    def __init__(self, join_type: str, null_aware: bool = False, window=None, ends: tuple = ()):
        self.join_type = join_type
        self.null_aware = null_aware  # NOT IN
        self.kind = "WindowJoin" if window is not None else "Join"
        self.window, self.ends = window, ends


def subquery_join(select: exp.Select, window=None) -> SemiJoin | None:
    """Rewrite ``select`` in place: its one IN / EXISTS / NOT EXISTS conjunct in WHERE as a
    semi (anti) join of its single FROM item. None, untouched, when there is none or the
    shape is one this does not rewrite. ``window``: the operator plan's WindowJoin for it
    (the subquery equates its window's bounds with the outer row's), so the join is a
    window semi (anti) join; a NOT IN is then NULL-aware within each window."""
    where = select.args.get("where")
    if where is None or select.args.get("joins") or select.args.get("from_") is None:
        return None
    conditions = conjuncts(where)
    found = [c for c in conditions if _subquery_of(c) is not None]
    if len(found) != 1:
        return None
    condition = found[0]
    negated, inner, query = _subquery_of(condition)
    outer = {select.args["from_"].this.alias_or_name}
    null_aware = isinstance(inner, exp.In) and negated
    if isinstance(inner, exp.In) and len(query.expressions) != 1:
        return None
    decorrelated = _decorrelate(query.copy(), outer)
    if decorrelated is None:
        return None
    body, on = decorrelated
    if null_aware and not all(_key_equality(c, outer) for c in on):
        return None  # correlated beyond equalities: NULL-aware per outer row's own subquery rows
    ends = ()
    if window is not None:
        (outer_end, (inner_table, inner_end)) = window.ends
        ends = next(((outer_end, p.alias) for p in body.expressions if p.alias.startswith("__e") and isinstance(
            p.this, exp.Column) and (p.this.table, p.this.name) == (inner_table, inner_end)), ())
        if not ends:
            return None
    if isinstance(inner, exp.In):  # the value IN compares with, as one more key
        first = body.expressions[0]
        first.replace(exp.alias_(first.unalias().copy(), "__in"))
        on.insert(0, exp.EQ(this=inner.this.copy(), expression=exp.column("__in", SUBQUERY)))
    else:  # EXISTS: the subquery is a source of rows; only what ON reads is projected
        body.set("expressions", [p for p in body.expressions if p.alias.startswith("__e")] or [exp.Literal.number(1)])
    alias = f"{SUBQUERY}{next(_NAMES)}"
    for column in (c for condition in on for c in condition.find_all(exp.Column)):
        if column.table == SUBQUERY:
            column.set("table", exp.to_identifier(alias))
    join = exp.Join(this=exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias))),
                    on=exp.and_(*on))
    select.set("joins", [join])
    rest = [c for c in conditions if c is not condition]
    select.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    if window is not None:
        window, ends = window.window, (ends[0], (alias, ends[1]))
    return SemiJoin("LeftAntiJoin" if negated else "LeftSemiJoin", null_aware, window, ends)


def _key_equality(condition: exp.Expression, outer: set[str]) -> bool:
    """Whether a decorrelated condition equates an outer expression with an inner one."""
    if not isinstance(condition, exp.EQ):
        return False
    a, b = ({c.table for c in side.find_all(exp.Column)} for side in (condition.this, condition.expression))
    return bool(a) and (a <= outer and b == {SUBQUERY} or b <= outer and a == {SUBQUERY})


def _subquery_of(condition: exp.Expression):
    """(negated, the IN or EXISTS node, its SELECT) of a conjunct that is one, else None."""
    negated = isinstance(condition, exp.Not)
    inner = condition.this if negated else condition
    if isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        query = inner.args["query"]
    elif isinstance(inner, exp.Exists):
        query = inner.this
    else:
        return None
    query = query.this if isinstance(query, exp.Subquery) else query
    return (negated, inner, query) if isinstance(query, exp.Select) else None


def _decorrelate(body: exp.Select, outer: set[str]):
    """(the subquery projecting, after its own columns, ``__e<i>`` for each inner expression a
    correlated condition reads; those conditions, reading ``__sq.__e<i>``), or None when the
    subquery is not a plain SELECT .. FROM .. WHERE."""
    inner = {body.args["from_"].this.alias_or_name} if body.args.get("from_") else set()
    inner |= {j.this.alias_or_name for j in body.args.get("joins") or []}
    outer = outer - inner  # an inner name hides the outer one
    if any(body.args.get(k) for k in ("group", "having", "order", "limit", "offset", "qualify", "distinct", "with_")) \
            or any(isinstance(n, exp.AggFunc) for p in body.expressions for n in p.walk()):
        if _reads(body, outer):
            return None  # a correlated aggregate or limit: not a join on its rows
        return body, []
    kept, on, projected = [], [], []
    for condition in conjuncts(body.args.get("where")):
        if not _reads(condition, outer):
            kept.append(condition)
            continue
        moved = condition.copy()
        for column in list(moved.find_all(exp.Column)):
            if column.table in inner:
                name = f"__e{len(projected)}"
                projected.append(exp.alias_(column.copy(), name))
                column.replace(exp.column(name, SUBQUERY))
            elif column.table not in outer:
                return None
        on.append(moved)
    if any(_reads(p, outer) for p in body.expressions) or _reads_elsewhere(body, outer):
        return None
    body.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    body.set("expressions", list(body.expressions) + projected)
    return body, on


def _reads(node: exp.Expression, outer: set[str]) -> bool:
    return any(c.table in outer for c in node.find_all(exp.Column))


def _reads_elsewhere(body: exp.Select, outer: set[str]) -> bool:
    """Whether the outer row is read outside WHERE (a JOIN's ON, a nested subquery)."""
    return any(_reads(j, outer) for j in body.args.get("joins") or [])
