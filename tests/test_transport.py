"""How rows reach a stateful operator (spark.stateful.transport), without Spark: a task's
Arrow batches packed per bucket, then a bucket's values unpacked, must give the bucket's rows
in their order, with the dtypes the operators take (Spark's worker gave those before), and
integers exact where a column has a NULL."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from streamsql.spark.stateful import transport

SCHEMA = T.StructType([T.StructField(name, kind) for name, kind in [
    ("id", T.LongType()), ("maybe", T.LongType()), ("small", T.IntegerType()), ("f", T.FloatType()),
    ("d", T.DoubleType()), ("s", T.StringType()), ("ok", T.BooleanType()), ("amount", T.DecimalType(10, 2)),
    ("ts", T.TimestampType()), ("tags", T.ArrayType(T.LongType())), ("__bucket", T.IntegerType())]])


def _rows(rng: random.Random, n: int) -> list[tuple]:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return [(2 ** 60 + 2 * i + 1, None if rng.random() < 0.3 else 2 ** 55 + i, rng.randint(-5, 5),
             rng.choice([0.1, 1.5]), rng.random(), rng.choice(["a", None, "ß"]), rng.choice([True, False]),
             decimal.Decimal(rng.randint(0, 9999)) / 100, start + dt.timedelta(milliseconds=rng.randint(0, 10 ** 6)),
             [i, i + 1], rng.randint(0, 4)) for i in range(n)]


def _batches(rows: list[tuple], size: int) -> list[pa.RecordBatch]:
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    return [pa.RecordBatch.from_arrays([pa.array(list(column), type=field.type)
                                        for column, field in zip(zip(*rows[i:i + size]), schema)], schema=schema)
            for i in range(0, len(rows), size)]


@pytest.mark.parametrize("seed, flush", [(0, "FLUSH_ROWS"), (1, "FLUSH_BYTES"), (2, "FLUSH_ROWS")])
def test_each_bucket_unpacks_to_its_rows_in_their_order(seed, flush, monkeypatch):
    rng = random.Random(seed)
    rows = _rows(rng, 500)
    monkeypatch.setattr(transport, flush, 180 if flush == "FLUSH_ROWS" else 20_000)  # flushed more than once
    packed = list(transport.Pack(len(SCHEMA) - 1, "__bucket", 2)(iter(_batches(rows, 70))))
    shuffled = transport.aligned(5, 2)  # (buckets 0-4 on 2 partitions: the task extends its values)
    values: dict[int, list] = {}
    for batch in packed:
        assert batch.schema.names == ["__bucket", transport.ROWS]
        for bucket, value in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            values.setdefault(bucket, []).append(value)
    assert 1 < len(packed) and sum(len(b) for b in packed) < len(rows) / 10  # per bucket and flush, not per row
    assert set(values) == set(shuffled)
    for bucket, parts in values.items():
        frame = transport.unpack(parts, SCHEMA.json(), "UTC")
        expected = [r for r in rows if shuffled[r[-1]] == bucket]
        assert frame["id"].tolist() == [r[0] for r in expected]  # exact past 2^53, in order
        assert [None if v is pd.NA else v for v in frame["maybe"]] == [r[1] for r in expected]
        assert str(frame["maybe"].dtype) == "Int64" and str(frame["small"].dtype) == "int64"
        assert str(frame["f"].dtype) == "float64" and frame["f"].round(6).tolist() == [r[3] for r in expected]
        assert frame["s"].tolist() == [r[5] for r in expected]
        assert frame["amount"].tolist() == [r[7] for r in expected]
        assert [t.to_pydatetime() for t in frame["ts"]] == [r[8].replace(tzinfo=None) for r in expected]
        assert [list(t) for t in frame["tags"]] == [r[9] for r in expected]


def test_no_rows_pack_to_nothing():
    assert list(transport.Pack(0, "b", 2)(iter([]))) == []


def test_spark_hash_is_sparks():
    """Test vectors: Spark's own ``SELECT hash(CAST(v AS INT))`` (also checked on Spark below)."""
    vectors = {0: 933211791, 1: -559580957, -1: -1604776387, 42: 29417773, 2 ** 31 - 1: 133916647,
               -2 ** 31: 723455942, 123456789: -598405280}
    assert {v: transport.spark_hash(v) for v in vectors} == vectors


@pytest.mark.parametrize("partitions", [1, 2, 3, 8, 200])
def test_each_bucket_is_shuffled_under_a_value_of_its_own_partition(partitions):
    values = transport.aligned(3 * partitions, partitions)
    assert len(set(values)) == len(values) and min(values) >= 0
    assert [transport.spark_hash(v) % partitions for v in values] == [b % partitions for b in range(len(values))]
    assert transport.aligned(partitions, partitions) == values[:partitions]  # more buckets extend fewer


def test_spark_shuffles_each_bucket_to_its_own_partition(spark):
    """Spark's own hash partitioning (a shuffle by the value, as transformWithStateInPandas's
    grouping shuffles) puts bucket b's value in partition b mod partitions."""
    from pyspark.sql import functions as F

    for partitions in (2, 3, 7, 16):
        values = transport.aligned(2 * partitions, partitions)
        frame = spark.createDataFrame([(v,) for v in values], "v INT").repartition(partitions, "v")
        placed = dict(frame.select("v", F.spark_partition_id()).collect())
        assert [placed[v] for v in values] == [b % partitions for b in range(len(values))]


CHILD = """
import json, pickle, sys
wrapped, packed = pickle.load(open(sys.argv[1], "rb"))

class State:
    def __init__(self):
        self.value = None
    def get(self):
        return self.value
    def update(self, value):
        self.value = value
    def clear(self):
        self.value = None

class Map:
    def __init__(self):
        self.entries = {}
    def getValue(self, key):
        return self.entries.get(key)
    def updateValue(self, key, value):
        self.entries[key] = value
    def removeKey(self, key):
        self.entries.pop(key, None)

class Handle:
    def __init__(self):
        self.declared = []
    def getValueState(self, name, schema, *rest):
        self.declared.append(name)
        return State()
    def getMapState(self, name, key_schema, value_schema, *rest):
        self.declared.append(name)
        return Map()

handle = Handle()
wrapped.init(handle)
loaded = sorted(m for m in ("pandas", "pyarrow", "numpy") if m in sys.modules)
import pandas as pd
outs = []
for batch in packed:
    frame = pd.DataFrame({"__bucket": [0], "__rows": [batch]})
    outs += [tuple(r) for out in wrapped.handleInputRows((0,), iter([frame]), None) for r in out.itertuples(index=False)]
print(json.dumps({"loaded": loaded, "declared": handle.declared, "out": outs}, default=int))
"""


@pytest.mark.spark  # starts a process
def test_the_driver_declares_an_operators_state_without_loading_it(tmp_path):
    """Spark runs a processor's init in a Python process of the driver to learn its state: the
    wrapper declares it from what was recorded, without unpickling the operator (and pandas);
    the workers load the operator on its first rows and fold them into the declared state."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from streamsql.spark.stateful import ship_by_value
    from streamsql.spark.stateful.group_aggregate import GroupAggregateProcessor, build_plan
    from streamsql.spark.stateful.specs import AggSpec

    schema = T.StructType([T.StructField("__h", T.LongType()), T.StructField("k", T.StringType()),
                           T.StructField("v", T.LongType()), T.StructField("__bucket", T.IntegerType())])
    plan, _ = build_plan(schema, ["__h", "k"], [AggSpec("SUM", "v", output_name="s")])
    plan.update(buckets=1, layout="generations", ttl_ms=None, columns=["__h", "k", "v", "__bucket"])
    ship_by_value(sys.modules[transport.__name__])
    wrapped = transport.wrap(GroupAggregateProcessor(plan), schema.json(), "UTC")
    arrow = to_arrow_schema(schema, timezone="UTC")
    batches = [pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, arrow)], schema=arrow)
               for columns in ([[11, 22, 11], ["a", "b", "a"], [1, 2, 3], [0, 0, 0]], [[22], ["b"], [5], [0]])]
    packed = [batch.column(1)[0].as_py() for b in batches for batch in transport.Pack(3, "__bucket", 1)(iter([b]))]
    (tmp_path / "wrapped.pickle").write_bytes(cloudpickle.dumps((wrapped, packed)))
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "wrapped.pickle")], capture_output=True,
                          text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})  # (no PYTHONPATH: by value)
    assert done.returncode == 0, done.stderr
    result = __import__("json").loads(done.stdout)
    assert result["loaded"] == [] and result["declared"] == ["index", "generations"]
    assert sorted(map(tuple, result["out"])) == [("+I", "a", 4), ("+I", "b", 2), ("+U", "b", 7), ("-U", "b", 2)]


FREEZING_CHILD = r"""
import gc, json, sys
import pyarrow as pa
from pyspark.sql import types as T
from streamsql.spark.stateful import transport

schema = T.StructType([T.StructField("v", T.LongType()), T.StructField("__bucket", T.IntegerType())])
batch = pa.RecordBatch.from_arrays([pa.array([1, 2]), pa.array([0, 0], type=pa.int32())], names=["v", "__bucket"])
before = gc.get_freeze_count()
packed = [b.column(1)[0].as_py() for b in transport.Pack(1, "__bucket", 1)(iter([batch]))]
first = gc.get_freeze_count()
later = [[i] for i in range(10_000)]  # what a later task makes
frame = transport.unpack(packed, schema.json(), "UTC")
print(json.dumps({"before": before, "first": first, "then": gc.get_freeze_count(), "rows": len(frame)}))
"""


@pytest.mark.spark  # starts a process
def test_a_worker_freezes_its_heap_once():
    """Spark's Python worker runs a full gc.collect() after every task; the objects a worker
    holds when its first rows come are frozen out of the collector's sight, once: what later
    tasks make stays collectable (a freeze at every task would keep their garbage forever)."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FREEZING_CHILD], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["before"] == 0 and counts["first"] > 10_000 and counts["rows"] == 2
    assert counts["then"] <= counts["first"]  # (frozen objects freed since leave it; a second freeze adds `later`)
