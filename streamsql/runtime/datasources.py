"""Generated sources ('nexmark', 'datagen') as Spark Python data sources.

Rows are generated in the executors: the driver only splits a range of row numbers into
one partition per task, and each task builds Arrow record batches for its part. A row's
content depends only on its number and the seed, so a rerun, a retried task or a
restarted stream (whose offset is a row number) yields the same rows.

Streaming reads honour Spark's admission control: each micro-batch takes at most
``source.max-rows-per-batch`` rows, so a bounded run over many events is a sequence of
bounded micro-batches (the watermark advances between them and state stays small), and
``rows-per-second`` / ``rate.limited`` pace an unbounded source by the wall clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

UNBOUNDED = 1 << 62
DEFAULT_ROWS_PER_BATCH = 1_000_000


@dataclass
class RowRange(InputPartition):
    start: int
    end: int


def _split(start: int, end: int, parts: int) -> list[RowRange]:
    """[start, end) in ``parts`` contiguous ranges, in order (so read order is row order)."""
    parts = max(1, min(parts, end - start))
    bounds = [start + (end - start) * i // parts for i in range(parts + 1)]
    return [RowRange(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class _Generated(DataSource):
    """Common options: 'streamsql.partitions' (set by the runtime: tasks per read),
    'source.max-rows-per-batch' (rows per micro-batch)."""

    def generator(self, schema):
        """(total rows or None when unbounded, rows per wall-clock second or None, batches(start, end))."""
        raise NotImplementedError

    def reader(self, schema):
        total, _, batches = self.generator(schema)
        if total is None:
            raise ValueError("streamsql-unbounded-source")  # reported by runtime.failures
        return _BatchReader(total, batches, self._partitions())

    def streamReader(self, schema):
        total, rate, batches = self.generator(schema)
        per_batch = int(self.options.get("source.max-rows-per-batch", DEFAULT_ROWS_PER_BATCH))
        return _StreamReader(total, rate, batches, self._partitions(), per_batch)

    def _partitions(self) -> int:
        return int(self.options.get("streamsql.partitions", "2"))


class _BatchReader(DataSourceReader):
    def __init__(self, total: int, batches, partitions: int):
        self.total, self.batches, self.parts = total, batches, partitions

    def partitions(self):
        return _split(0, self.total, self.parts)

    def read(self, partition: RowRange):
        yield from self.batches(partition.start, partition.end)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, total, rate, batches, partitions: int, per_batch: int):
        self.total = UNBOUNDED if total is None else total
        self.rate, self.batches, self.parts, self.per_batch = rate, batches, partitions, per_batch
        self.target = None
        self.clock = None  # (wall time, offset) pacing started at

    def initialOffset(self):
        return {"row": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.per_batch)

    def prepareForTriggerAvailableNow(self):
        self.target = self.total

    def latestOffset(self, start, limit):
        begin = start["row"]
        end = self.total if self.target is None else self.target
        if self.rate is not None:
            if self.clock is None:
                self.clock = (time.time(), begin)
            began, first = self.clock
            end = min(end, first + int((time.time() - began) * self.rate))
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        elif isinstance(limit, ReadAllAvailable) and end >= UNBOUNDED:
            end = begin + self.per_batch
        return {"row": max(begin, end)}

    def partitions(self, start, end):
        return _split(start["row"], end["row"], self.parts)

    def read(self, partition: RowRange):
        yield from self.batches(partition.start, partition.end)

    def commit(self, end):
        pass


class NexmarkSource(_Generated):
    """'connector' = 'nexmark': Flink Nexmark's events (runtime.generators.nexmark)."""

    @classmethod
    def name(cls):
        return "streamsql_nexmark"

    def schema(self):
        from streamsql.runtime.generators.nexmark import SPARK_SCHEMA

        return SPARK_SCHEMA

    def generator(self, schema):
        from functools import partial

        from streamsql.runtime.generators.nexmark import generate, nexmark_config

        config = nexmark_config(self.options)
        rate = config.rate if self.options.get("rate.limited", "false").lower() == "true" else None
        return (config.events or None), rate, partial(generate, config)


class DatagenSource(_Generated):
    """'connector' = 'datagen': Flink's random/sequence generator (runtime.generators.datagen)."""

    @classmethod
    def name(cls):
        return "streamsql_datagen"

    def generator(self, schema):
        from functools import partial

        from streamsql.runtime.generators.datagen import DatagenSpec, generate

        spec = DatagenSpec.from_options(dict(self.options), schema)
        return spec.total, spec.rows_per_second, partial(generate, spec)


def register(spark) -> None:
    """Make the generated sources known to this Spark session."""
    spark.dataSource.register(NexmarkSource)  # every time: a flag on the Python session object
    spark.dataSource.register(DatagenSource)  # can outlive the session it was set for
