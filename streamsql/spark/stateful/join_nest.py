"""A SELECT of several JOINs as nested SELECTs of one JOIN each (no Spark here), so that
streamsql's join operator, which joins two inputs, runs each of them as Flink chains its
binary joins:

    SELECT b.auction, a.seller, u.name FROM bid b JOIN auction a ON b.auction = a.id
      LEFT JOIN users u ON u.id = a.seller

reads the joins before the last one through a derived table, which carries every column
the rest of the query uses under a name of its own (two inputs may share column names):

    SELECT __nested1.__n0 AS auction, __nested1.__n1 AS seller, u.name AS name
    FROM (SELECT b.auction AS __n0, a.seller AS __n1 FROM bid b JOIN auction a
          ON b.auction = a.id) AS __nested1 LEFT JOIN users u ON u.id = __nested1.__n1

A WHERE conjunct of the inner inputs alone moves into the derived table (it gives an inner
join its keys), unless the last join pads the inner side with NULLs (RIGHT, FULL), where a
filter on that side is not the same before the join as after it. A STATE_TTL hint's
inputs go with their join. Not rewritten: a column without its table's name, a star in
the select list, a subquery that reuses one of the inner names, a last join with USING or
reading the inner inputs (a lateral item), an outer join after a comma (``a, b LEFT JOIN
c`` joins ``a`` with ``b LEFT JOIN c``).
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.plan.logical_from import conjuncts
from streamsql.plan.state_ttl import STATE_TTL

NESTED = "__nested"
_NAMES = itertools.count(1)
_OUTER_PARTS = ("expressions", "where", "group", "having", "qualify", "order", "windows")


def nest_joins(select: exp.Select) -> bool:
    """Rewrite ``select`` in place (see the module); whether it was."""
    joins = list(select.args.get("joins") or [])
    if len(joins) < 2 or select.args.get("from_") is None:
        return False
    comma = [not (j.args.get("on") or j.args.get("using") or j.kind or j.side) for j in joins]
    if any(comma[i] and joins[k].side for i in range(len(joins)) for k in range(i + 1, len(joins))):
        return False  # `a, b LEFT JOIN c` is a × (b ⟕ c): a comma binds looser than JOIN
    last = joins[-1]
    inner_items = [select.args["from_"].this] + [j.this for j in joins[:-1]]
    inner = {item.alias_or_name for item in inner_items}
    if last.args.get("using") or any(c.table in inner for c in last.this.find_all(exp.Column)):
        return False  # USING, or a lateral item reading the inner inputs
    if any(isinstance(p, exp.Star) or isinstance(p, exp.Column) and isinstance(p.this, exp.Star)
           for p in select.expressions):
        return False
    parts = [node for key in _OUTER_PARTS for node in _as_list(select.args.get(key))] + _as_list(last.args.get("on"))
    for part in parts:
        for query in part.find_all(exp.Select):
            own = {s.alias_or_name for s in query.find_all(exp.Table)} | {
                s.alias_or_name for s in query.find_all(exp.Subquery) if s.alias}
            if own & inner:
                return False  # an inner name reused inside a subquery: references would be ambiguous
    columns = [c for part in parts for c in part.find_all(exp.Column)]
    if any(not c.table for c in columns):
        return False
    pushed, kept = [], []
    padded = (last.side or "").upper() in ("RIGHT", "FULL")
    for condition in conjuncts(select.args.get("where")):
        tables = {c.table for c in condition.find_all(exp.Column)}
        if not padded and tables and tables <= inner and not condition.find(exp.Subquery, exp.Exists, exp.AggFunc):
            pushed.append(condition)
        else:
            kept.append(condition)
    moved = {id(c) for condition in pushed for c in condition.find_all(exp.Column)}
    mapped: dict[tuple[str, str], str] = {}
    for column in columns:
        if column.table in inner and id(column) not in moved:
            mapped.setdefault((column.table, column.name), f"__n{len(mapped)}")
    if not mapped:
        return False
    alias = f"{NESTED}{next(_NAMES)}"
    body = exp.select(*[exp.alias_(exp.column(name, table), new) for (table, name), new in mapped.items()])
    body.set("from_", select.args["from_"].copy())
    body.set("joins", [j.copy() for j in joins[:-1]])
    if pushed:
        body.set("where", exp.Where(this=exp.and_(*[c.copy() for c in pushed])))
    ttls = select.meta.get(STATE_TTL)
    if ttls:  # a STATE_TTL hint names the inputs of the join it belongs to, as in Flink's cascades
        body.meta[STATE_TTL] = {name: ttl for name, ttl in ttls.items() if name in inner}
    select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    for projection in select.expressions:  # an output keeps its name
        if isinstance(projection, exp.Column):
            projection.replace(exp.alias_(projection.copy(), projection.name))
    for key in _OUTER_PARTS:
        for part in _as_list(select.args.get(key)):
            _rename(part, inner, mapped, alias)
    if last.args.get("on") is not None:
        _rename(last.args["on"], inner, mapped, alias)
    select.set("from_", exp.From(this=body.subquery(alias, copy=False)))
    select.set("joins", [last])
    return True


def _rename(node: exp.Expression, inner: set[str], mapped: dict, alias: str) -> None:
    for column in list(node.find_all(exp.Column)):
        new = mapped.get((column.table, column.name)) if column.table in inner else None
        if new is not None:
            column.replace(exp.column(new, alias))


def _as_list(value) -> list[exp.Expression]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
