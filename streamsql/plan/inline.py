"""Windows anywhere: a window over a subquery or a CTE reads it as a view.

Window TVFs and legacy group windows are planned over a named relation (a table or a
view: plan.windows). Flink also takes a subquery (``GROUP BY TUMBLE(rt, ...)`` over a
derived table, cascading ``TUMBLE_ROWTIME``) and a CTE (``TABLE(TUMBLE(TABLE cte, ...))``).
Those inputs are hoisted into views of the planner's own (``__inline_N``), planned like any
view: their time attributes carry through, and the window reads them by name.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from streamsql.dialect.windows import GroupWindow, TableArgument
from streamsql.plan.windows import tvf_of
from streamsql.plan.changelog_functions import changelog_call_of


def hoist_window_inputs(query: exp.Expression, inline_view: Callable[[exp.Query], str]) -> None:
    """Replace, in place, each subquery a legacy group window groups and each CTE a window
    TVF reads by a reference to a view ``inline_view`` registers for its body."""
    ctes = {}
    for cte in query.find_all(exp.CTE):
        ctes[cte.alias_or_name] = cte.this
    for select in list(query.find_all(exp.Select)):
        group = select.args.get("group")
        if not group or not any(isinstance(e, GroupWindow) for e in group.expressions) or select.args.get("joins"):
            continue
        source = select.args["from_"].this
        if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Query):
            name = inline_view(source.this)
            source.replace(exp.Table(this=exp.to_identifier(name),
                                     alias=exp.TableAlias(this=exp.to_identifier(source.alias_or_name or name))))
        elif isinstance(source, exp.Table) and not source.db and source.name in ctes:
            _to_view(source, ctes[source.name], inline_view)
    for table in list(query.find_all(exp.Table)):
        tvf = tvf_of(table) or changelog_call_of(table)
        if tvf is None:
            continue
        argument = tvf.args.get("table")
        inner = argument.this if isinstance(argument, TableArgument) else None
        if isinstance(inner, exp.Table) and not inner.db and inner.name in ctes:
            inner.replace(exp.Table(this=exp.to_identifier(inline_view(ctes[inner.name]))))


def _to_view(source: exp.Table, body: exp.Query, inline_view) -> None:
    alias = source.alias_or_name
    source.replace(exp.Table(this=exp.to_identifier(inline_view(body)),
                             alias=exp.TableAlias(this=exp.to_identifier(alias))))
