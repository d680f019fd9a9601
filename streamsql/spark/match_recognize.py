"""MATCH_RECOGNIZE on Spark: each partition's rows matched on the executors.

`groupBy(PARTITION BY columns).applyInPandas(...)`: every partition key's rows arrive in
one pandas frame, are sorted by the ORDER BY keys (the time attribute first: event-time
order) and handed to the matcher (`spark.matcher`), which returns one row per match. No
PARTITION BY: one group holds every row (Flink runs it with parallelism 1 too). Bounded
input only: over unbounded input the planner's operator plan refuses the query first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from streamsql.spark.dialect import spark_type

if TYPE_CHECKING:
    from streamsql.plan.match_recognize import MatchRelation


def match_frame(spark, relation: MatchRelation):
    """The relation's output as a DataFrame over its input's temp view."""
    frame = spark.table(f"`{relation.input_name}`")
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in relation.columns)
    match = _partition_matcher(relation)
    grouped = frame.groupBy(*[f"`{k}`" for k in relation.spec.partition_by])
    return grouped.applyInPandas(match, schema)


def _partition_matcher(relation: MatchRelation):
    spec, order, integers = relation.spec, relation.order_by, set(relation.integer_columns)
    names = [c.name for c in relation.columns]

    def match(frame):
        import pandas as pd

        from streamsql.spark.matcher import Matcher

        frame = frame.sort_values([c for c, _ in order], ascending=[a for _, a in order], kind="mergesort")
        rows = records(frame, integers)
        return pd.DataFrame(Matcher(spec).run(rows), columns=names)

    return match


def records(frame, integers: set[str]) -> list[dict]:
    """Rows as dicts of plain Python values, NULL as None (Spark hands a nullable integer
    column over as floats with NaN: integers again here)."""
    columns = {}
    for name in frame.columns:
        values = frame[name].tolist()
        columns[name] = [_plain(v, name in integers) for v in values]
    return [dict(zip(columns, row)) for row in zip(*columns.values())] if columns else []


def _plain(value, integer: bool):
    import pandas as pd

    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if integer and isinstance(value, float):
        return int(value)
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value
