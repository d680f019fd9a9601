"""COUNT/SUM/AVG DISTINCT kept by (key, value) pair, so a micro-batch reads only the pairs
it brings (#10).

A DISTINCT call keeps, per group key, its values with their multiplicities (accumulate's
multisets: rows (keys, ``__v``, ``__c``)). Recomputing a key's result from all of its values
reads them all whenever the key is touched: for a few keys with many values (Nexmark q16:
the distinct bidders and auctions of a channel and day) every micro-batch read and rewrote
the whole state. When every call over a multiset is COUNT, SUM or AVG — a result a value
adds to when it first appears and takes away when its last row goes — the multiset is
*paired*:

- each of its rows carries ``__ph``, a 64-bit hash of (its key's hash, its value), so the
  state store (``generations``) files it by pair rather than by key and loads only the pairs
  a micro-batch brings;
- the calls' results are kept with the key's accumulators (``__x{i}`` the distinct sum or
  count, ``__y{i}`` the distinct count), and a micro-batch adds what it changed: +1 (and the
  value) for a pair whose multiplicity leaves 0, -1 for one that returns to it.

A pair row is only meaningful while its key lives: the pairs of a key that is new in a
micro-batch are stale (left by an inconsistent changelog, or outlived by a key dropped by
the TTL) and count as absent. With a state TTL a pair row also carries ``__t`` (when it was
last written) and one older than the TTL counts as absent, as Flink's per-entry state TTL
on a DISTINCT's map view does.

Shipped to Python workers by value with ``accumulate`` (numpy and pandas only; it takes
accumulate's ``canonical`` helpers when it runs, as ``sequences`` does: accumulate imports it).
"""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd

PAIR = "__ph"
HASH = "__h"  # (generations.HASH: the key's hash, the first group key of a hashed plan)
VAL, MULT, TOUCHED = "__v", "__c", "__t"  # (accumulate's)
PAIRABLE = ("COUNT", "SUM", "AVG")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def paired(aggs: list[dict], multisets: list) -> list[int]:
    """The multisets whose every call is COUNT, SUM or AVG (DISTINCT)."""
    return [j for j in range(len(multisets))
            if all(a["function"] in PAIRABLE for a in aggs if a["ms"] == j)]


def stat_columns(plan: dict) -> list[str]:
    """The accumulator columns of the calls over paired multisets."""
    pairs = set(plan.get("paired", ()))
    columns = []
    for i, agg in enumerate(plan["aggs"]):
        if agg["ms"] in pairs:
            columns += [f"__x{i}", f"__y{i}"]
    return columns


def pair_hashes(key_hashes, values: pd.Series, kind: str) -> np.ndarray:
    """The hash of each (key hash, value): the same for a pair whichever micro-batch brings it."""
    if kind in ("int", "bool"):
        plain = values.to_numpy(dtype="int64")
    elif kind == "float":
        plain = values.to_numpy(dtype="float64") + 0.0  # (-0.0 is 0.0)
    else:
        plain = values.astype(object).to_numpy(dtype=object)
    mixed = pd.util.hash_array(np.asarray(key_hashes, dtype="int64")) * _MIX ^ pd.util.hash_array(plain)
    return mixed.view("int64")


def wanted(plan: dict, batch: pd.DataFrame) -> np.ndarray:
    """The pair hashes a micro-batch's rows bring (every non-NULL value of a paired column)."""
    from streamsql.spark.stateful.accumulate import canonical

    parts = []
    for column, kind in sorted({plan["multisets"][j][0::2] for j in plan.get("paired", ())}):
        values = canonical(batch[column], kind)
        present = values.notna().to_numpy()
        parts.append(pair_hashes(batch[HASH].to_numpy(dtype="int64")[present], values[present], kind))
    return np.concatenate(parts) if parts else np.zeros(0, "int64")


def prepare(plan: dict, acc: pd.DataFrame) -> pd.DataFrame:
    """``acc`` with the paired calls' columns (0 for a key without them) in exact dtypes, so
    merging in new keys does not turn a BIGINT sum into a float."""
    for i, agg in enumerate(plan["aggs"]):
        if agg["ms"] not in plan.get("paired", ()):
            continue
        for name in (f"__x{i}", f"__y{i}"):
            exact = "Int64" if name.startswith("__y") or agg["function"] == "COUNT" or agg["kind"] in ("int", "bool") \
                else ("float64" if agg["kind"] == "float" else object)
            if name not in acc.columns:
                acc[name] = pd.Series([0] * len(acc), dtype=exact, index=acc.index)
            elif exact != object and acc[name].dtype != exact:
                acc[name] = acc[name].astype(exact)
    return acc


def advance(plan: dict, j: int, old: pd.DataFrame | None, delta: pd.DataFrame, keys: list[str],
            t: pd.DataFrame, existed: np.ndarray, now_ms: int | None, oldest: int | None):
    """Fold the batch's counts of paired multiset ``j`` (``delta``: keys, ``__v``, ``__c``,
    ``__ph``) into its loaded rows ``old``; add what changed to the touched keys' results in
    ``t`` (one row per touched key; ``existed``: it had state before). Gives (the rows to
    store, ``t``)."""
    if old is not None and len(old):
        fresh = t.loc[~existed, keys]
        if len(fresh):  # a new key's pairs are stale
            marked = old.merge(fresh.assign(__fresh=True), on=keys, how="left")
            old = marked[marked["__fresh"].isna()].drop(columns=["__fresh"])
        if oldest is not None and TOUCHED in old.columns:  # expired pairs count as absent
            old = old[old[TOUCHED].to_numpy(dtype="float64", na_value=0) >= oldest]
        # (hashes as nullable Int64: the outer merge would make them float64 and lose bits)
        old, delta = old.astype({PAIR: "Int64"}), delta.astype({PAIR: "Int64"})
        merged = old.reset_index(drop=True).merge(delta, on=keys + [VAL], how="outer", suffixes=("", "__d"))
        brought = merged[MULT + "__d"].notna().to_numpy()
        before = merged[MULT].to_numpy(dtype="int64", na_value=0)
        merged[PAIR] = merged[PAIR].where(merged[PAIR].notna(), merged[PAIR + "__d"])
        after = before + merged[MULT + "__d"].to_numpy(dtype="int64", na_value=0)
        merged = merged.drop(columns=[MULT + "__d", PAIR + "__d"])
    else:
        merged = delta.copy()
        brought = np.ones(len(merged), dtype=bool)
        before = np.zeros(len(merged), dtype="int64")
        after = merged[MULT].to_numpy(dtype="int64")
    change = (after > 0).astype("int64") - (before > 0)
    merged[MULT] = after
    t = _add(plan, j, t, merged.loc[change != 0, keys + [VAL]], change[change != 0], keys)
    if now_ms is not None:
        stamp = merged[TOUCHED].to_numpy(dtype="float64", na_value=0) if TOUCHED in merged.columns \
            else np.zeros(len(merged))
        merged[TOUCHED] = np.where(brought, now_ms, stamp).astype("int64")
    kept = merged[after > 0].reset_index(drop=True)
    kept[PAIR] = kept[PAIR].astype("int64")
    return kept, t


def _add(plan, j, t, changed: pd.DataFrame, change: np.ndarray, keys):
    """``t`` with each paired call over multiset ``j`` moved by its keys' changed values."""
    from streamsql.spark.stateful.accumulate import _canonical_keys

    calls = [(i, a) for i, a in enumerate(plan["aggs"]) if a["ms"] == j]
    if not len(changed):
        return t
    kind = calls[0][1]["kind"]
    parts = changed[keys].copy()
    parts["__dn"] = change
    if any(a["function"] != "COUNT" for _, a in calls):
        values = changed[VAL]
        if kind in ("int", "bool"):
            parts["__ds"] = values.to_numpy(dtype="int64") * change
        elif kind == "float":
            parts["__ds"] = values.to_numpy(dtype="float64") * change
        else:  # DECIMAL
            parts["__ds"] = pd.Series([v * int(c) for v, c in zip(values, change)], dtype=object, index=parts.index)
    sums = _canonical_keys(plan, parts.groupby(keys, dropna=False, sort=False).sum().reset_index())
    moved = t[keys].merge(sums, on=keys, how="left")
    dn = moved["__dn"].to_numpy(dtype="int64", na_value=0)
    for i, agg in calls:
        if agg["function"] == "COUNT":
            t[f"__x{i}"] = t[f"__x{i}"].astype("Int64").fillna(0) + dn
            continue
        t[f"__y{i}"] = t[f"__y{i}"].astype("Int64").fillna(0) + dn
        ds = moved["__ds"]
        if kind in ("int", "bool"):
            t[f"__x{i}"] = t[f"__x{i}"].astype("Int64").fillna(0) + ds.to_numpy(dtype="int64", na_value=0)
        elif kind == "float":
            t[f"__x{i}"] = t[f"__x{i}"].astype("float64").fillna(0.0) + ds.to_numpy(dtype="float64", na_value=0.0)
        else:
            zero = decimal.Decimal(0)
            t[f"__x{i}"] = pd.Series([(zero if _missing(a) else a) + (zero if _missing(b) else b)
                                      for a, b in zip(t[f"__x{i}"], ds)], dtype=object, index=t.index)
    return t


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))
