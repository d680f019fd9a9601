"""A bounded read as a Spark Python streaming source of one micro-batch.

A bounded table in an unbounded query (a jdbc table, a Delta snapshot, VALUES beside a
stream) must be a stream too, or Spark refuses to union or join it with one. Its rows are
then one micro-batch: offset 0 before it, 1 after, so a restarted job, whose checkpoint
holds the 1, does not read them again.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow


class OneMicroBatch(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of one micro-batch; ``parts()`` are its tasks (InputPartitions)."""

    def parts(self) -> list:
        raise NotImplementedError

    def initialOffset(self):
        return {"scanned": 0}

    def latestOffset(self, start=None, limit=None):
        return {"scanned": 1}

    def prepareForTriggerAvailableNow(self):
        pass

    def partitions(self, start, end):
        return self.parts() if start["scanned"] < end["scanned"] else []

    def commit(self, end):
        pass
