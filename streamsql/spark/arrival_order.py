"""Order-sensitive aggregates over bounded input, in the order the rows arrive.

LISTAGG, ARRAY_AGG, JSON_ARRAYAGG, FIRST_VALUE and LAST_VALUE depend on the order their rows come in. Flink
reads a bounded file in order, so its LISTAGG of a file's rows lists them in file order.
Spark's batch aggregate is partial per file split, then merged in the order the shuffle
fetches the splits' results: the second half of a file could come first.

A batch read of a table with a watermark carries its read order (``SEQ_COLUMN``: the file,
the split's start, the row's place in its split; see ``runtime.sources``); so does a stream
of files with a watermark whose query calls one of those aggregates (``reads_in_order``:
the file's modification time first, as Spark takes a stream's files oldest first). Spark's
streaming aggregate falls back to sorting past 128 keys too, within a micro-batch. Where an
aggregating SELECT reads one such relation directly (no join), its order-sensitive calls
are marked here with that column, and ``spark.functions`` collects (order, value) pairs and
sorts them, or takes the value of the least (greatest) order.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from streamsql.dialect.functions import FlinkAggCall
from streamsql.plan.grouping import aggregate_calls
from streamsql.spark.windows import SEQ_COLUMN

ORDERED = ("LISTAGG", "ARRAY_AGG", "FIRST_VALUE", "LAST_VALUE", "JSON_ARRAYAGG")
META = "arrival"  # the call's meta key: the SQL of the order column


def reads_in_order(query: exp.Expression) -> bool:
    """Whether ``query`` calls an order-sensitive aggregate (its sources then carry their
    read order when streamed, as a batch read's always do)."""
    return any(call.name in ORDERED for call in query.find_all(FlinkAggCall))


def in_arrival_order(query: exp.Expression, sequenced: Callable[[str], bool]) -> exp.Expression:
    """``query`` (a copy when it changes) whose order-sensitive aggregate calls over a relation
    read with ``SEQ_COLUMN`` (``sequenced(name)``) know that column."""
    if not reads_in_order(query):
        return query
    query = query.copy()
    local = {cte.alias_or_name for cte in query.find_all(exp.CTE)}  # (no SEQ_COLUMN; may hide a table's name)
    for select in query.find_all(exp.Select):
        source = select.args.get("from_")
        if source is None or select.args.get("joins") or not isinstance(source.this, exp.Table) \
                or source.this.name in local or not sequenced(source.this.name):
            continue
        order = f"`{source.this.alias_or_name}`.`{SEQ_COLUMN}`"
        for call in aggregate_calls(select):
            if isinstance(call, FlinkAggCall) and call.name in ORDERED:
                call.meta[META] = order
    return query
