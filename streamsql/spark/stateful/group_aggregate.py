"""GroupAggregate with retractions: an updating aggregate emitted as a changelog (#10).

Spark's streaming aggregate can only emit its result table (update/complete mode); Flink's
GroupAggregate emits a changelog: ``+I`` for a key's first result, ``-U`` (old) then ``+U``
(new) when its results change, ``-D`` when its last row is retracted, nothing when an update
leaves the results as they were. This builds that operator on ``transformWithStateInPandas``.

Many keys per call: one call per group key runs at a twentieth of Spark's native aggregate,
so the keys are hashed into ``buckets`` (``pmod(xxhash64(keys), buckets)``), the operator
groups by the bucket, and one call folds all of a bucket's keys in a micro-batch with
vectorised pandas (``accumulate.fold``). A bucket's state — its accumulator table and
MIN/MAX/DISTINCT multisets — lives in Spark's state store (RocksDB, checkpointed), so a
query restarted from its checkpoint resumes, in generations (``generations``): a
micro-batch reads and writes the state of the keys it brings, not the whole bucket, and of
a COUNT/SUM/AVG DISTINCT only the (key, value) pairs it brings (``distinct_pairs``).

The bucket count is part of the checkpoint's state layout (a key's bucket decides where
its state lives): a query restarted on a checkpoint must use the same count, which each
bucket's state records and checks (a bucket that had no state cannot tell). How many: one
per shuffle partition, each shuffled to a partition of its own (``transport.aligned``).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.errors import ValidationError
from streamsql.spark.stateful import (accumulate, default_buckets, distinct_pairs, generations, python_aggregates,
                                      state_layouts, transport)
from streamsql.spark.stateful.sequences import COUNT as DISTINCT_COUNT
from streamsql.spark.stateful.specs import INSERT_ONLY, ORDERED, SEQUENCED, SPREADS, AggSpec, int_bits, result_type, value_kind

BUCKET = "__bucket"
GLOBAL_KEY = "__global"  # the one key of an aggregate without GROUP BY


def group_aggregate(frame: DataFrame, keys: list[str], aggregates: list[AggSpec],
                    buckets: int | None = None, layout: str = "generations", ttl_ms: int | None = None,
                    update_before: bool = True) -> DataFrame:
    """The changelog of ``SELECT keys, aggregates FROM frame GROUP BY keys``: a streaming
    DataFrame (append mode) of ``__rowkind``, the keys, then the aggregates. ``frame`` is
    insert-only or a changelog (a ``__rowkind`` column: +I/+U add a row, -U/-D retract one).
    ``buckets`` defaults to ``spark.sql.shuffle.partitions``; ``layout`` is how the state
    is stored ('generations', or 'rows': ``state_layouts``); with ``ttl_ms`` a key's state expires that
    long after its last change (accumulate.fold). ``update_before`` False: no ``-U`` rows (the
    consumer takes UPDATE_AFTER only, plan.update_kinds)."""
    if buckets is None:
        buckets = default_buckets(frame)
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    keys = list(keys)
    if not keys:
        frame, keys, drop = frame.withColumn(GLOBAL_KEY, F.lit(0)), [GLOBAL_KEY], True
    else:
        drop = False
    if layout not in ("generations", "rows"):
        raise ValueError(f"layout must be 'generations' or 'rows', not {layout!r}")
    hashed = layout == "generations"  # each key's hash is a key of its state rows
    if hashed:
        frame = frame.withColumn(generations.HASH, F.xxhash64(*[F.col(f"`{k}`") for k in keys]))
    plan, output = build_plan(frame.schema, [generations.HASH, *keys] if hashed else keys, aggregates)
    if hashed:
        output = T.StructType([f for f in output.fields if f.name != generations.HASH])
    plan["buckets"] = buckets
    plan["layout"] = layout
    plan["paired"] = distinct_pairs.paired(plan["aggs"], plan["multisets"]) if hashed else []
    plan["update_before"] = bool(update_before)
    plan["ttl_ms"] = ttl_ms if hashed else None  # the typed 'rows' layout keeps no change times
    first = [ROWKIND_COLUMN] if plan["rowkind"] else []
    bucketed, plan["columns"] = bucketed_input(frame, first + ([generations.HASH] if hashed else []) + keys,
                                               aggregates, keys, buckets)
    _ship_by_value()
    result = transport.transform(bucketed, BUCKET, GroupAggregateProcessor(plan), output, "None")
    return result.drop(GLOBAL_KEY) if drop else result


def bucketed_input(frame: DataFrame, leading: list[str], aggregates: list[AggSpec], hashed: list[str],
                   buckets: int, trailing: list[str] = ()) -> tuple[DataFrame, list[str]]:
    """The columns an aggregate reads, once each — ``leading`` (row kind, keys), the calls'
    arguments and FILTER columns, ``trailing`` — then ``BUCKET``, the hash of ``hashed``
    modulo ``buckets``; and those columns' names, in the order the processor gets them."""
    columns: list[str] = []
    for name in [*leading, *[c for a in aggregates for c in (a.column, *a.columns)],
                 *[a.filter_column for a in aggregates], *trailing]:
        if name is not None and name not in columns:
            columns.append(name)
    hashes = [F.col(f"`{k}`") for k in hashed] or [F.lit(0)]
    bucketed = frame.select(*[F.col(f"`{c}`") for c in columns]).withColumn(
        BUCKET, F.pmod(F.xxhash64(*hashes), F.lit(buckets)).cast("int"))
    return bucketed, columns + [BUCKET]


def build_plan(schema: T.StructType, keys: list[str], aggregates: list[AggSpec]) -> tuple[dict, T.StructType]:
    """The processor's configuration (a plain dict, see ``accumulate``) and the output schema."""
    fields = {f.name: f for f in schema.fields}
    for name in keys + [c for a in aggregates for c in (a.column, *a.columns) if c] + \
            [a.filter_column for a in aggregates if a.filter_column]:
        if name not in fields:
            raise ValueError(f"Column {name!r} is not in the input ({', '.join(fields)})")
    for a in aggregates:
        if a.filter_column and not isinstance(fields[a.filter_column].dataType, T.BooleanType):
            raise ValueError(f"FILTER column {a.filter_column!r} must be BOOLEAN")
    names = [a.name for a in aggregates]
    if len(set(names)) != len(names) or set(names) & set(keys):
        raise ValueError(f"Output names must be distinct from each other and from the keys: {names}")
    multisets: list[tuple] = []
    sequences: list[tuple] = []  # (column, filter, kind, keep_nulls): accumulate.sequences
    aggs = []
    out_fields = [T.StructField(ROWKIND_COLUMN, T.StringType(), False)]
    out_fields += [T.StructField(k, fields[k].dataType, True) for k in keys]
    for a in aggregates:
        in_type = fields[a.column].dataType if a.column else None
        out_type = result_type(a, in_type)
        kind = value_kind(in_type) if in_type is not None else "int"
        ms = None
        if a.uses_multiset(ROWKIND_COLUMN in fields):
            entry = (a.column, a.filter_column, kind)
            if entry not in multisets:
                multisets.append(entry)
            ms = multisets.index(entry)
        seq = None
        if a.function in SEQUENCED or a.distinct and a.function in ORDERED or \
                (a.function in INSERT_ONLY and ROWKIND_COLUMN in fields):  # retractions take values out
            entry = (a.column, a.filter_column, kind, a.function == "ARRAY_AGG" and not a.ignore_nulls,
                     a.distinct and a.function in ORDERED)
            if entry not in sequences:
                sequences.append(entry)
            seq = sequences.index(entry)
        if a.python is not None and ROWKIND_COLUMN in fields and not a.python.retracts:
            raise ValidationError(f"Function {a.python.name} cannot take rows back: its input is an updating one,"
                                  " and its AggregateFunction defines no retract(accumulator, *args)")
        aggs.append({"function": a.function, "column": a.column, "distinct": a.distinct, "seq": seq,
                     "columns": list(a.columns),
                     "python": python_aggregates.folder(a.python, len(a.columns), a.distinct) if a.python else None,
                     "udaf": a.python.name if a.python else None,
                     "result": out_type.simpleString() if a.python else None,
                     "filter": a.filter_column, "kind": kind, "ms": ms, "name": a.name, "separator": a.separator,
                     "ignore_nulls": a.ignore_nulls,
                     "out_kind": value_kind(out_type), "out_bits": int_bits(out_type),
                     "out_single": isinstance(out_type, T.FloatType),
                     "out_scale": out_type.scale if isinstance(out_type, T.DecimalType) else None})
        out_fields.append(T.StructField(a.name, out_type, True))
    plan = {"keys": [(k, value_kind(fields[k].dataType)) for k in keys],
            "rowkind": ROWKIND_COLUMN in fields, "aggs": aggs, "multisets": multisets, "sequences": sequences}
    plan.update(_state_schemas(fields, keys, aggregates, aggs, out_fields, multisets, sequences))
    return plan, T.StructType(out_fields)


def _state_schemas(fields, keys, aggregates, aggs, out_fields, multisets, sequences) -> dict:
    """Typed schemas of the state tables (the 'rows' layout), in accumulate's column order."""
    key_fields = [T.StructField(k, fields[k].dataType, True) for k in keys]
    acc = key_fields + [T.StructField(accumulate.CNT, T.LongType(), True)]
    for i, (a, agg) in enumerate(zip(aggregates, aggs)):
        if agg["ms"] is not None or agg["seq"] is not None:
            continue
        if a.function == "COUNT":
            acc.append(T.StructField(f"__c{i}", T.LongType(), True))
        elif a.python is not None:  # the accumulator, pickled (python_aggregates)
            acc.append(T.StructField(f"__u{i}", T.BinaryType(), True))
        elif a.function in ("SUM", "AVG"):
            in_type = fields[a.column].dataType
            sum_type = {"int": T.LongType(), "float": T.DoubleType()}.get(agg["kind"])
            sum_type = sum_type or T.DecimalType(38, getattr(in_type, "scale", 0))
            acc += [T.StructField(f"__n{i}", T.LongType(), True), T.StructField(f"__s{i}", sum_type, True)]
        elif a.function in SPREADS:
            acc += [T.StructField(f"__n{i}", T.LongType(), True),
                    *[T.StructField(f"__{c}{i}", T.DoubleType(), True) for c in "zpq"]]
        else:  # one value (or ARRAY_AGG's array) per key
            acc.append(T.StructField(f"__m{i}", result_type(a, fields[a.column].dataType) if a.function == "ARRAY_AGG"
                                     else fields[a.column].dataType, True))
    acc += [T.StructField(f"__o{i}", f.dataType, True) for i, f in enumerate(out_fields[1 + len(keys):])]
    ms = [T.StructType(key_fields + [T.StructField(accumulate.VAL, fields[column].dataType, True),
                                     T.StructField(accumulate.MULT, T.LongType(), True)]
                       + ([T.StructField(DISTINCT_COUNT, T.LongType(), True)] if entry[-1] is True else []))
          for column, *entry in multisets + sequences]
    acc_schema = T.StructType(acc)
    return {"acc_schema": acc_schema.json(), "ms_schemas": [m.json() for m in ms],
            "acc_kinds": [(f.name, value_kind(f.dataType)) for f in acc_schema.fields],
            "ms_kinds": [[(f.name, value_kind(f.dataType)) for f in m.fields] for m in ms]}


def store(handle, plan: dict) -> generations.Generations:
    """The bucket's state in generations: the accumulators and multisets filed by key hash, a
    paired multiset (``distinct_pairs``) by pair hash."""
    names = ["acc", *[f"ms{j}" for j in range(len(plan["multisets"]) + len(plan["sequences"]))]]
    hashes = [generations.HASH] + [distinct_pairs.PAIR if j in plan["paired"] else generations.HASH
                                   for j in range(len(names) - 1)]
    return generations.Generations(handle, plan, names, "GroupAggregate", plan["ttl_ms"], hashes)


class GroupAggregateProcessor(StatefulProcessor):
    """One call per bucket and micro-batch: fold all of the bucket's rows at once."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        if self.plan["layout"] == "rows":
            self.state = state_layouts.RowsLayout(handle, self.plan)
        else:
            self.state = store(handle, self.plan)

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        # the columns are in the order group_aggregate selected them (named by position, as
        # Spark's own worker renamed a leading '_')
        batch.columns = self.plan["columns"]
        if self.plan["layout"] == "rows":
            state, out = accumulate.fold(self.plan, self.state.load(), batch)
            self.state.store(state)
        else:
            out = fold_stored(self.plan, self.state, batch, int(time.time() * 1000))
        if len(out):
            yield out

    def close(self) -> None:
        pass


def fold_stored(plan: dict, state: generations.Generations, batch: pd.DataFrame, now_ms: int) -> pd.DataFrame:
    """Fold a bucket's micro-batch into the state its keys (and DISTINCT pairs) have in
    ``state``; the changelog, without the hash column."""
    wanted = np.concatenate([batch[generations.HASH].to_numpy(dtype="int64"),
                             distinct_pairs.wanted(plan, batch)])
    _, (acc, *multisets) = state.load(wanted)
    folded = accumulate.BucketState(acc, multisets) if acc is not None else None
    folded, out = accumulate.fold(plan, folded, batch, now_ms)
    state.store(0, [folded.acc, *folded.multisets] if folded is not None else [None] * (1 + len(multisets)), now_ms)
    return out.drop(columns=[generations.HASH])


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, state_layouts, sys.modules[__name__])  # (distinct_pairs: accumulate's)
