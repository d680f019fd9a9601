"""MATCH_RECOGNIZE on Spark: each partition's rows matched on the executors.

`groupBy(PARTITION BY columns).applyInPandas(...)`: every partition key's rows arrive in
one pandas frame, are sorted by the ORDER BY keys (the time attribute first: event-time
order) and handed to the matcher (`spark.matcher`), which returns one row per match. No
PARTITION BY: one group holds every row (Flink runs it with parallelism 1 too). A
streaming input goes to the stateful operator (`spark.match_stream`) instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from streamsql.spark.dialect import spark_type
from streamsql.spark.windows import SEQ_COLUMN, SPLIT_COLUMN

if TYPE_CHECKING:
    from streamsql.plan.match_recognize import MatchRelation


READ_ORDER = "__match_read_order"


def match_frame(spark, relation: MatchRelation, streaming: bool = False):
    """The relation's output as a DataFrame over its input's temp view (a streaming one:
    the stateful operator of spark.match_stream)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = spark.table(f"`{relation.input_name}`")
    if streaming:
        from streamsql.spark.match_stream import match_stream

        return match_stream(frame, relation)
    if SEQ_COLUMN in frame.columns:  # a source with a watermark: the order it was read in
        if relation.late_delay_ms is not None:
            frame = _on_time(frame, relation.spec.time_column, relation.late_delay_ms)
        frame = frame.withColumn(READ_ORDER, F.row_number().over(Window.orderBy(SEQ_COLUMN))).drop(SEQ_COLUMN,
                                                                                                   SPLIT_COLUMN)
    else:
        frame = frame.withColumn(READ_ORDER, F.monotonically_increasing_id())
    grouped = frame.groupBy(*[f"`{k}`" for k in relation.spec.partition_by])
    return grouped.applyInPandas(_partition_matcher(relation), output_schema(relation))


def output_schema(relation: MatchRelation) -> str:
    """The relation's columns as a Spark DDL schema."""
    return ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in relation.columns)


def _on_time(frame, time_column: str, delay_ms: int):
    """The rows Flink's CEP operator keeps: a row whose time is at or below the watermark
    when it is read (max time read before it - delay - 1 ms) is late and dropped. Rows are
    taken in the order the source read them, as for windows (spark.windows)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(SPLIT_COLUMN) if SPLIT_COLUMN in frame.columns else Window  # (spark.windows)
    before = order.orderBy(SEQ_COLUMN).rowsBetween(Window.unboundedPreceding, -1)
    seen = F.max(F.col(f"`{time_column}`")).over(before)
    watermark = seen - F.expr(f"INTERVAL {delay_ms + 1} MILLISECONDS")
    late = "__match_late"
    flagged = frame.withColumn(late, F.coalesce(F.col(f"`{time_column}`") <= watermark, F.lit(False)))
    return flagged.filter(~F.col(late)).drop(late)


def _partition_matcher(relation: MatchRelation):
    """The function applyInPandas calls per partition key. The matcher is compiled here, on
    the driver, and travels pickled by value with the modules it needs: the Python workers
    may import another copy of streamsql, or none (on a cluster)."""
    from streamsql.spark.matcher import Matcher

    ship_by_value()
    matcher, integers = Matcher(relation.spec), set(relation.integer_columns)
    names = [c.name for c in relation.columns]
    kinds = {c.name: value_kind(c.type) for c in relation.columns}
    # Event-time order; rows of equal time in read order. Processing time is arrival order.
    keys = [] if relation.proctime else list(relation.order_by)
    keys.append((READ_ORDER, True))

    def match(frame):
        import pandas as pd

        frame = frame.sort_values([c for c, _ in keys], ascending=[a for _, a in keys], kind="mergesort")
        rows = records(frame.drop(columns=[READ_ORDER]), integers)
        out = [{name: conform(value, kinds[name]) for name, value in row.items()} for row in matcher.run(rows)]
        return pd.DataFrame(out, columns=names)

    return match


def value_kind(data_type) -> str | None:
    from sqlglot import exp

    if data_type is None:
        return None
    if data_type.is_type(*exp.DataType.INTEGER_TYPES):
        return "int"
    if data_type.is_type(exp.DataType.Type.DECIMAL):
        return "decimal"
    if data_type.is_type(*exp.DataType.REAL_TYPES):
        return "float"
    return None


def conform(value, kind: str | None):
    """A measure's value in its column's Python type (Arrow converts it to Spark's)."""
    import decimal

    if value is None or kind is None or isinstance(value, bool):
        return value
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "decimal":
        return value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    return value


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


def ship_by_value() -> None:
    import sys

    from pyspark import cloudpickle

    for name in ("streamsql.spark.matcher", "streamsql.plan.match_expressions", "streamsql.plan.match_pattern",
                 "streamsql.spark.match_stream", __name__):
        if name in sys.modules:
            try:
                cloudpickle.register_pickle_by_value(sys.modules[name])
            except ValueError:
                pass
