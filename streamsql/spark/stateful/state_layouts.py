"""How a bucket's state lives in Spark's state store when it is not kept in generations
(``generations``, where GroupAggregate, Rank, the regular join and ChangelogNormalize keep
theirs):

- ``blob`` (window aggregates, whose state the watermark bounds): one ValueState per bucket
  holding the bucket count and each table (accumulators, multisets) as Arrow IPC bytes
  (lz4): one state-store round trip per bucket and micro-batch, whatever the number of keys.
- ``rows`` (GroupAggregate's 'rows' layout): typed rows, a ListState per table (one element
  per key, or per key and value), readable with Spark's state data source; every element
  is pickled on its way to and from the JVM, so it costs per key.
- ``Tables`` (window Top-N and join): the blob of a bucket's tables, with an arrival counter.
- ``Pending`` (the temporal join's rows waiting for the watermark, bounded by it): the
  blob of those rows, with the watermark of the bucket's last call.

Shipped to Python workers by value with ``accumulate`` (pandas, pyarrow and pyspark only).
"""

from __future__ import annotations

import json

import pandas as pd
from pyspark.sql import types as T

from streamsql.spark.stateful import accumulate, state_bytes


class Tables:
    """A bucket's state for the operators that keep rows (window Top-N and join): one
    ValueState holding the bucket count, an arrival counter and each table as Arrow IPC bytes
    (NULL for none). ``load`` gives (next_seq, tables), ``store`` takes them;
    a bucket with no table left is cleared."""

    def __init__(self, handle, plan: dict, names: list[str], operator: str):
        self.plan, self.operator = plan, operator
        self.state = handle.getValueState("bucket", T.StructType([
            T.StructField("buckets", T.IntegerType(), False), T.StructField("next_seq", T.LongType(), False),
            *[T.StructField(name, T.BinaryType(), True) for name in names]]))
        self.count = len(names)

    def load(self) -> tuple[int, list]:
        stored = self.state.get()
        if stored is None:
            return 0, [None] * self.count
        _check_buckets(stored[0], self.plan, self.operator)
        return stored[1], [state_bytes.from_bytes(b) if b is not None else None for b in stored[2:]]

    def store(self, next_seq: int, tables: list, keep_counter: bool = False) -> None:
        """``keep_counter``: a bucket with no table left keeps its arrival counter (its
        operator's other state orders rows by it)."""
        if all(t is None for t in tables) and not keep_counter:
            self.state.clear()
        else:
            self.state.update((self.plan["buckets"], int(next_seq),
                               *[state_bytes.to_bytes(t) if t is not None else None for t in tables]))


class Pending:
    """A bucket's rows waiting for the watermark, as one value with the watermark of the
    bucket's last call (its operator's other state caught up to it: temporal_join). ``load``
    gives (that watermark or None, the rows or None), ``store`` takes them."""

    def __init__(self, handle, plan: dict, operator: str):
        self.plan, self.operator = plan, operator
        self.state = handle.getValueState("pending", T.StructType([
            T.StructField("buckets", T.IntegerType(), False), T.StructField("watermark", T.LongType(), False),
            T.StructField("rows", T.BinaryType(), True)]))

    def load(self) -> tuple[int | None, pd.DataFrame | None]:
        stored = self.state.get()
        if stored is None:
            return None, None
        _check_buckets(stored[0], self.plan, self.operator)
        return stored[1], state_bytes.from_bytes(stored[2]) if stored[2] is not None else None

    def store(self, watermark: int, rows: pd.DataFrame | None) -> None:
        self.state.update((self.plan["buckets"], int(watermark),
                           state_bytes.to_bytes(rows) if rows is not None else None))


def make(handle, plan: dict):
    return (RowsLayout if plan.get("layout") == "rows" else BlobLayout)(handle, plan)


def _check_buckets(stored: int, plan: dict, operator: str = "GroupAggregate") -> None:
    if stored != plan["buckets"]:
        raise ValueError(f"This checkpoint's {operator} state has {stored} buckets, "
                         f"the query asks for {plan['buckets']}: restart with the same count")


class BlobLayout:
    def __init__(self, handle, plan: dict):
        self.plan = plan
        fields = [T.StructField("buckets", T.IntegerType(), False), T.StructField("acc", T.BinaryType(), False)]
        tables = len(plan["multisets"]) + len(plan.get("sequences", []))  # (accumulate.sequences after them)
        fields += [T.StructField(f"ms{j}", T.BinaryType(), False) for j in range(tables)]
        self.state = handle.getValueState("bucket", T.StructType(fields))
        self.present = False

    def load(self):
        stored = self.state.get()
        self.present = stored is not None
        if stored is None:
            return None
        _check_buckets(stored[0], self.plan)
        return accumulate.decode(stored[1:])

    def store(self, state) -> None:
        if state is not None:
            self.state.update((self.plan["buckets"], *accumulate.encode(state)))
        elif self.present:
            self.state.clear()


class RowsLayout:
    def __init__(self, handle, plan: dict):
        self.plan = plan
        self.schemas = [T.StructType.fromJson(json.loads(s)) for s in [plan["acc_schema"], *plan["ms_schemas"]]]
        self.kinds = [dict(k) for k in [plan["acc_kinds"], *plan["ms_kinds"]]]
        self.meta = handle.getValueState("buckets", T.StructType([T.StructField("buckets", T.IntegerType(), False)]))
        self.lists = [handle.getListState(f"t{j}", schema) for j, schema in enumerate(self.schemas)]
        self.present = False

    def load(self):
        stored = self.meta.get()
        self.present = stored is not None
        if stored is None:
            return None
        _check_buckets(stored[0], self.plan)
        frames = []
        for lst, schema, kinds in zip(self.lists, self.schemas, self.kinds):
            rows = list(lst.get())
            columns = list(zip(*rows)) if rows else [()] * len(schema.names)
            # column by column: a DataFrame of the tuples would make an integer column with a
            # NULL float64 first, and a BIGINT past 2^53 would lose digits
            frame = pd.DataFrame({name: pd.array(list(values), dtype="Int64") if kinds[name] == "int"
                                  else pd.Series(list(values), dtype=None if values else object)
                                  for name, values in zip(schema.names, columns)})
            for name in schema.names:
                frame[name] = accumulate.canonical(frame[name], kinds[name])
            frames.append(frame)
        return accumulate.BucketState(frames[0], frames[1:])

    def store(self, state) -> None:
        if state is None:
            if self.present:
                self.meta.clear()
                for lst in self.lists:
                    lst.clear()
            return
        if not self.present:
            self.meta.update((self.plan["buckets"],))
        for lst, schema, frame in zip(self.lists, self.schemas, [state.acc, *state.multisets]):
            frame = frame[schema.names].astype(object)
            rows = list(frame.where(frame.notna(), None).itertuples(index=False, name=None))
            if rows:
                lst.put(rows)
            else:
                lst.clear()
