"""ChangelogNormalize on ``transformWithStateInPandas``: an upsert source's records (the
latest value of a key, or a tombstone) as Flink's changelog, per key: the first value
``+I``, a changed one ``-U`` (the row it replaces) then ``+U``, a tombstone ``-D`` (the row
it deletes); a record equal to the key's row, or a tombstone of a key with none, changes
nothing. Keys are hashed into buckets, a bucket's whole micro-batch is one call (a key's
records folded to its last, by offset: they are in one partition, in order), and each
bucket keeps its keys' latest rows (``state_layouts.Tables``) in the checkpoint.

``normalize`` (pandas only; the module is shipped to the workers by value) is the core; ``changelog_normalize``
builds the operator on a frame of records: the table's columns, then ``__ukey`` (the
record key, as text), ``__tomb`` (no value) and ``__off`` (the record's offset).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.spark.stateful import accumulate, state_layouts

ROWKIND = "__rowkind"  # streamsql.changelog.ROWKIND_COLUMN (not imported: shipped by value)
KEY, TOMB, OFFSET, BUCKET = "__ukey", "__tomb", "__off", "__bucket"


def normalize(plan: dict, state: pd.DataFrame | None, batch: pd.DataFrame):
    """(the bucket's rows after the batch: ``__ukey`` and the columns, or None; the changes)."""
    columns = plan["columns"]
    last = batch.sort_values(OFFSET, kind="stable").drop_duplicates(KEY, keep="last")
    if state is None:
        state = last.iloc[0:0][[KEY] + columns]
    merged = state.merge(last[[KEY, TOMB] + columns], on=KEY, how="outer", suffixes=("", "__new"), indicator=True)
    had = (merged["_merge"] != "right_only").to_numpy()
    came = (merged["_merge"] != "left_only").to_numpy()
    tomb = came & merged[TOMB].eq(True).to_numpy()
    same = np.ones(len(merged), dtype=bool)
    for name in columns:
        old, new = merged[name], merged[f"{name}__new"]
        same &= ((old == new) | (old.isna() & new.isna())).to_numpy(dtype=bool, na_value=False)
    deleted = had & tomb
    inserted = ~had & came & ~tomb
    updated = had & came & ~tomb & ~same
    old_rows = merged.loc[deleted | updated, columns]
    new_rows = merged.loc[inserted | updated, [f"{n}__new" for n in columns]].set_axis(columns, axis=1)
    parts = [part for part in (old_rows.assign(**{ROWKIND: np.where(deleted[deleted | updated], "-D", "-U")}),
                               new_rows.assign(**{ROWKIND: np.where(updated[inserted | updated], "+U", "+I")}))
             if len(part)]  # retractions first
    out = (pd.concat(parts, ignore_index=True) if len(parts) == 2 else parts[0].reset_index(drop=True) if parts
           else pd.DataFrame(columns=[ROWKIND] + columns))[[ROWKIND] + columns]
    replaced = came & ~tomb
    stay = merged.loc[had & ~came, [KEY] + columns]
    fresh = merged.loc[replaced, [KEY] + [f"{n}__new" for n in columns]].set_axis([KEY] + columns, axis=1)
    kept = pd.concat([stay, fresh], ignore_index=True) if len(stay) and len(fresh) else (
        fresh if len(fresh) else stay).reset_index(drop=True)
    return (kept if len(kept) else None), out


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
    bucketed = records.withColumn(BUCKET, F.pmod(F.xxhash64(F.col(KEY)), F.lit(buckets)).cast("int"))
    _ship_by_value()
    return bucketed.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=NormalizeProcessor(plan), outputStructType=out, outputMode="Append", timeMode="None")


class NormalizeProcessor(StatefulProcessor):
    """One call per bucket and micro-batch."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = state_layouts.Tables(handle, self.plan, ["rows"], "ChangelogNormalize")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["all"] + [BUCKET]  # names with a leading '_' arrive renamed
        _, (state,) = self.state.load()
        state, out = normalize(self.plan, state, batch)
        self.state.store(0, [state])
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, state_layouts, sys.modules[__name__])
