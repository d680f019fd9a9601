"""Cutting a GROUP BY out of a query (spark.stateful.chain): Flink's GroupAggregate, or its
window-attached WindowAggregate when the rows are another window aggregate's grouped by
both of that window's bounds (``window_cut.attached_bounds``)."""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.state_ttl import hinted_ttl
from streamsql.spark.stateful.stages import AggregateStage, Stage, Unsupported, carry_rowkind
from streamsql.spark.stateful.specs import INSERT_ONLY
from streamsql.spark.stateful.split import split_group_aggregate, unstreamed_call


def cut_group_aggregate(query: exp.Select, inputs: list, changelogs: list[str],
                        attached: tuple[int, int] | None) -> Stage:
    """The stage of ``query``'s GROUP BY (its FROM items already read as ``inputs``' views;
    ``changelogs``: the aliases of those that carry a row kind)."""
    split = split_group_aggregate(query)
    if split is None:
        reason = unstreamed_call(query)
        raise Unsupported(*([reason] if reason else []))
    # LISTAGG, ARRAY_AGG, FIRST_VALUE and LAST_VALUE over a changelog keep each key's live
    # values in arrival order, as Flink's versions with retraction do (stateful/sequences.py).
    # Another operator's rows of different keys come in no set order within a micro-batch,
    # as they come in no set order across Flink's parallel tasks. A window-attached
    # aggregate (Flink's WindowAggregate, insert-only) runs on the window operator, which
    # takes them over inserts only.
    ordered = next(("JSON_ARRAYAGG" if c.json_array else c.function for c in split.calls
                    if c.function in INSERT_ONLY), None)
    if attached is not None and ordered:
        raise Unsupported(f"{ordered} reads another stateful operator's rows, which come in no order within"
                           f" a micro-batch, and streamsql's {ordered} takes rows in arrival order")
    if attached is not None:
        from streamsql.spark.stateful.window_cut import cut_attached_window

        stage = cut_attached_window(inputs, changelogs, split, attached)
        if stage is not None:
            return stage
    if changelogs:
        carry_rowkind(split.input_query, changelogs)
    hinted = hinted_ttl(query, query.args["from_"].this) if query.args.get("from_") else None
    return AggregateStage(inputs=inputs, split=split, ttl_ms=hinted[1] if hinted else None)
