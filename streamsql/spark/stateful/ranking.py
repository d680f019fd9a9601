"""Rank (Top-N) and Deduplicate for one bucket of partition keys, with vectorised pandas.

This module runs in Spark's Python workers and is shipped to them by value (cloudpickle),
so it imports only pandas and numpy and takes its configuration as a plain dict, the
*plan* (built by ``rank.build_plan``):

    partition:  [column]                  the PARTITION BY columns
    order:      [(column, descending)]    the ORDER BY columns
    limit:      N                         rows with ROW_NUMBER() <= N are kept
    rank:       name of the ROW_NUMBER column in the output, or None
    data:       [column]                  the columns the operator outputs (before the rank)
    rowkind:    whether the input carries ``__rowkind`` (else every row is +I)
    later_wins: ties in ORDER BY go to the row that came later (Flink's deduplication
                keeping the last row); otherwise to the row that came first (Flink's Top-N)
    rank_type:  ROW_NUMBER (the default), or RANK / DENSE_RANK, where rows equal in ORDER BY
                share a number and all of them are kept (only a window Top-N, whose rows
                are ranked once, takes these: ``chain``)

A bucket's state is one table: the rows that can still be ranked, each with ``__seq``, its
arrival number in the bucket (ties are broken by it, and it tells rows apart). Over an
insert-only input only each partition's top N are kept (a row below them can never rise);
over a changelog every live row is kept, since retracting a top row lifts the next one.

``fold`` takes one micro-batch of a bucket: it applies the batch's rows to the partitions
they touch, ranks those partitions before and after, and emits the difference as Flink's
Rank does: with the rank number in the output, per rank position (``-U`` old, ``+U`` new;
``+I``/``-D`` where a position fills or empties); without it, per row (``+I`` for a row
that enters the top N, ``-D`` for one that leaves), except for Top-1, which updates in
place (``-U``/``+U``) as Flink's deduplication does.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from streamsql.changelog import ADDS, DELETE, INSERT, ROWKIND_COLUMN as ROWKIND, UPDATE_AFTER, UPDATE_BEFORE

SEQ = "__seq"
TOUCHED = "__t"  # when the row's partition last changed (epoch ms), kept with a state TTL
RANK = "__rownum"
HASH = "__h"  # generations.HASH: the partition's hash, stored with its rows (rank.py)


def fold(plan: dict, state: pd.DataFrame | None, next_seq: int, batch: pd.DataFrame,
         now_ms: int | None = None) -> tuple[pd.DataFrame | None, int, pd.DataFrame]:
    """(new state, new next_seq, changes) for one micro-batch of a bucket. With
    ``plan["ttl_ms"]`` a partition's rows expire that long after the partition last changed
    (processing time, ``now_ms``; Flink's 'table.exec.state.ttl'), without output."""
    columns = _stored_columns(plan)
    ttl = plan.get("ttl_ms")
    if ttl:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if state is not None and TOUCHED in state.columns:
            state = state[state[TOUCHED].to_numpy(dtype="float64", na_value=0) >= now_ms - ttl]
    if plan["rowkind"]:
        adds_mask = batch[ROWKIND].isin(ADDS).to_numpy()
        adds, retracts = batch[adds_mask], batch[~adds_mask]
    else:
        adds, retracts = batch, batch.iloc[0:0]
    adds = adds[columns].copy()
    adds[SEQ] = np.arange(next_seq, next_seq + len(adds), dtype="int64")
    next_seq += len(adds)
    if state is None or not len(state):
        state = adds.iloc[0:0]
    touched = _in_keys(state, batch, plan["partition"])
    before = state[touched]
    rest = state[~touched]
    candidates = pd.concat([before, adds], ignore_index=True) if len(adds) else before
    if len(retracts):  # a changelog retracts rows added before, in this batch too
        candidates = _retract(candidates, retracts[columns], columns)
    old_top = _ranked(plan, before)
    new_top = _ranked(plan, candidates)
    changes = _diff(plan, old_top, new_top)
    survivors = candidates if plan["rowkind"] else new_top.drop(columns=[RANK])
    if ttl:
        survivors = survivors.assign(**{TOUCHED: np.int64(now_ms)})
    state = pd.concat([rest, survivors], ignore_index=True) if len(rest) else survivors.reset_index(drop=True)
    return (state if len(state) else None), next_seq, changes


def _stored_columns(plan: dict) -> list[str]:
    columns = list(plan["data"])
    for name in plan["partition"] + [c for c, _ in plan["order"]] + ([HASH] if plan.get("hashed") else []):
        if name not in columns:
            columns.append(name)
    return columns


def _in_keys(frame: pd.DataFrame, batch: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Which rows of ``frame`` belong to a partition the batch touches."""
    if not len(frame):
        return np.zeros(0, dtype=bool)
    if not keys:
        return np.ones(len(frame), dtype=bool)
    wanted = pd.MultiIndex.from_frame(batch[keys].drop_duplicates())
    return pd.MultiIndex.from_frame(frame[keys]).isin(wanted)


def _retract(rows: pd.DataFrame, retractions: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``rows`` less one equal row per retraction (the latest such row goes first)."""
    if not len(rows):
        return rows
    ordered = rows.sort_values(SEQ, ascending=False, kind="stable")
    left = ordered.assign(__n=ordered.groupby(columns, dropna=False, sort=False).cumcount())
    right = retractions.assign(__n=retractions.groupby(columns, dropna=False, sort=False).cumcount())
    merged = left.merge(right[columns + ["__n"]].drop_duplicates(), on=columns + ["__n"], how="left", indicator=True)
    keep = merged["_merge"].to_numpy() == "left_only"
    return ordered[keep].sort_values(SEQ, kind="stable")


def _ranked(plan: dict, rows: pd.DataFrame) -> pd.DataFrame:
    """Each partition's first ``limit`` rows in rank order, with their ``__rownum``."""
    if not len(rows):
        return rows.assign(**{RANK: pd.Series(dtype="int64")})
    by, ascending = list(plan["partition"]), [True] * len(plan["partition"])
    helpers = {}
    for i, (column, descending) in enumerate(plan["order"]):
        nulls = f"__null{i}"
        # NULL is the smallest value (Flink's default): first ascending, last descending.
        helpers[nulls] = rows[column].isna().to_numpy() != descending
        by += [nulls, column]
        ascending += [False, not descending]
    by.append(SEQ)
    ascending.append(not plan["later_wins"])
    ordered = rows.assign(**helpers).sort_values(by, ascending=ascending, kind="stable", na_position="last")
    if plan["partition"]:
        numbers = ordered.groupby(plan["partition"], dropna=False, sort=False).cumcount().to_numpy() + 1
    else:
        numbers = np.arange(1, len(ordered) + 1)
    if plan.get("rank_type", "ROW_NUMBER") != "ROW_NUMBER":
        numbers = _tied(plan, ordered, list(helpers), numbers)
    ordered = ordered.drop(columns=list(helpers)).assign(**{RANK: numbers})
    return ordered[numbers <= plan["limit"]]


def _tied(plan: dict, ordered: pd.DataFrame, nulls: list[str], numbers: np.ndarray) -> np.ndarray:
    """RANK's or DENSE_RANK's numbers of rows sorted by partition and ORDER BY (``numbers``:
    their ROW_NUMBER): a row equal to the one before it in every ORDER BY key (NULL equal to
    NULL) shares its number; RANK then skips, DENSE_RANK does not."""
    first = numbers == 1  # a partition's first row
    changed = first.copy()
    for (column, _), null in zip(plan["order"], nulls):
        values, isnull = ordered[column].to_numpy(), ordered[null].to_numpy()
        differs = np.ones(len(ordered), dtype=bool)
        if len(ordered) > 1:
            same_null = isnull[1:] == isnull[:-1]
            both_null = same_null & (ordered[column].isna().to_numpy()[1:])
            equal = pd.Series(values[1:]).eq(pd.Series(values[:-1])).to_numpy(dtype=bool)
            differs[1:] = ~(both_null | (same_null & equal))
        changed |= differs
    positions = np.arange(len(ordered))
    if plan["rank_type"] == "RANK":  # the ROW_NUMBER of the first row of its run of equals
        return np.maximum.accumulate(np.where(changed, positions, 0)) - np.maximum.accumulate(
            np.where(first, positions, 0)) + 1
    runs = np.cumsum(changed)  # DENSE_RANK: the runs of equals so far within the partition
    return runs - np.maximum.accumulate(np.where(first, runs, 0)) + 1


def _diff(plan: dict, old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Flink's Rank changes from one top-N to the next (see the module's docstring)."""
    # (rows that tie share a position: per row)
    by_position = (plan["rank"] is not None or plan["limit"] == 1) and plan.get("rank_type", "ROW_NUMBER") == "ROW_NUMBER"
    if by_position:
        on = plan["partition"] + [RANK]
        pairs = old[on + [SEQ]].merge(new[on + [SEQ]], on=on, how="outer", suffixes=("_old", "_new"))
        same = pairs[f"{SEQ}_old"] == pairs[f"{SEQ}_new"]
        changed = pairs[~same.fillna(False).to_numpy()]
        gone = changed[changed[f"{SEQ}_new"].isna()][f"{SEQ}_old"]
        came = changed[changed[f"{SEQ}_old"].isna()][f"{SEQ}_new"]
        both = changed[changed[f"{SEQ}_old"].notna() & changed[f"{SEQ}_new"].notna()]
        parts = [_rows(old, gone, DELETE)]
        if len(both) and not plan.get("update_before", True):  # UPDATE_AFTER only (plan.update_kinds)
            parts.append(_rows(new, both[f"{SEQ}_new"], UPDATE_AFTER))
        elif len(both):
            before = _rows(old, both[f"{SEQ}_old"], UPDATE_BEFORE)
            after = _rows(new, both[f"{SEQ}_new"], UPDATE_AFTER)
            pair = np.arange(len(both))
            parts.append(pd.concat([before.assign(__pair=pair, __side=0), after.assign(__pair=pair, __side=1)])
                         .sort_values(["__pair", "__side"], kind="stable").drop(columns=["__pair", "__side"]))
        parts.append(_rows(new, came, INSERT))
    else:
        gone = old[SEQ][~old[SEQ].isin(new[SEQ])]
        came = new[SEQ][~new[SEQ].isin(old[SEQ])]
        parts = [_rows(old, gone, DELETE), _rows(new, came, INSERT)]
    out = pd.concat(parts, ignore_index=True)[_output_columns(plan)]
    return out.rename(columns={RANK: plan["rank"]}) if plan["rank"] is not None else out


def _rows(ranked: pd.DataFrame, seqs, kind: str) -> pd.DataFrame:
    """The rows of ``ranked`` with these ``__seq`` numbers, in that order, as changes."""
    seqs = pd.Series(np.asarray(seqs, dtype="int64"), name=SEQ)
    rows = pd.DataFrame({SEQ: seqs}).merge(ranked, on=SEQ, how="left")
    rows.insert(0, ROWKIND, kind)
    return rows


def _output_columns(plan: dict) -> list[str]:
    return [ROWKIND] + list(plan["data"]) + ([RANK] if plan["rank"] is not None else [])
