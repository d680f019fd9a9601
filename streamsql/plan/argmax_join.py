"""A window aggregate joined with its own largest value per window, planned as a window
Top-N by RANK() (Nexmark q5's shape):

    SELECT a.k, a.n FROM (X) AS a
    JOIN (SELECT MAX(c.n) AS top, c.ws, c.we FROM (X') AS c GROUP BY c.ws, c.we) AS m
      ON a.ws = m.ws AND a.we = m.we AND a.n >= m.top

where X and X' are the same window aggregate (one FROM, WHERE and GROUP BY; X' projects some
of X's columns), or both the same view of one, and ws, we its window's start and end. ``m`` holds one row per window, its
largest ``n``, so the join keeps each of X's rows whose ``n`` is its window's largest: the
rows ``RANK() OVER (PARTITION BY ws, we ORDER BY n DESC) = 1`` keeps (ties and all), less a
row whose ``n`` is NULL (MAX skips NULLs, and NULL >= anything is not true; such a row ranks
first only when every row of its window is NULL). Planned as written, X is computed twice
(its input read twice), once more aggregated and then joined back; rewritten, once, and
each window's rows ranked when the window fires, the result the same. Only this exact
shape is rewritten (an inner join, the three conditions in any order, ``>=`` or ``=``,
references qualified); any other query is left as it is.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect import Flink
from streamsql.plan.windows import tvf_of

RANK_COLUMN = "__argmax_rank"
_CLAUSES = ("group", "having", "qualify", "distinct", "order", "limit", "offset", "with_", "windows")


def rewrite_argmax_joins(query: exp.Expression, view_of=lambda table: None) -> exp.Expression:
    """``query`` with every SELECT of that shape rewritten (inner ones first), in place but
    for the query itself, which is returned anew when it is one. ``view_of(table)``: the
    query of the view a FROM item names, else None."""
    ctes = {cte.alias for cte in query.find_all(exp.CTE)}

    def body_of(item) -> exp.Select | None:
        if isinstance(item, exp.Subquery):
            return item.this if isinstance(item.this, exp.Select) else None
        if isinstance(item, exp.Table) and not (item.name in ctes and not item.db) and not item.args.get("version"):
            body = view_of(item)
            return body if isinstance(body, exp.Select) else None
        return None

    for select in reversed(list(query.find_all(exp.Select))):
        rewritten = _rewritten(select, body_of)
        if rewritten is not None:
            if select is query:
                return rewritten
            select.replace(rewritten)
    return query


def rewritten(query: exp.Expression) -> bool:
    """Whether a planned query holds such a rewrite (a job's state depends on it)."""
    return any(a.alias == RANK_COLUMN for a in query.find_all(exp.Alias))


def _rewritten(select: exp.Select, body_of) -> exp.Select | None:
    joins = select.args.get("joins") or []
    if len(joins) != 1 or any(select.args.get(c) for c in _CLAUSES) or select.args.get("from_") is None:
        return None
    join, left = joins[0], select.args["from_"].this
    if join.args.get("side") or join.args.get("using") or join.args.get("method") or (
            (join.args.get("kind") or "INNER").upper() != "INNER"):
        return None
    right = join.this
    if not (isinstance(right, exp.Subquery) and isinstance(right.this, exp.Select)):
        return None
    x = body_of(left)
    a, m = left.alias_or_name, right.alias_or_name
    maximum = _maximum_per_window(right.this, body_of)
    if x is None or not a or not m or a == m or maximum is None:
        return None
    top, column, bounds, source = maximum  # bounds: m's output name -> X' column
    if isinstance(left, exp.Table) or isinstance(source, exp.Table):  # a view: the same one
        if not (isinstance(left, exp.Table) and isinstance(source, exp.Table)
                and (left.catalog, left.db, left.name) == (source.catalog, source.db, source.name)):
            return None
    elif not _same_aggregate(x, source.this):
        return None
    if not _window_bounds(x, bounds.values()) or any(_projection(x, n) is None for n in [column, *bounds.values()]):
        return None
    renamed = {top: column, **bounds}  # m's columns -> a's
    if not _joined_on(join.args.get("on"), a, m, column, top, bounds):
        return None
    references = [c for part in (*select.expressions, select.args.get("where")) if part is not None
                  for c in part.find_all(exp.Column)]
    if any(isinstance(p, exp.Star) or p.find(exp.Star) for p in select.expressions) or any(
            c.table not in (a, m) or (c.table == m and c.name not in renamed) for c in references):
        return None
    rewritten = select.copy()
    rewritten.set("joins", None)
    for projection in list(rewritten.expressions):
        if isinstance(projection, exp.Column) and projection.table == m:  # its output keeps its name
            projection.replace(exp.alias_(projection.copy(), projection.name))
    for c in list(rewritten.find_all(exp.Column)):
        if c.table == m:
            c.replace(exp.column(renamed[c.name], a))
    ranked = exp.select(exp.Star(), exp.alias_(exp.Window(
        this=exp.Rank(), partition_by=[exp.column(n) for n in bounds.values()],
        order=exp.Order(expressions=[exp.Ordered(this=exp.column(column), desc=True, nulls_first=False)]),
        over="OVER"), RANK_COLUMN)).from_(left.copy())
    rewritten.set("from_", exp.From(this=exp.Subquery(this=ranked, alias=exp.TableAlias(this=exp.to_identifier(a)))))
    kept = [exp.LTE(this=exp.column(RANK_COLUMN, a), expression=exp.Literal.number(1))]
    if not isinstance(_projection(x, column), exp.Count):
        kept.append(exp.Not(this=exp.Is(this=exp.column(column, a), expression=exp.Null())))
    where = rewritten.args.get("where")
    rewritten.set("where", exp.Where(this=exp.and_(*kept, *([where.this] if where is not None else []))))
    return rewritten


def _maximum_per_window(body: exp.Select, body_of):
    """(MAX's output name, the column it takes, {output name: grouping column}, the FROM item:
    X' or a view) for ``SELECT MAX(c.n) AS top, c.ws, c.we FROM (X') AS c GROUP BY c.ws, c.we``,
    else None."""
    if any(body.args.get(c) for c in ("joins", "where", "having", "qualify", "distinct", "order", "limit",
                                       "offset", "with_", "windows")):
        return None
    source = body.args["from_"].this if body.args.get("from_") else None
    if source is None or body_of(source) is None:
        return None
    c = source.alias_or_name
    keys = list(body.args["group"].expressions) if body.args.get("group") else []
    if len(keys) != 2 or not all(_column_of(k, c) for k in keys):
        return None
    key_names = {k.name for k in keys}
    top = column = None
    bounds = {}
    for projection in body.expressions:
        inner = projection.unalias()
        if isinstance(inner, exp.Max) and _column_of(inner.this, c) and top is None:
            top, column = projection.alias_or_name, inner.this.name
        elif _column_of(inner, c) and inner.name in key_names:
            bounds[projection.alias_or_name] = inner.name
        else:
            return None
    if top is None or set(bounds.values()) != key_names or len(bounds) != 2:
        return None
    return top, column, bounds, source


def _column_of(node, alias: str) -> bool:
    return isinstance(node, exp.Column) and node.table in ("", alias)


def _same_aggregate(x: exp.Select, other: exp.Select) -> bool:
    """Whether X' is X with fewer projections: the same FROM, WHERE, GROUP BY and HAVING (and
    nothing else that could pick other rows), and each of its projections one of X's (same
    name, same expression)."""
    if any(x.args.get(c) for c in ("distinct", "order", "limit", "offset", "qualify", "windows", "with_")):
        return False
    if _without_projections(x) != _without_projections(other):
        return False
    mine = {p.alias_or_name: p.unalias() for p in x.expressions}
    return all(p.alias_or_name in mine and mine[p.alias_or_name] == p.unalias() for p in other.expressions)


def _without_projections(select: exp.Select) -> str:
    bare = select.copy()
    bare.set("expressions", [exp.Star()])
    return bare.sql(dialect=Flink)


def _projection(x: exp.Select, name: str):
    return next((p.unalias() for p in x.expressions if p.alias_or_name == name), None)


def _window_bounds(x: exp.Select, names) -> bool:
    """Whether X aggregates a window TVF's rows by both bounds, and ``names`` are its
    window_start and window_end."""
    source = x.args["from_"].this if x.args.get("from_") else None
    if not isinstance(source, exp.Table) or tvf_of(source) is None or x.args.get("joins"):
        return False
    alias = source.alias_or_name
    grouped = {k.name for k in (x.args["group"].expressions if x.args.get("group") else []) if _column_of(k, alias)}
    projected = {_projection(x, n).name for n in names if _column_of(_projection(x, n), alias)}
    return projected == {"window_start", "window_end"} <= grouped


def _joined_on(on, a: str, m: str, column: str, top: str, bounds: dict[str, str]) -> bool:
    """Whether ON is exactly: each of m's bounds equal to a's, and a's column >= (or =) m's maximum."""
    conditions = list(on.flatten()) if isinstance(on, exp.And) else [on]
    wanted = {("=", (a, n), (m, out)) for out, n in bounds.items()}
    found = set()
    for condition in conditions:
        if isinstance(condition, exp.Paren):
            condition = condition.unnest()
        sides = (condition.this, condition.expression) if isinstance(condition, exp.Binary) else ()
        if len(sides) != 2 or not all(isinstance(s, exp.Column) and s.table for s in sides):
            return False
        left, right = ((s.table, s.name) for s in sides)
        if isinstance(condition, exp.EQ):
            pair = ("=", left, right) if left[0] == a else ("=", right, left)
            if pair in wanted or pair == ("=", (a, column), (m, top)):
                found.add(pair if pair in wanted else "top")
                continue
        elif isinstance(condition, exp.GTE) and (left, right) == ((a, column), (m, top)):
            found.add("top")
            continue
        elif isinstance(condition, exp.LTE) and (left, right) == ((m, top), (a, column)):
            found.add("top")
            continue
        return False
    return len(conditions) == 3 and found == wanted | {"top"}
