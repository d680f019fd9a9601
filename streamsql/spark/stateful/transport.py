"""How a micro-batch's rows reach a stateful operator's Python worker: a bucket's rows packed
as one Arrow IPC value (#10).

Spark's ``transformWithStateInPandas`` worker turns its input into pandas row by row: it
iterates each Arrow batch's rows as tuples to find where a grouping key's rows end, then
builds a DataFrame back from those tuples. For the many rows of a few buckets that is most of
the cost of getting rows to the operator, and an integer column with a NULL comes out as
float64 on the way. So the rows travel packed instead:

1. ``Pack`` (``mapInArrow``, in the task that produced the rows, before the shuffle): the
   task's rows, ordered by bucket (stably: a bucket's rows keep their order), each bucket's
   as one Arrow IPC value — a row ``(__bucket, __rows)``, the bucket as the value it is
   shuffled under (``aligned``).
2. Spark shuffles and groups those few rows by bucket, as it grouped the rows before.
   Spark sends a grouping value to the shuffle partition its Murmur3 hash picks, so buckets
   0..n-1 would land on partitions at random: some partitions with two, some idle. Each
   bucket is therefore shuffled under a value chosen so that bucket ``b`` lands in partition
   ``b mod partitions`` (``aligned``): with one bucket per partition (the default), every
   task folds one bucket, one call per micro-batch and operator, and every core has one.
3. ``Unpacked`` wraps the operator's processor: it reads a bucket's values back into one
   pandas DataFrame with the columns and dtypes the worker gave before (Spark's own Arrow
   conversion, integers as int64 — nullable Int64, exact, where a column has a NULL — and
   FLOAT as float64) and hands the processor that frame.

Nothing of an operator changes: its state, timers, lateness (Flink's rules, its own) and
output are as they were.

Shipped to Python workers by value with the operators (with ``state_bytes``; pyarrow, pandas
and pyspark only).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.spark.stateful import state_bytes

ROWS = "__rows"
# A task packs at most this many rows, or bytes, at once: the memory a task holds, and one
# value far below the 2 GiB an Arrow binary column (and a Spark value) can hold
FLUSH_ROWS = 1_000_000
FLUSH_BYTES = 128 * 1024 * 1024


def transform(bucketed: DataFrame, bucket: str, processor: StatefulProcessor, output: T.StructType,
              time_mode: str) -> DataFrame:
    """``bucketed.groupBy(bucket).transformWithStateInPandas(processor, ...)``, the rows packed
    on their way: the processor gets each bucket's rows as one DataFrame of ``bucketed``'s
    columns."""
    from streamsql.spark.stateful import ship_by_value, shuffle_partitions
    import sys

    ship_by_value(sys.modules[__name__])  # (state_bytes: shipped with every operator)
    bucketed, output, variants = variants_as_text(bucketed, output)
    schema = bucketed.schema
    packed = bucketed.mapInArrow(Pack(schema.names.index(bucket), bucket, shuffle_partitions(bucketed)), T.StructType([
        T.StructField(bucket, T.IntegerType(), True), T.StructField(ROWS, T.BinaryType(), False)]))
    timezone = bucketed.sparkSession.conf.get("spark.sql.session.timeZone")
    return texts_as_variants(packed.groupBy(bucket).transformWithStateInPandas(
        statefulProcessor=wrap(processor, schema.json(), timezone), outputStructType=output,
        outputMode="Append", timeMode=time_mode), variants)


def variants_as_text(frame: DataFrame, output: T.StructType) -> tuple[DataFrame, T.StructType, list[str]]:
    """``frame`` with its VARIANT columns as their JSON text, and ``output`` with its VARIANT
    columns as STRINGs: Arrow, and so a pandas operator, has no VARIANT. The values come back
    through ``texts_as_variants`` (the same value, but for a DOUBLE written without an exponent:
    ``1e3`` comes back as 1000, where JSON_STRING wrote 1000.0)."""
    from pyspark.sql import functions as F

    names = [f.name for f in frame.schema.fields if isinstance(f.dataType, T.VariantType)]
    if not names:
        return frame, output, []
    frame = frame.withColumns({name: F.to_json(F.col(f"`{name}`")) for name in names})
    fields = [T.StructField(f.name, T.StringType(), f.nullable) if isinstance(f.dataType, T.VariantType) else f
              for f in output.fields]
    return frame, T.StructType(fields), [f.name for f in output.fields if isinstance(f.dataType, T.VariantType)]


def texts_as_variants(frame: DataFrame, names: list[str]) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.withColumns({name: F.parse_json(F.col(f"`{name}`")) for name in names}) if names else frame


def spark_hash(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of an INT (Murmur3 x86 32-bit, seed 42): what its HashPartitioning
    sends a grouping value to a shuffle partition by (``pmod(hash(value), partitions)``)."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl((seed & mask) ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4  # (the input's length in bytes)
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def aligned(buckets: int, partitions: int) -> list[int]:
    """For each bucket ``b``, the value its rows are shuffled under: distinct values, the one of
    ``b`` landing in shuffle partition ``b mod partitions`` (the smallest such values, so the
    mapping depends on the two counts alone and a resumed query finds its state)."""
    waiting: dict[int, list[int]] = {}
    for b in reversed(range(buckets)):
        waiting.setdefault(b % partitions, []).append(b)
    values, value = [0] * buckets, 0
    while waiting:
        partition = spark_hash(value) % partitions
        if partition in waiting:
            values[waiting[partition].pop()] = value
            if not waiting[partition]:
                del waiting[partition]
        value += 1
    return values


class Pack:
    """mapInArrow: a task's rows as ``(bucket, Arrow IPC of the bucket's rows)``, the bucket as
    the value it is shuffled under (``aligned``)."""

    def __init__(self, bucket_index: int, bucket: str, partitions: int):
        self.bucket_index, self.bucket, self.partitions = bucket_index, bucket, partitions
        self.values = np.asarray(aligned(partitions, partitions), dtype="int64")  # (extended for more buckets)

    def __call__(self, batches):
        state_bytes.settle_worker_heap()
        pending, count, size = [], 0, 0
        for batch in batches:
            if batch.num_rows:
                pending.append(batch)
                count, size = count + batch.num_rows, size + batch.nbytes
            if count >= FLUSH_ROWS or size >= FLUSH_BYTES:
                yield self.pack(pending)
                pending, count, size = [], 0, 0
        if pending:
            yield self.pack(pending)

    def pack(self, batches):
        import pyarrow as pa

        table = pa.Table.from_batches(batches).combine_chunks()
        buckets = table.column(self.bucket_index).to_numpy(zero_copy_only=False)
        order = np.argsort(buckets, kind="stable")
        table, buckets = table.take(pa.array(order)), buckets[order]
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        ends = np.r_[starts[1:], len(buckets)]
        values = [state_bytes.ipc_bytes(table.slice(start, end - start)) for start, end in zip(starts, ends)]
        return pa.RecordBatch.from_arrays(
            [pa.array(self.shuffled(buckets[starts]), type=pa.int32()), pa.array(values, type=pa.binary())],
            names=[self.bucket, ROWS])

    def shuffled(self, buckets):
        """The values ``buckets`` are shuffled under (``aligned``, for as many buckets as seen)."""
        top = int(buckets.max()) + 1
        if len(self.values) < top:  # (``aligned`` of more buckets extends that of fewer)
            self.values = np.asarray(aligned(top, self.partitions), dtype="int64")
        return self.values[buckets]


def unpack(values, schema_json: str, timezone: str) -> pd.DataFrame:
    """A bucket's packed values as one DataFrame, converted as Spark's worker converted rows
    (its own Arrow-to-pandas conversion; the small integers as int64 and FLOAT as float64, as
    the worker's Python tuples widened them), but an integer column with a NULL as nullable
    Int64, exact, where the worker's was float64."""
    import json

    import pyarrow as pa
    from pyspark.sql.conversion import ArrowBatchTransformer

    state_bytes.settle_worker_heap()
    table = pa.concat_tables([state_bytes.ipc_table(v) for v in values])
    schema = T.StructType.fromJson(json.loads(schema_json))
    columns = ArrowBatchTransformer.to_pandas(table, timezone=timezone, schema=schema)
    frame = pd.concat(columns, axis=1) if columns else pd.DataFrame()
    frame.columns = schema.names
    for field, column in zip(schema.fields, table.columns):
        if isinstance(field.dataType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            frame[field.name] = state_bytes.nullable_ints(column) if column.null_count else frame[field.name].astype("int64")
        elif isinstance(field.dataType, T.FloatType):
            frame[field.name] = frame[field.name].astype("float64")
    return frame


class Unpacked(StatefulProcessor):
    """The operator's processor, handed each bucket's rows unpacked as one DataFrame.

    Spark runs a processor's ``init`` twice: in a Python process of the driver when it plans
    the query's first micro-batch (to learn the state it declares; one process per stateful
    operator, one after another), and in the workers. The operator travels pickled inside
    this wrapper (``payload``, loaded on its first rows) and its state declarations beside it
    (``declared``, recorded once on the driver by ``wrap``), so the driver's process declares
    the state without loading the operator, and with it pandas and pyarrow: 0.5-0.7 s of
    imports per operator before the first micro-batch. The methods below refer to no module
    of streamsql's (this class travels by value): what they need is in the payload."""

    def __init__(self, declared: list, payload: bytes, schema_json: str, timezone: str):
        self.declared, self.payload, self.schema_json, self.timezone = declared, payload, schema_json, timezone
        self.inner = self.unpack = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.made = {name: getattr(handle, method)(*args, **kwargs) for method, name, args, kwargs in self.declared}
        self.inner = self.unpack = None

    def _load(self):
        if self.inner is None:
            import pickle

            inner, self.unpack, replayed = pickle.loads(self.payload)
            inner.init(replayed(self.handle, self.made))
            self.inner = inner
        return self.inner

    def handleInputRows(self, key, rows, timerValues):
        inner = self._load()
        # (bucket, rows) by position: Spark's worker renames a column with a leading '_'
        values = [value for frame in rows for value in frame.iloc[:, 1]]
        if values:
            yield from inner.handleInputRows(key, iter([self.unpack(values, self.schema_json, self.timezone)]),
                                             timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield from self._load().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


DECLARES = ("getValueState", "getListState", "getMapState")


class Declarations:
    """A handle that records the state an operator's ``init`` declares (run on the driver)."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __getattr__(self, method: str):
        if method not in DECLARES:
            raise AttributeError(f"{method}: an operator's init only declares its state")

        def declare(*args, **kwargs):
            self.calls.append((method, args[0] if args else kwargs["stateName"], args, kwargs))

        return declare


class Replayed:
    """The worker's handle, giving back the state ``Unpacked.init`` declared for each name."""

    def __init__(self, handle, made: dict):
        self._handle, self._made = handle, made

    def __getattr__(self, method: str):
        if method not in DECLARES:
            return getattr(self._handle, method)
        return lambda *args, **kwargs: self._made[args[0] if args else kwargs["stateName"]]


def wrap(inner: StatefulProcessor, schema_json: str, timezone: str) -> Unpacked:
    """``inner`` wrapped for packed rows: its declarations recorded, itself pickled."""
    from pyspark import cloudpickle

    payload = cloudpickle.dumps((inner, unpack, Replayed))  # (before init sets anything on it)
    recorder = Declarations()
    inner.init(recorder)
    return Unpacked(recorder.calls, payload, schema_json, timezone)
