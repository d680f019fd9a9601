"""Cutting a Top-N or deduplication out of a query (spark.stateful.chain): the operator plan's
Rank, Deduplicate or WindowRank node decides which; the SELECT that numbers the rows becomes
the Rank operator's input (its data columns, partition keys ``__p<i>`` and order keys
``__o<i>``), and the outer SELECT reads the ranked changelog (``RANKED``).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.plan.grouping import aggregate_calls
from streamsql.spark.stateful.stages import (
    RANKED, RankStage, WindowAggregateStage, carry_rowkind, same_form, Unsupported,
)


def cut_rank(compiler, outer: exp.Select, pattern) -> RankStage:
    """The stage of a Top-N or deduplication (``ROW_NUMBER() .. WHERE rn <= N``; a window Top-N
    by RANK() or DENSE_RANK() too, its ties kept): its input
    SELECT with the partition and order keys (computed once), the Rank operator, and the
    outer SELECT reading its changelog."""
    from streamsql.plan.aggregate_operators import Deduplicate, Rank
    from streamsql.plan.operators import walk

    inner, name, limit, rest = pattern
    node = next((n for n in walk(compiler.builder.select(outer)) if isinstance(n, (Rank, Deduplicate))), None)
    if node is None:
        raise Unsupported()
    inner = inner.copy()
    per_window = getattr(node, "window", None) is not None
    rank_type = getattr(node, "rank_type", "ROW_NUMBER")
    if rank_type != "ROW_NUMBER" and not per_window:
        raise Unsupported()  # ties under retraction: refused at plan time, as Flink refuses them
    inputs, changelogs = compiler._inputs(inner, window_rows=per_window)
    window_end = None
    if per_window and not _over_window_aggregate(inner, inputs):
        from streamsql.spark.stateful.window_cut import window_rows_end

        window_end, per_window = window_rows_end(compiler, inner), False
    if inner.args.get("group") or aggregate_calls(inner) or inner.args.get("distinct"):
        raise Unsupported()  # ROW_NUMBER over an aggregate of the same SELECT
    call = next(p for p in inner.expressions if p.alias_or_name == name)
    window = call.unalias()
    others = [p for p in inner.expressions if p is not call]
    if any(p.find(exp.Window) for p in others):
        raise Unsupported()
    partition = list(window.args.get("partition_by") or [])
    order = list(window.args["order"].expressions) if window.args.get("order") else []
    selects = [p.copy() for p in others]
    # A key the rows already carry is used by name (a second copy of an event-time
    # column would be a second event-time column to Spark); others are computed.
    carried = {same_form(p.unalias()): p.alias_or_name for p in others}

    def key_column(expression: exp.Expression, name: str) -> str:
        if same_form(expression) in carried:
            return carried[same_form(expression)]
        selects.append(exp.alias_(expression.copy(), name))
        return name

    partition_names = [key_column(p, f"__p{i}") for i, p in enumerate(partition)]
    later_wins = isinstance(node, Deduplicate) and node.keep_last
    proctime = isinstance(node, Deduplicate) and not node.rowtime
    # processing time orders rows as they arrive: the Rank's own arrival order
    order_names = [] if proctime else [(key_column(o.this, f"__o{i}"), bool(o.args.get("desc")))
                                       for i, o in enumerate(order)]
    if window_end is not None:
        selects.append(window_end)
        window_end = window_end.alias_or_name
    inner.set("expressions", selects)
    if changelogs:
        carry_rowkind(inner, changelogs)
    output_rank = any(c.name == name for p in outer.expressions for c in p.find_all(exp.Column))
    alias = outer.args["from_"].this.alias_or_name
    output = exp.select(exp.column(ROWKIND_COLUMN, alias), *[p.copy() for p in outer.expressions])
    output.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(RANKED),
                                                alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    if rest:
        output = output.where(exp.and_(*[c.copy() for c in rest]))
    return RankStage(
        inputs=inputs, input_query=inner, data=[p.alias_or_name for p in others],
        partition=partition_names, order=order_names,
        limit=limit, rank_column=name if output_rank else None, later_wins=later_wins, per_window=per_window,
        window_end=window_end, rank_type=rank_type, output_query=output)


def _over_window_aggregate(select: exp.Select, inputs: list) -> bool:
    """Whether a window Top-N's SELECT reads a window aggregate's rows alone (the operator
    plan's WindowRank: it partitions by both bounds of the aggregate's window, under any
    names): all of a window's rows fire in one micro-batch."""
    return len(inputs) == 1 and isinstance(inputs[0][1], WindowAggregateStage) and not select.args.get("joins")
