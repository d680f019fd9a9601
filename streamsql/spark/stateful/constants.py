"""A bounded side of a streaming operator (VALUES, a constant subquery) read as a stream.

Flink reads VALUES as a bounded source beside the stream: its rows arrive once, at the
start. Spark refuses to union a batch DataFrame with a streaming one ("Union between
streaming and batch DataFrames/Datasets is not supported"), which a join operator's
input is (``join.both_sides``). ``streamed`` collects the bounded side (it is small:
constants) and reads it back through a Python streaming data source whose only
micro-batch holds those rows: offset 0 before, 1 after, so a resumed job does not read them
again (its checkpoint holds the committed offset).
"""

from __future__ import annotations

import base64
import json

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamsql.spark.one_batch import OneMicroBatch

NAME = "streamsql_constant"


def streamed(spark, frame):
    """``frame`` itself if streaming, else its rows as a stream of one micro-batch."""
    if frame.isStreaming:
        return frame
    spark.dataSource.register(ConstantSource)  # every time (a session's id can be reused)
    table = frame.toArrow()
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    rows = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    return (spark.readStream.format(NAME).option("schema", frame.schema.json()).option("rows", rows).load())


class ConstantSource(DataSource):
    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.options["schema"]))

    def reader(self, schema):
        return _Reader(self.options["rows"])

    def streamReader(self, schema):
        return _StreamReader(self.options["rows"])


def _batches(rows: str):
    import pyarrow as pa

    yield from pa.ipc.open_stream(base64.b64decode(rows)).read_all().to_batches()


class _Reader(DataSourceReader):
    def __init__(self, rows: str):
        self.rows = rows

    def read(self, partition):
        yield from _batches(self.rows)


class _StreamReader(OneMicroBatch):
    def __init__(self, rows: str):
        self.rows = rows

    def parts(self):
        return [InputPartition(0)]

    def read(self, partition):
        yield from _batches(self.rows)
