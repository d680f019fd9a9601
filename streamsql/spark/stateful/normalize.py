"""ChangelogNormalize on ``transformWithStateInPandas``: an upsert source's records (the
latest value of a key, or a tombstone) as Flink's changelog, per key: the first value
``+I``, a changed one ``-U`` (the row it replaces) then ``+U``, a tombstone ``-D`` (the row
it deletes); a record equal to the key's row, or a tombstone of a key with none, changes
nothing. Keys are hashed into buckets, a bucket's whole micro-batch is one call (a key's
records taken in offset order: they are in one partition, in order, and each is compared
with the one before it, so no version is folded away), and each bucket keeps its keys'
latest rows in the checkpoint, in generations (``generations``: a micro-batch reads and
writes the rows of the keys it brings).

``normalize`` (pandas only; the module is shipped to the workers by value) is the core; ``changelog_normalize``
builds the operator on a frame of records: the table's columns, then ``__ukey`` (the
record key, as text), ``__tomb`` (no value) and ``__off`` (the record's offset).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import DELETE, INSERT, ROWKIND_COLUMN as ROWKIND, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.spark.stateful import accumulate, generations, transport

KEY, TOMB, OFFSET, BUCKET = "__ukey", "__tomb", "__off", "__bucket"


def normalize(plan: dict, state: pd.DataFrame | None, batch: pd.DataFrame):
    """(the bucket's rows after the batch: ``__ukey`` and the columns, or None; the changes).
    Each record is compared with the row before it — the key's previous record in the
    batch, else its row in the state — as Flink's ChangelogNormalize does record by record:
    every version a key passes through is in the changelog (a temporal join's versions),
    not only its last of the micro-batch."""
    columns = plan["columns"]
    if state is None:
        state = batch.iloc[0:0][[KEY] + columns]
    records = batch.sort_values([KEY, OFFSET], kind="stable").reset_index(drop=True)
    # the previous rows as objects: a shift or an unmatched merge would make an integer column
    # float64, and a BIGINT past 2^53 would lose its last digits
    stored = state[[KEY]].assign(**{c: state[c].astype(object) for c in columns})
    records = records.merge(stored, on=KEY, how="left", suffixes=("", "__old"), indicator=True)
    first = (records[KEY] != records[KEY].shift(1)).to_numpy()
    tomb = records[TOMB].eq(True).to_numpy()
    had = np.where(first, (records.pop("_merge") == "both").to_numpy(),
                   ~np.concatenate([[True], tomb[:-1]]))  # a previous row the record replaces
    previous = pd.DataFrame({name: records[name].astype(object).shift(1).where(~first, records[f"{name}__old"])
                             for name in columns})
    same = np.ones(len(records), dtype=bool)
    for name in columns:  # as objects, NULL as None (an integer column with a NULL is Int64: NA has no truth)
        old, new = _objects(previous[name]), _objects(records[name])
        same &= ((old == new) | (old.isna() & new.isna())).to_numpy(dtype=bool, na_value=False)
    retract = had & (tomb | ~same)  # -D (a tombstone) or -U (a changed value): the row it replaces
    add = ~tomb & ~(had & same)  # +I (no row before) or +U
    order = np.arange(len(records)) * 2
    parts = [previous.loc[retract].assign(**{ROWKIND: np.where(tomb[retract], DELETE, UPDATE_BEFORE), "__at": order[retract]}),
             records.loc[add, columns].assign(**{ROWKIND: np.where(had[add], UPDATE_AFTER, INSERT), "__at": order[add] + 1})]
    parts = [part for part in parts if len(part)]
    out = (pd.concat(parts, ignore_index=True).sort_values("__at", kind="stable") if parts
           else pd.DataFrame(columns=[ROWKIND] + columns + ["__at"]))[[ROWKIND] + columns].reset_index(drop=True)
    last = records.drop_duplicates(KEY, keep="last")
    touched = state[KEY].isin(records[KEY]).to_numpy()
    kept = pd.concat([part for part in (state.loc[~touched, [KEY] + columns],
                                        last.loc[~last[TOMB].eq(True).to_numpy(), [KEY] + columns]) if len(part)]
                     or [state.iloc[0:0][[KEY] + columns]], ignore_index=True)
    return (kept if len(kept) else None), out


def _objects(values: pd.Series) -> pd.Series:
    values = values.astype(object)
    return values.where(values.notna(), None)


def changelog_normalize(records, buckets: int | None = None):
    """The changelog of an upsert source's ``records`` (see the module): ``__rowkind``, then
    the table's columns."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from streamsql.spark.stateful import default_buckets

    buckets = buckets or default_buckets(records)
    columns = [c for c in records.columns if c not in (KEY, TOMB, OFFSET)]
    plan = {"columns": columns, "buckets": buckets, "all": list(records.columns)}
    out = T.StructType([T.StructField(ROWKIND, T.StringType(), False)]
                       + [f for f in records.schema.fields if f.name in columns])
    hashed = records.withColumn(generations.HASH, F.xxhash64(F.col(KEY)))
    plan["all"] = list(hashed.columns)
    bucketed = hashed.withColumn(BUCKET, F.pmod(F.col(generations.HASH), F.lit(buckets)).cast("int"))
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, NormalizeProcessor(plan), out, "None")


class NormalizeProcessor(StatefulProcessor):
    """One call per bucket and micro-batch."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = generations.Generations(handle, self.plan, ["rows"], "ChangelogNormalize")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["all"] + [BUCKET]  # names with a leading '_' arrive renamed
        _, (state,) = self.state.load(batch[generations.HASH].to_numpy(dtype="int64"))
        kept, out = normalize(self.plan, state, batch)
        if kept is not None:  # each kept row with its key's hash again
            known = batch[[KEY, generations.HASH]] if state is None else \
                pd.concat([state[[KEY, generations.HASH]], batch[[KEY, generations.HASH]]], ignore_index=True)
            kept[generations.HASH] = kept[KEY].map(known.drop_duplicates(KEY).set_index(KEY)[generations.HASH])
        self.state.store(0, [kept])
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, sys.modules[__name__])
