"""MATCH_RECOGNIZE over unbounded input: Flink's Match operator on transformWithStateInPandas.

Per partition key, rows are buffered in state (one ValueState: the pending rows, pickled)
until the watermark passes them; a row already at or below the watermark when it arrives
is late and dropped, as Flink's CEP operator drops it. An event-time timer at each row's
time fires once the watermark passes it: the buffered rows up to the watermark are then
complete and in event-time order, and the matcher (`spark.matcher`, incremental mode)
emits every match no later row can change. The rows a pending search may still need stay
in state (WITHIN bounds them; without it a run that never ends is kept whole, as in Flink).

`match_stream(frame, relation)` is the whole operator: a streaming DataFrame with a
watermark on the relation's time column in, its matches out (the engine registers it for
a streaming query, `spark.match_recognize.match_frame`). Not enabled yet: `spark.physical`
and `runtime.execution` still refuse a Match operator over unbounded input.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

from streamsql.errors import ValidationError

if TYPE_CHECKING:
    from streamsql.plan.match_recognize import MatchRelation

def match_stream(frame, relation: MatchRelation):
    """The matches of a streaming DataFrame (append mode): PARTITION BY columns, measures."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor

    from streamsql.spark.stateful.transport import texts_as_variants, variants_as_text
    from streamsql.spark.match_recognize import conform, output_schema, records, ship_by_value, value_kind
    from streamsql.spark.matcher import Matcher

    if relation.proctime:
        raise ValidationError("MATCH_RECOGNIZE ordered by processing time over a stream is not supported yet"
                              " (its operator runs on event-time timers); order by a rowtime attribute")
    ship_by_value()
    matcher = Matcher(relation.spec)
    time_column, names = relation.spec.time_column, [c.name for c in relation.columns]
    integers = set(relation.integer_columns)
    kinds = {c.name: value_kind(c.type) for c in relation.columns}
    order = [c for c, _ in relation.order_by[1:]]  # rows of equal time: the other keys, then arrival

    class MatchProcessor(StatefulProcessor):
        def init(self, handle) -> None:
            from pyspark.sql import types as T

            self.handle = handle
            self.buffer = handle.getValueState("pending", T.StructType([T.StructField("rows", T.BinaryType())]))

        def handleInputRows(self, key, rows, timerValues):
            watermark = timerValues.getCurrentWatermarkInMs()
            pending = self._load()
            for batch in rows:
                for row in records(batch, integers):
                    at = _ms(row[time_column])
                    if at is None or at < watermark:  # late: at or below Flink's watermark (Spark's less 1 ms)
                        continue
                    pending.append(row)
                    self.handle.registerTimer(at + 1)  # fires once Flink's watermark (Spark's less 1 ms) reaches it
            self._store(pending)
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            import pandas as pd

            watermark = timerValues.getCurrentWatermarkInMs()
            # A stable sort: rows of equal time and keys stay in arrival order.
            pending = sorted(self._load(), key=lambda r: (_ms(r[time_column]), *[r[c] for c in order]))
            ready = [r for r in pending if _ms(r[time_column]) < watermark]  # Flink: <= Spark's less 1 ms
            out, start = matcher.run_decided(ready)
            self._store(ready[start:] + pending[len(ready):])
            if out:
                out = [{name: conform(value, kinds[name]) for name, value in row.items()} for row in out]
                yield pd.DataFrame(out, columns=names)

        def _load(self) -> list[dict]:
            stored = self.buffer.get()
            return pickle.loads(stored[0]) if stored is not None else []

        def _store(self, pending: list[dict]) -> None:
            if pending:
                self.buffer.update((pickle.dumps(pending),))
            else:
                self.buffer.clear()

        def close(self) -> None:
            pass

    keys = [f"`{k}`" for k in relation.spec.partition_by]
    frame, output, variants = variants_as_text(frame, output_schema(relation))
    grouped = frame.groupBy(*keys) if keys else frame.withColumn("__match_all", F.lit(0)).groupBy("__match_all")
    return texts_as_variants(grouped.transformWithStateInPandas(
        statefulProcessor=MatchProcessor(), outputStructType=output,
        outputMode="Append", timeMode="EventTime"), variants)


def _ms(value) -> int | None:
    if value is None:
        return None
    import datetime

    if isinstance(value, datetime.datetime):
        epoch = datetime.datetime(1970, 1, 1, tzinfo=value.tzinfo)
        return int((value - epoch) / datetime.timedelta(milliseconds=1))
    return int(value)
