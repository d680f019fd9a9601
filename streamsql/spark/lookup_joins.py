"""A stream's lookup join into a database table, as keyed lookups (no Spark session here).

Flink's LookupJoin asks the dimension table for each row's keys as the row passes. A
lookup join into a file table is Spark's stream-static join (plan.temporal): the table is
read whole each micro-batch, which for a file costs what reading it costs. For a database
table ('connector' = 'jdbc') that would scan the whole table every micro-batch; instead the
join is cut out of the SELECT (``cut_lookup``): the rows of its left side, with their keys
(``__lk<i>``), go through streamsql's lookup operator (runtime.jdbc_lookup), which asks
PostgreSQL for each task's distinct keys of the micro-batch at once (through its cache), and
hands back each row with its dimension row's columns (``__d<i>``). The SELECT then reads
that view under the left side's alias, the dimension's columns renamed, its join gone.

Cut: an INNER or LEFT lookup join that is the SELECT's first join, whose ON is equalities
``<left expression> = <dimension column>`` (at least one), and, for an INNER join, any
other conditions (they become WHERE conditions: an inner join's ON filters pairs as WHERE
does); a LEFT join with conditions beyond its keys keeps Spark's stream-static join (its
padding depends on them), as does any other shape. Results are the same either way.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sqlglot import exp

from streamsql.plan.logical_from import conjuncts
from streamsql.plan.temporal import LOOKUP

KEY = "__lk"  # a left row's lookup key i, cast to the dimension column's type
DIM = "__d"  # __d<n>_<j>: cut n's dimension column j on a looked-up row
_VIEWS = itertools.count(1)


@dataclass
class LookupCut:
    """One lookup join cut out of a SELECT: what the lookup operator needs."""

    view: str  # the view the SELECT now reads under ``alias``: the left rows with __d<j>
    table: str  # the dimension table's (Spark) name
    left: exp.Expression  # the left FROM item (a table, view or derived table, with its alias)
    alias: str
    keys: list[exp.Expression]  # per key: the left side's expression
    key_columns: list[str]  # per key: the dimension's column
    columns: list[str]  # the dimension's columns, in __d<j> order
    outer: bool  # LEFT: a row without a match keeps NULLs
    number: int = 0

    def dim_column(self, j: int) -> str:
        return f"{DIM}{self.number}_{j}"


def cut_lookups(query: exp.Expression, dimensions: dict[str, list[str]]) -> tuple[exp.Expression, list[LookupCut]]:
    """``query`` with each lookup join into one of ``dimensions`` (Spark name -> its columns)
    that has the shape above cut out (innermost first), and the cuts, in the order their
    views must be made. ``query`` itself is not changed."""
    query = query.copy()
    cuts: list[LookupCut] = []
    for select in reversed(list(query.find_all(exp.Select))):
        while True:
            cut = cut_lookup(select, dimensions)
            if cut is None:
                break
            cuts.append(cut)
    return query, cuts


def cut_lookup(select: exp.Select, dimensions: dict[str, list[str]]) -> LookupCut | None:
    """Cut the SELECT's first join out when it is a lookup join of the shape above (in place)."""
    joins = select.args.get("joins") or []
    source = select.args.get("from_")
    if not joins or source is None:
        return None
    join = joins[0]
    table = join.this
    if not isinstance(table, exp.Table) or not table.meta.get(LOOKUP) or table.name not in dimensions or table.db:
        return None
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER") or join.args.get("using"):
        return None
    columns = dimensions[table.name]
    dim_alias = table.alias_or_name
    left = source.this
    alias = left.alias_or_name
    keys, key_columns, residual = [], [], []
    for condition in conjuncts(join.args.get("on")):
        pair = _key_of(condition, dim_alias, columns)
        if pair is None:
            residual.append(condition)
        else:
            keys.append(pair[0])
            key_columns.append(pair[1])
    if not keys or (side == "LEFT" and residual):
        return None
    number = next(_VIEWS)
    cut = LookupCut(view=f"__lookup_{number}", table=table.name, left=left.copy(), alias=alias,
                    keys=[k.copy() for k in keys], key_columns=key_columns, columns=list(columns),
                    outer=side == "LEFT", number=number)
    join.pop()
    source.set("this", exp.Table(this=exp.to_identifier(cut.view), alias=exp.TableAlias(this=exp.to_identifier(alias))))
    if residual:
        condition = exp.and_(*[c.copy() for c in residual])
        where = select.args.get("where")
        select.where(condition if where is None else exp.and_(exp.paren(where.this.copy()), exp.paren(condition)),
                     append=False, copy=False)
    lowered = {c.lower(): j for j, c in enumerate(columns)}
    for column in list(select.find_all(exp.Column)):
        if column.table == dim_alias and column.name.lower() in lowered:
            column.replace(exp.column(cut.dim_column(lowered[column.name.lower()]), alias))
    return cut


def _key_of(condition: exp.Expression, dim_alias: str, columns: list[str]):
    """(the left expression, the dimension column) of ``left = d.column``, or None."""
    if not isinstance(condition, exp.EQ):
        return None
    for mine, other in ((condition.right, condition.left), (condition.left, condition.right)):
        if isinstance(mine, exp.Column) and mine.table == dim_alias and not any(
                c.table == dim_alias for c in other.find_all(exp.Column)):
            match = next((c for c in columns if c.lower() == mine.name.lower()), None)
            if match is not None and not other.find(exp.Subquery, exp.AggFunc, exp.Window):
                return other, match
    return None

