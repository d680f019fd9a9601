"""Flink's UNNEST as Spark's LATERAL VIEW, with Flink's semantics.

sqlglot's own rewrite (``transforms.unnest_to_explode``) writes ``POSEXPLODE`` for WITH
ORDINALITY (numbered from 0: Flink numbers from 1), ``EXPLODE`` of an array of ROWs (one
STRUCT column: Flink expands a ROW element's fields into columns), drops the LEFT of
``LEFT JOIN UNNEST .. ON TRUE`` (Flink keeps a row whose collection is empty or NULL,
padded with NULLs) and keeps the alias as written, which Spark lowercases for a LATERAL
VIEW (``W.word`` then does not resolve in a case-sensitive session).

Here every UNNEST of a SELECT's FROM becomes ``LATERAL VIEW [OUTER] INLINE(..)`` of one
STRUCT per element, its fields the element (an ARRAY's), the element's fields (an ARRAY of
ROWs) or the key and value (a MAP, in its entries' order), then the ordinality from 1 when
asked; the view's alias is a lowercase name of its own and the columns that name the
UNNEST's alias are renamed to it. (A MULTISET is an ARRAY here.)
"""

from __future__ import annotations

import itertools

from sqlglot import exp

_NAMES = itertools.count(1)
ORDINALITY = "ordinality"  # the Unnest arg plan.unnest sets: its last alias column numbers the elements


def lateral_views(select: exp.Select) -> exp.Select:
    """``select`` with its UNNESTs as LATERAL VIEWs (a copy; ``select`` itself if it has none)."""
    source = select.args.get("from_")
    joins = select.args.get("joins") or []
    if not (source is not None and isinstance(source.this, exp.Unnest)) and not any(
            isinstance(j.this, exp.Unnest) for j in joins):
        return select
    select = select.copy()
    source, joins = select.args.get("from_"), list(select.args.get("joins") or [])
    views = []
    if isinstance(source.this, exp.Unnest):  # FROM UNNEST(..): beside one row of nothing
        unnest = source.this
        one = exp.Subquery(this=exp.select(exp.Literal.number(1)), alias=exp.TableAlias(this=exp.to_identifier("__one")))
        select.set("from_", exp.From(this=one))
        views.append(_view(select, unnest, outer=False))
    kept, conditions = [], []
    for join in joins:
        if not isinstance(join.this, exp.Unnest):
            if views:  # Spark's LATERAL VIEWs follow all of the FROM's joins
                raise ValueError("a join after CROSS JOIN UNNEST")
            kept.append(join)
            continue
        outer = (join.side or "").upper() == "LEFT"  # (plan.unnest: only ON TRUE)
        on = join.args.get("on")
        if not outer and on is not None and not (isinstance(on, exp.Boolean) and on.this):
            conditions.append(on)  # an inner join's ON: a condition on the lateral view's rows
        views.append(_view(select, join.this, outer=outer))
    if conditions:
        where = select.args.get("where")
        select.where(exp.and_(*[c.copy() for c in conditions]) if where is None else exp.and_(
            where.this, *[c.copy() for c in conditions]), append=False, copy=False)
    select.set("joins", kept or None)
    select.set("laterals", [*(select.args.get("laterals") or []), *views])
    return select


def _view(select: exp.Select, unnest: exp.Unnest, outer: bool) -> exp.Lateral:
    alias = unnest.args.get("alias")
    columns = [c.copy() for c in alias.columns] if alias is not None else []
    name = f"__u{next(_NAMES)}"
    if alias is not None and alias.name:
        _rename(select, alias.name, name)
    (argument,) = unnest.expressions
    structs = _elements(argument.copy(), bool(unnest.args.get(ORDINALITY)))
    return exp.Lateral(this=exp.Anonymous(this="INLINE", expressions=[structs]), view=True, outer=outer or None,
                       alias=exp.TableAlias(this=exp.to_identifier(name), columns=columns))


def _elements(argument: exp.Expression, ordinality: bool) -> exp.Expression:
    """An ARRAY of STRUCTs, one per element: the element's columns, then its number from 1."""
    data_type = argument.type
    if data_type is not None and data_type.is_type(exp.DType.MAP):
        argument = exp.Anonymous(this="MAP_ENTRIES", expressions=[argument])
        fields = ["key", "value"]
    elif data_type is not None and data_type.expressions and data_type.expressions[0].is_type(exp.DType.STRUCT):
        fields = [f.name for f in data_type.expressions[0].expressions]
    else:
        fields = None
    element, index = exp.to_identifier("__e"), exp.to_identifier("__i")
    values = [exp.Dot(this=exp.column(element), expression=exp.to_identifier(f)) for f in fields] \
        if fields is not None else [exp.column(element)]
    if ordinality:
        values.append(exp.Add(this=exp.column(index), expression=exp.Literal.number(1)))
    struct = exp.Anonymous(this="STRUCT", expressions=values)
    params = [element, index] if ordinality else [element]
    return exp.Anonymous(this="TRANSFORM", expressions=[argument, exp.Lambda(this=struct, expressions=params)])


def _rename(select: exp.Select, old: str, new: str) -> None:
    """Columns of ``select`` qualified by ``old`` (as written: Flink's names are case-sensitive)
    qualified by ``new``, in nested queries too unless one names a source ``old`` itself."""
    def visit(node: exp.Expression) -> None:
        for child in node.iter_expressions():
            if isinstance(child, exp.Select) and child is not select and _defines(child, old):
                continue
            if isinstance(child, exp.Column) and child.table == old:
                child.set("table", exp.to_identifier(new))
            visit(child)
    visit(select)


def _defines(select: exp.Select, name: str) -> bool:
    sources = [select.args.get("from_")] + list(select.args.get("joins") or [])
    return any(s is not None and s.this.alias_or_name == name for s in sources)
