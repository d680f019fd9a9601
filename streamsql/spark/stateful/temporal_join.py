"""Event-time temporal joins on ``transformWithStateInPandas``: Flink's temporal join (#10).

``l JOIN r FOR SYSTEM_TIME AS OF l.t ON l.k = r.k`` joins each left row with the version
of the versioned table ``r`` valid at the row's time: the key's version with the latest
time not after it (plan.temporal). Spark has no such join. As Flink's
TemporalRowTimeJoinOperator does, this one buffers both sides by key and joins a left
row once the watermark passes its time (every version up to it has arrived by then):

- both sides travel in one stream, hashed by the join keys into buckets (``join.both_sides``;
  each side's time in epoch ms is its first column after the keys, ``__lt`` / ``__rt``);
- one call per bucket and micro-batch, and per fired timer, matches all of the bucket's
  ready rows at once (``pandas.merge_asof`` by key, backward in time): joined rows, or for
  a LEFT join a row with no version yet padded with NULLs, each with its left row's kind
  (the left side may be a changelog: Flink forwards its kinds);
- the versions may be a changelog (a debezium-json topic): each +I or +U is a version from
  its time on, each -D ends the key's versions from its time on (a row it is the latest
  version for finds none), and a -U is dropped, as Flink's operator keeps only the
  changes' after-images and deletions;
- a key keeps its latest version the watermark passed and every later one (older ones
  can match no row that is still to come); a NULL key never matches.

The versions live in generations (``generations``, by the hash of the join keys, kept as
one more key): a call reads and rewrites only the versions of the keys it brings (new
versions, rows the watermark makes due), so a micro-batch costs what it brings, not the
versioned table's size. A key's versions are pruned when they are read, to the watermark
of the bucket's last call and then to this one's: the same versions the join would keep
had it pruned every key at every call. The rows waiting for the watermark (bounded by it)
are one value per bucket (``state_layouts.Pending``), with that last watermark.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import DELETE, ROWKIND_COLUMN as ROWKIND, UPDATE_BEFORE
from streamsql.spark.stateful import accumulate, generations, joining, state_layouts, transport
from streamsql.spark.stateful.join import BUCKET, both_sides

SEQ = "__seq"  # a version's arrival number: of two versions with one time, the later wins
VERSION_KIND = "__vkind"  # a version's kind: +I/+U a version, -D the key's end


def temporal_join(left: DataFrame, right: DataFrame, keys: int, join_type: str,
                  buckets: int | None = None) -> DataFrame:
    """``left JOIN right FOR SYSTEM_TIME AS OF`` on their first ``keys`` columns, each side's
    time (epoch ms) the column after them: ``__rowkind`` (+I), then every other column of
    ``left``, then of ``right``. ``left`` may be a changelog (``__rowkind`` first: each
    joined row has its left row's kind); ``right`` may be one too (``__rowkind`` first:
    deletions end a key's versions); ``join_type`` is InnerJoin or LeftOuterJoin."""
    if join_type not in ("InnerJoin", "LeftOuterJoin"):
        raise ValueError(f"a temporal join is an InnerJoin or a LeftOuterJoin, not {join_type!r}")
    bucketed, plan, out = both_sides(left, right, keys, join_type, buckets, hash_key=True)
    plan.update(left_time=plan["left"][0], right_time=plan["right"][0])
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, TemporalJoinProcessor(plan), out, "EventTime")


def accept(plan: dict, rows: pd.DataFrame | None, versions: pd.DataFrame | None, next_seq: int,
           batch: pd.DataFrame):
    """(rows waiting, versions, next_seq) with a micro-batch of both sides added."""
    new_rows, new_versions = arrivals(plan, batch)
    new_versions = numbered(new_versions, next_seq)
    return joining.appended(rows, new_rows), joining.appended(versions, new_versions), next_seq + len(new_versions)


def arrivals(plan: dict, batch: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the micro-batch's left rows to join, its versions, not yet numbered)."""
    batch = joining.canonical_batch(plan, batch)
    side = batch[joining.SIDE].to_numpy()
    keys = plan["keys"]
    new_rows = batch.loc[side == 0, [ROWKIND] + keys + plan["left"]]  # a changelog's rows keep their kinds
    new_rows = new_rows[new_rows[plan["left_time"]].notna().to_numpy()]  # no time: never joined
    new_versions = batch.loc[side == 1, [ROWKIND] + keys + plan["right"]].rename(columns={ROWKIND: VERSION_KIND})
    known = (new_versions[keys].notna().all(axis=1).to_numpy() & new_versions[plan["right_time"]].notna().to_numpy()
             & (new_versions[VERSION_KIND] != UPDATE_BEFORE).to_numpy())  # an update's before-image is no version
    return new_rows, new_versions[known]


def numbered(versions: pd.DataFrame, next_seq: int) -> pd.DataFrame:
    """Versions with their arrival numbers from ``next_seq`` on."""
    return versions.assign(**{SEQ: np.arange(next_seq, next_seq + len(versions), dtype="int64")})


def fire(plan: dict, rows: pd.DataFrame | None, versions: pd.DataFrame | None, watermark: int):
    """(rows still waiting, versions kept, the joined rows of every row whose time the
    watermark passed)."""
    waiting, due = due_rows(plan, rows, watermark)
    out = _match(plan, due, versions) if due is not None else _none(plan)
    return waiting, _prune(plan, versions, watermark), out


def due_rows(plan: dict, rows: pd.DataFrame | None, watermark: int):
    """(the rows still waiting, those the watermark makes due), each None for none."""
    if rows is None:
        return None, None
    # Flink's watermark trails Spark's by 1 ms: a row is due once Flink's reaches its time.
    ready = rows[plan["left_time"]].to_numpy(dtype="float64") < watermark
    waiting = rows.loc[~ready].reset_index(drop=True)
    due = rows.loc[ready].reset_index(drop=True)
    return (waiting if len(waiting) else None), (due if len(due) else None)


def next_time(plan: dict, rows: pd.DataFrame | None) -> int | None:
    """When the bucket's next row is due (its timer): once Spark's watermark passes its time."""
    return None if rows is None else int(rows[plan["left_time"]].min()) + 1


def _match(plan: dict, due: pd.DataFrame, versions: pd.DataFrame | None) -> pd.DataFrame:
    keys, left_time, right_time = plan["keys"], plan["left_time"], plan["right_time"]
    due = due.assign(__order=np.arange(len(due)))
    keyed = due[keys].notna().all(axis=1).to_numpy()
    matched = None
    if versions is not None and keyed.any():
        probe = due.loc[keyed].assign(__t=due.loc[keyed, left_time].astype("int64")).sort_values("__t", kind="stable")
        candidates = versions.assign(__t=versions[right_time].astype("int64")).sort_values(["__t", SEQ], kind="stable")
        joining.shared_dtypes(probe, candidates, keys)  # merge_asof's by-columns
        merged = pd.merge_asof(probe, candidates, on="__t", by=keys, direction="backward", allow_exact_matches=True)
        matched = merged[merged[SEQ].notna().to_numpy() & (merged[VERSION_KIND] != DELETE).to_numpy()]
    if plan["join_type"] == "LeftOuterJoin":
        alone = due if matched is None else due[~due["__order"].isin(matched["__order"]).to_numpy()]
        padded = alone.assign(**{c: joining.nulls(plan["kinds"][c], len(alone)) for c in plan["right"]})
        parts = [p for p in (matched, padded) if p is not None and len(p)]
    else:
        parts = [matched] if matched is not None and len(matched) else []
    if not parts:
        return _none(plan)
    with warnings.catch_warnings():  # all-NULL padding: its dtype is set just below
        warnings.simplefilter("ignore", FutureWarning)
        out = pd.concat(parts, ignore_index=True).sort_values("__order", kind="stable").reset_index(drop=True)
    for name in plan["left"] + plan["right"]:  # NULL padding and the merge leave floats and NaN behind
        out[name] = joining._canonical(out[name], plan["kinds"][name])
    return out[[ROWKIND] + plan["left"] + plan["right"]]


def _none(plan: dict) -> pd.DataFrame:
    """No joined rows, in the output's columns."""
    return pd.DataFrame({c: [] for c in [ROWKIND] + plan["left"] + plan["right"]})


def _prune(plan: dict, versions: pd.DataFrame | None, watermark: int) -> pd.DataFrame | None:
    """Per key, the latest version the watermark passed and every later one."""
    if versions is None:
        return None
    passed = versions[plan["right_time"]].to_numpy(dtype="float64") <= watermark
    if passed.sum() <= 1:
        return versions
    ordered = versions.sort_values([plan["right_time"], SEQ], kind="stable")
    passed = ordered[plan["right_time"]].to_numpy(dtype="float64") <= watermark
    latest = np.zeros(len(ordered), dtype=bool)
    old = ordered.loc[passed]
    latest[np.flatnonzero(passed)[old.groupby(plan["keys"], sort=False).cumcount(ascending=False).to_numpy() == 0]] = True
    kept = ordered.loc[~passed | latest].reset_index(drop=True)
    return kept if len(kept) else None


class TemporalJoinProcessor(StatefulProcessor):
    """One call per bucket and micro-batch, and per fired timer."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.pending = state_layouts.Pending(handle, self.plan, "temporal join")
        self.versions = generations.Generations(handle, self.plan, ["versions"], "temporal join", store="_versions")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"] + [BUCKET]  # names with a leading '_' arrive renamed
        last, waiting = self.pending.load()
        before = next_time(self.plan, waiting)
        new_rows, new_versions = arrivals(self.plan, batch)
        # Rows the watermark already passed (late ones) join at once, with the versions there are.
        yield from self._fire(joining.appended(waiting, new_rows), new_versions, last,
                              timerValues.getCurrentWatermarkInMs(), before)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        last, waiting = self.pending.load()
        yield from self._fire(waiting, None, last, timerValues.getCurrentWatermarkInMs(), None)

    def _fire(self, waiting, new_versions, last: int | None, watermark: int, before: int | None):
        """Join the rows the watermark makes due with their keys' versions, the new ones
        added; prune the versions read; the timer of the next row to come due."""
        waiting, due = due_rows(self.plan, waiting, watermark)
        wanted = [f[generations.HASH].to_numpy(dtype="int64") for f in (new_versions, due) if f is not None and len(f)]
        out = None
        if wanted:
            next_seq, (versions,) = self.versions.load(np.concatenate(wanted))
            if last is not None:  # as far as the bucket's last call pruned every key
                versions = _prune(self.plan, versions, last)
            if new_versions is not None and len(new_versions):
                versions = joining.appended(versions, numbered(new_versions, next_seq))
                next_seq += len(new_versions)
            if due is not None:
                out = _match(self.plan, due, versions)
            self.versions.store(next_seq, [_prune(self.plan, versions, watermark)])
        upcoming = next_time(self.plan, waiting)
        if upcoming is not None and (before is None or upcoming < before):
            self.handle.registerTimer(upcoming)
        self.pending.store(watermark, waiting)
        if out is not None and len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, state_layouts, joining, sys.modules[__name__])
