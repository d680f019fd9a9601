"""LISTAGG, ARRAY_AGG, FIRST_VALUE and LAST_VALUE over retracting input: a key's live values
in arrival order, as Flink's ListAggWithRetract, ArrayAgg and First/LastValueWithRetract
functions keep them (#10).

Over inserts a key keeps one value (``accumulate``: the joined string, the array, the first
or last value). A retraction must take a value back out of the middle, so here a key keeps
every value still in, each with its arrival number: one table per (column, filter) — rows
(keys, ``__v``, ``__c`` the number) — stored after the bucket's multisets. A micro-batch
appends its additions (+I/+U) in the order they came, and each retraction (-U/-D) removes
the earliest live occurrence of its value, as Flink's ``list.remove(value)`` does. In a
consistent changelog each retraction finds one; removing them one by one takes a prefix of
the value's occurrences in arrival order, so a batch's retractions remove, per value, that
many of its earliest occurrences at once (vectorised). The result is the live values in
order: joined (LISTAGG; NULLs are never kept), as a list (ARRAY_AGG; NULLs kept unless
IGNORE NULLS), the first or the last (FIRST_VALUE, LAST_VALUE; NULLs never kept).

Shipped to the workers with ``accumulate``: pandas and numpy only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

VAL, SEQ = "__v", "__c"  # accumulate.VAL and MULT: the value, and here its arrival number
COUNT = "__n"  # a DISTINCT sequence's: how many rows hold the value
# Flink's message for a repeated JSON_OBJECTAGG key, after "Key '<key>'"
DUPLICATE_KEY = " is already present. Duplicate keys are not allowed in JSON_OBJECTAGG. Please ensure that keys are unique."


def advance(plan: dict, old: list | None, batch: pd.DataFrame, keys: list[str], sign: np.ndarray) -> list:
    """Each sequence of the bucket after the batch (old: the stored ones, or None)."""
    from streamsql.spark.stateful.accumulate import canonical

    out = []
    for j, (column, filter_column, kind, keep_nulls, distinct) in enumerate(plan["sequences"]):
        values = canonical(batch[column], kind)
        ok = np.ones(len(batch), dtype=bool) if filter_column is None else \
            batch[filter_column].astype("boolean").fillna(False).to_numpy(dtype=bool)
        if not keep_nulls:
            ok &= values.notna().to_numpy()
        rows = batch.loc[ok, keys].copy()
        rows[VAL] = values[ok].astype(object).where(values[ok].notna(), None)
        live = _as_kept(plan, old[j], kind) if old is not None and j < len(old) else None
        if distinct:
            out.append(_advance_distinct(plan, live, rows.reset_index(drop=True), sign[ok], keys, kind))
            continue
        added, taken = sign[ok] > 0, rows.loc[sign[ok] < 0]
        first = int(live[SEQ].max()) + 1 if live is not None and len(live) else 0
        fresh = rows.loc[added].assign(**{SEQ: np.arange(first, first + int(added.sum()), dtype="int64")})
        if live is None or live.empty:
            live = fresh
        elif len(fresh):  # column by column: a column of NULLs only must not change its dtype
            live = pd.DataFrame({c: _stacked(live[c], fresh[c]) for c in live.columns})
        if len(taken) and len(live):
            live = _remove_earliest(live, taken, keys)
        out.append(live.reset_index(drop=True))
    return out


def _advance_distinct(plan: dict, live: pd.DataFrame | None, rows: pd.DataFrame, sign: np.ndarray,
                      keys: list[str], kind: str) -> pd.DataFrame:
    """A DISTINCT call's sequence after the batch: per (key, value) how many rows hold it
    (``COUNT``), and its place (``SEQ``): where its count last rose from zero. Flink's DISTINCT
    hands a value to LISTAGG/ARRAY_AGG when its count rises from zero and takes it back when
    the count falls to zero, and the list appends it anew; so a value's place is that of its
    latest rise, found in batch order from the counts before the batch."""
    from streamsql.spark.stateful.accumulate import _canonical_keys, canonical

    group = keys + [VAL]
    first = int(live[SEQ].max()) + 1 if live is not None and len(live) else 0
    if live is None:
        live = rows.iloc[:0].assign(**{SEQ: np.int64(0), COUNT: np.int64(0)})
    if not len(rows):
        return live
    steps = rows.assign(__sign=sign, __at=np.arange(first, first + len(rows), dtype="int64"))
    steps = steps.merge(live.rename(columns={SEQ: "__was_at", COUNT: "__was"}), on=group, how="left")
    steps["__was"] = steps["__was"].fillna(0).astype("int64")
    after = steps.groupby(group, dropna=False, sort=False)["__sign"].cumsum().to_numpy() + steps["__was"].to_numpy()
    rises = (steps["__sign"].to_numpy() > 0) & (after - steps["__sign"].to_numpy() <= 0) & (after > 0)
    steps["__count"] = after
    steps["__rise"] = np.where(rises, steps["__at"].to_numpy(), -1)
    ends = steps.groupby(group, dropna=False, sort=False).agg(
        **{COUNT: ("__count", "last"), "__rise": ("__rise", "max"), "__was_at": ("__was_at", "first")}).reset_index()
    ends = _canonical_keys(plan, ends)  # (a groupby hands keys all NULL back as float64, values as it infers them)
    values = canonical(ends[VAL], kind)  # (an integer value beside a NULL comes back as float64)
    ends[VAL] = values.astype(object).where(values.notna(), None)
    ends[SEQ] = np.where(ends["__rise"] >= 0, ends["__rise"], ends["__was_at"].fillna(-1)).astype("int64")
    untouched = live.merge(ends[group], on=group, how="left", indicator=True)
    untouched = untouched.loc[untouched.pop("_merge").to_numpy() == "left_only"]
    ends = ends.loc[ends[COUNT] > 0, group + [SEQ, COUNT]]
    kept = pd.DataFrame({c: _stacked(untouched[c].reset_index(drop=True), ends[c].reset_index(drop=True))
                         for c in live.columns})
    kept[SEQ], kept[COUNT] = kept[SEQ].astype("int64"), kept[COUNT].astype("int64")
    return kept


def _as_kept(plan: dict, live: pd.DataFrame, kind_of: str) -> pd.DataFrame:
    """A stored sequence in the dtypes a batch's rows have (keys canonical, values objects)."""
    from streamsql.spark.stateful.accumulate import _canonical_keys, canonical

    live = _canonical_keys(plan, live.copy())
    values = canonical(live[VAL], kind_of)  # (Arrow hands an integer column with NULLs back as float64)
    live[VAL] = values.astype(object).where(values.notna(), None)
    live[SEQ] = live[SEQ].astype("int64")
    if COUNT in live.columns:
        live[COUNT] = live[COUNT].astype("int64")
    return live


def _stacked(a: pd.Series, b: pd.Series) -> pd.Series:
    if a.dtype == object or b.dtype == object:
        return pd.Series(np.concatenate([a.to_numpy(dtype=object), b.to_numpy(dtype=object)]), dtype=object)
    return pd.concat([a, b], ignore_index=True)


def _remove_earliest(live: pd.DataFrame, taken: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``live`` less, per (key, value), as many of its earliest occurrences as ``taken`` has."""
    group = keys + [VAL]
    live = live.sort_values(SEQ, kind="stable").reset_index(drop=True)
    both = pd.DataFrame({c: _stacked(live[c], taken[c].reset_index(drop=True)) for c in group})
    ids = both.groupby(group, dropna=False, sort=False).ngroup().to_numpy()
    live_ids, taken_ids = ids[:len(live)], ids[len(live):]
    retracted = np.bincount(taken_ids, minlength=ids.max() + 1)
    nth = pd.Series(live_ids).groupby(live_ids, sort=False).cumcount().to_numpy()
    return live.loc[nth >= retracted[live_ids]]


def results(plan: dict, t: pd.DataFrame, ordered: list, keys: list[str]) -> pd.DataFrame:
    """``t`` (the touched keys) with ``__m{i}`` set for each call kept in a sequence."""
    from streamsql.spark.stateful.accumulate import _canonical_keys

    touched_of: dict = {}  # per sequence, its touched keys' values in order (calls may share one)
    for i, agg in enumerate(plan["aggs"]):
        j = agg.get("seq")
        if j is None:
            continue
        if j not in touched_of:
            live = ordered[j]
            touched_of[j] = live.merge(t[keys], on=keys, how="inner").sort_values(SEQ, kind="stable") \
                if len(live) else live
        touched = touched_of[j]
        fn = agg["function"]
        if not len(touched):
            t[f"__m{i}"] = pd.Series([None] * len(t), dtype=object, index=t.index)
            continue
        grouped = touched.groupby(keys, dropna=False, sort=False)[VAL]
        if fn == "LISTAGG":
            picked = grouped.agg(lambda v: agg["separator"].join(v))
        elif fn == "ARRAY_AGG":
            picked = grouped.agg(list)
        elif fn == "JSON_OBJECTAGG":
            picked = grouped.agg(json_object)
        else:
            picked = grouped.first() if fn == "FIRST_VALUE" else grouped.last()
        # (a groupby hands keys that are all NULL back as float64: canonical again, to merge)
        merged = t[keys].merge(_canonical_keys(plan, picked.rename("__pick").reset_index()), on=keys, how="left")
        t[f"__m{i}"] = pd.Series(merged["__pick"].to_numpy(dtype=object), index=t.index).where(
            merged["__pick"].notna().to_numpy(), None)
    return t


def json_object(values) -> str:
    """JSON_OBJECTAGG of a key's live members (each its key, NUL, its JSON text: ``split``),
    ordered by key as Flink orders them; a key held twice fails the query in Flink's words."""
    pairs = sorted(v.rpartition("\0")[::2] for v in values)
    for (key, _), (other, _) in zip(pairs, pairs[1:]):
        if key == other:
            raise ValueError(f"Key '{key}'{DUPLICATE_KEY}")
    return "{" + ",".join(member for _, member in pairs if member) + "}"
