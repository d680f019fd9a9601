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
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.spark.stateful import accumulate, joining, state_layouts, transport
from streamsql.spark.stateful.join import BUCKET, both_sides

ROWKIND = "__rowkind"  # streamsql.changelog.ROWKIND_COLUMN (not imported: shipped by value)
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
    bucketed, plan, out = both_sides(left, right, keys, join_type, buckets)
    plan.update(left_time=plan["left"][0], right_time=plan["right"][0])
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, TemporalJoinProcessor(plan), out, "EventTime")


def accept(plan: dict, rows: pd.DataFrame | None, versions: pd.DataFrame | None, next_seq: int,
           batch: pd.DataFrame):
    """(rows waiting, versions, next_seq) with a micro-batch of both sides added."""
    batch = joining.canonical_batch(plan, batch)
    side = batch[joining.SIDE].to_numpy()
    keys = plan["keys"]
    new_rows = batch.loc[side == 0, [ROWKIND] + keys + plan["left"]]  # a changelog's rows keep their kinds
    new_rows = new_rows[new_rows[plan["left_time"]].notna().to_numpy()]  # no time: never joined
    new_versions = batch.loc[side == 1, [ROWKIND] + keys + plan["right"]].rename(columns={ROWKIND: VERSION_KIND})
    known = (new_versions[keys].notna().all(axis=1).to_numpy() & new_versions[plan["right_time"]].notna().to_numpy()
             & (new_versions[VERSION_KIND] != "-U").to_numpy())  # an update's before-image is no version
    new_versions = new_versions[known].assign(**{SEQ: np.arange(next_seq, next_seq + int(known.sum()))})
    return joining.appended(rows, new_rows), joining.appended(versions, new_versions), next_seq + int(known.sum())


def fire(plan: dict, rows: pd.DataFrame | None, versions: pd.DataFrame | None, watermark: int):
    """(rows still waiting, versions kept, the joined rows of every row whose time the
    watermark passed)."""
    left_time = plan["left_time"]
    if rows is None:
        return None, _prune(plan, versions, watermark), _none(plan)
    # Flink's watermark trails Spark's by 1 ms: a row is due once Flink's reaches its time.
    ready = rows[left_time].to_numpy(dtype="float64") < watermark
    waiting = rows.loc[~ready].reset_index(drop=True)
    due = rows.loc[ready].reset_index(drop=True)
    out = _match(plan, due, versions) if len(due) else _none(plan)
    return (waiting if len(waiting) else None), _prune(plan, versions, watermark), out


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
        matched = merged[merged[SEQ].notna().to_numpy() & (merged[VERSION_KIND] != "-D").to_numpy()]
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


def with_kinds(rows: pd.DataFrame | None, column: str = ROWKIND) -> pd.DataFrame | None:
    """Waiting rows (versions: ``column`` VERSION_KIND) with their kinds: a checkpoint written
    before either side could be a changelog holds inserts without a kind column."""
    if rows is None or column in rows.columns:
        return rows
    return rows.assign(**{column: "+I"})


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
        self.state = state_layouts.Tables(handle, self.plan, ["rows", "versions"], "temporal join")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"] + [BUCKET]  # names with a leading '_' arrive renamed
        next_seq, (waiting, versions) = self.state.load()
        waiting, versions = with_kinds(waiting), with_kinds(versions, VERSION_KIND)
        before = next_time(self.plan, waiting)
        waiting, versions, next_seq = accept(self.plan, waiting, versions, next_seq, batch)
        # Rows the watermark already passed (late ones) join at once, with the versions there are.
        waiting, versions, out = fire(self.plan, waiting, versions, timerValues.getCurrentWatermarkInMs())
        upcoming = next_time(self.plan, waiting)
        if upcoming is not None and (before is None or upcoming < before):
            self.handle.registerTimer(upcoming)
        self.state.store(next_seq, [waiting, versions])
        if len(out):
            yield out

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        next_seq, (waiting, versions) = self.state.load()
        waiting, versions = with_kinds(waiting), with_kinds(versions, VERSION_KIND)
        waiting, versions, out = fire(self.plan, waiting, versions, timerValues.getCurrentWatermarkInMs())
        if waiting is not None:
            self.handle.registerTimer(next_time(self.plan, waiting))
        self.state.store(next_seq, [waiting, versions])
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, state_layouts, joining, sys.modules[__name__])
