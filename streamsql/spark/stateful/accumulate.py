"""GroupAggregate's accumulators for one bucket of group keys, folded with vectorised pandas.

This module runs in Spark's Python workers and is shipped to them by value (cloudpickle),
so it imports only pandas, numpy, pyarrow, ``agg_values``, ``spreads``, ``sequences``, ``python_aggregates``,
``distinct_pairs`` and ``state_bytes`` (shipped with it), and takes its
configuration as a plain dict,
the *plan* (built by ``group_aggregate.build_plan``):

    keys:       [(name, kind)]            kind: 'int' | 'float' | 'bool' | 'object'
    rowkind:    whether the input carries ``__rowkind`` (else every row is +I)
    aggs:       [{function, column, distinct, filter, kind, ms, seq, name, out_kind, out_bits, out_single}]
    multisets:  [(column, filter, kind)]  value → count per key, shared by MIN/MAX/DISTINCT calls
    sequences:  [(column, filter, kind, keep_nulls)]  a key's live values in arrival order, for
                LISTAGG/ARRAY_AGG/FIRST_VALUE/LAST_VALUE over retracting input (``sequences``)
    paired:     the multisets kept by (key, value) pair, their calls' results in ``acc``
                (``distinct_pairs``; hashed plans only)

A bucket's state is two kinds of tables keyed by the group key columns:

- ``acc``: one row per live key: ``__cnt`` (rows added minus rows retracted: the key is
  deleted when it reaches 0), per COUNT call ``__c{i}``, per SUM/AVG call ``__s{i}`` (sum of
  non-null values) and ``__n{i}`` (their count), per MIN/MAX call over insert-only input
  ``__m{i}`` (the extreme so far), per STDDEV/VAR call ``__n{i}`` (the count of values),
  ``__z{i}`` (the key's centre: its first value) and ``__p{i}``, ``__q{i}`` (the sums of
  the values' deviations from the centre and of their squares: additive, so a retraction
  subtracts exactly what its row added, and centred, so the variance does not cancel
  catastrophically as a plain sum of squares does), per Python aggregate function call
  ``__u{i}`` (its accumulator, pickled: ``python_aggregates``), and per call ``__o{i}``, the value
  last emitted (what ``-U``/``-D`` carry; also how identical updates are suppressed);
- one multiset per (column, filter) used by MIN/MAX/DISTINCT calls: rows (keys, ``__v``,
  ``__c``) with ``__c`` > 0, so retracting the current MIN/MAX finds the next one;
- after them, one sequence per (column, filter) used by an order-keeping call over
  retracting input: rows (keys, ``__v``, ``__c`` its arrival number), as Flink's
  ...WithRetract functions keep their lists (``sequences``).

``fold`` takes one micro-batch of a bucket (any number of keys): it sums the batch's
signed contributions per key (one groupby), outer-merges them into ``acc``, regroups the
multisets, recomputes the results of the keys the batch touched, and emits per changed
key ``+I``, ``-U``/``+U`` or ``-D`` (mini-batch semantics: a key's changes within the batch
are folded into one).
"""

from __future__ import annotations

import decimal
import time

import numpy as np
import pandas as pd

from streamsql.changelog import ADDS, DELETE, INSERT, ROWKIND_COLUMN as ROWKIND, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.spark.stateful import agg_values, distinct_pairs, python_aggregates, sequences, spreads, state_bytes

CNT, VAL, MULT = "__cnt", "__v", "__c"
TOUCHED = "__t"  # when a key last changed (epoch ms), kept with a state TTL
ORDER = "__order"


class BucketState:
    def __init__(self, acc: pd.DataFrame, multisets: list[pd.DataFrame]):
        self.acc = acc
        self.multisets = multisets


def canonical(series: pd.Series, kind: str) -> pd.Series:
    """One pandas dtype per kind, whatever came in (an integer column with NULLs is Int64 from
    transport and a blob, float64 from a state written before, or from Arrow elsewhere): keys and
    values from different batches then merge."""
    if kind == "int":
        return series if series.dtype == "Int64" else series.astype("Int64")
    if kind == "float":
        return series.astype("float64")
    if kind == "bool":
        return series.astype("boolean")
    if series.dtype == "float64":  # (a string or DECIMAL column of NULLs only comes as float64)
        return series.astype(object).where(series.notna(), None)
    return series


def fold(plan: dict, state: BucketState | None, batch: pd.DataFrame,
         now_ms: int | None = None) -> tuple[BucketState | None, pd.DataFrame]:
    """Fold a micro-batch of one bucket into its state: (new state or None when empty, changelog).
    With ``plan["ttl_ms"]`` a key's state expires that long after its last change (processing
    time, ``now_ms``; Flink's 'table.exec.state.ttl'): it is dropped without output, and a
    later row of the key starts afresh with ``+I``, as in Flink."""
    # DECIMAL(38) sums must not round at Python's 28 digits; a NULL DECIMAL key (NaN to pandas)
    # is compared with the others when pandas merges on keys, which must not raise
    with decimal.localcontext(prec=80) as context:
        context.traps[decimal.InvalidOperation] = False
        if plan.get("ttl_ms"):
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            state = _expire(plan, state, now_ms - plan["ttl_ms"])
        return _fold(plan, state, batch, now_ms)


def _expire(plan, state, oldest: int):
    """The state without the keys last changed before ``oldest``."""
    if state is None or TOUCHED not in state.acc.columns:
        return state
    stale = state.acc[TOUCHED].to_numpy(dtype="float64", na_value=0) < oldest
    if not stale.any():
        return state
    keys = [name for name, _ in plan["keys"]]
    dead = state.acc.loc[stale, keys].assign(__dead=True)
    acc = state.acc.loc[~stale].reset_index(drop=True)
    if acc.empty:
        return None
    return BucketState(acc, [_anti_join(ms, dead, keys) for ms in state.multisets])


def _fold(plan, state, batch, now_ms=None):
    keys = [name for name, _ in plan["keys"]]
    batch = batch.reset_index(drop=True)
    for name, kind in plan["keys"]:
        batch[name] = canonical(batch[name], kind)
    sign = (np.where(batch[ROWKIND].isin(ADDS).to_numpy(), 1, -1) if plan["rowkind"]
            else np.ones(len(batch))).astype("int64")
    delta, ms_delta = _contributions(plan, batch, keys, sign, spreads.centres(plan, state, batch, keys))
    _canonical_keys(plan, delta)

    n_ms = len(plan["multisets"])
    acc_cols = [c for c in delta.columns if c not in keys]
    out_cols = [f"__o{i}" for i in range(len(plan["aggs"]))]
    old = state.acc if state is not None else _empty_acc(delta, keys, out_cols)
    stat_cols = distinct_pairs.stat_columns(plan)
    if stat_cols:
        old = distinct_pairs.prepare(plan, old)
    merged = old.merge(delta, on=keys, how="outer", suffixes=("", "__d"), indicator=True)
    flag = merged.pop("_merge").to_numpy()
    hit = flag != "left_only"
    ttl = [TOUCHED] if plan.get("ttl_ms") else []
    untouched = merged.loc[~hit, keys + acc_cols + stat_cols + out_cols + [c for c in ttl if c in merged.columns]]
    t = merged.loc[hit].reset_index(drop=True)
    existed = flag[hit] == "both"
    for col in acc_cols:
        if col.startswith("__m"):
            t[col] = agg_values.extreme(t[col], t[col + "__d"], plan["aggs"][int(col[3:])])
        elif col.startswith("__z"):  # a key keeps its first centre
            t[col] = t[col].where(t[col].notna(), t[col + "__d"])
        elif col.startswith("__u"):  # a Python aggregate function's accumulators, and its values
            i = int(col[3:])
            agg = plan["aggs"][i]
            t[col], t[f"__w{i}"] = python_aggregates.fold(agg, i, t, batch, keys, sign, _taken(batch, agg["filter"]))
        else:
            t[col] = agg_values.zero_nulls(t[col]) + t[col + "__d"]

    multisets = []
    oldest = now_ms - plan["ttl_ms"] if ttl else None
    for j in range(n_ms):
        old_ms = state.multisets[j] if state is not None else None
        if j in plan.get("paired", ()):
            ms, t = distinct_pairs.advance(plan, j, old_ms, ms_delta[j], keys, t, existed,
                                           now_ms if ttl else None, oldest)
            multisets.append(ms)
        else:
            multisets.append(_merge_multiset(old_ms, ms_delta[j], keys))
    t = _multiset_stats(plan, t, multisets, keys)
    if plan.get("sequences"):
        ordered = sequences.advance(plan, state.multisets[n_ms:] if state is not None else None, batch, keys, sign)
        t = sequences.results(plan, t, ordered, keys)
        multisets += ordered

    new = [agg_values.shape(agg_values.result(agg, i, t), agg) for i, agg in enumerate(plan["aggs"])]
    count = t[CNT].to_numpy(dtype="int64", na_value=0)
    alive = count > 0
    same = np.ones(len(t), dtype=bool)
    for i, values in enumerate(new):
        same &= agg_values.equal(t[f"__o{i}"], values)
    inserts, deletes = ~existed & alive, existed & ~alive
    updates = existed & alive & ~same

    out = _changelog(plan, t, keys, new, inserts, deletes, updates)

    kept = t.loc[alive, keys + acc_cols + stat_cols].copy()
    for i, values in enumerate(new):
        kept[f"__o{i}"] = values[alive]
    if ttl:
        kept[TOUCHED] = np.int64(now_ms)
    acc = pd.concat([untouched, kept], ignore_index=True) if len(untouched) else kept.reset_index(drop=True)
    if (~alive).any() and multisets:
        dead = t.loc[~alive, keys].assign(__dead=True)
        multisets = [_anti_join(ms, dead, keys) for ms in multisets]
    if acc.empty:
        return None, out
    return BucketState(acc, multisets), out


def _contributions(plan, batch, keys, sign, centres):
    """Per key, the batch's signed sums (one groupby), and per multiset the (key, value) counts."""
    masks: dict = {}
    values: dict = {}

    def mask(column):
        if column not in masks:
            masks[column] = _taken(batch, column)
        return masks[column]

    def value(column, kind):
        if column not in values:
            values[column] = canonical(batch[column], kind)
        return values[column]

    parts = {k: batch[k] for k in keys}
    parts[CNT] = sign
    for i, agg in enumerate(plan["aggs"]):
        if agg["ms"] is not None or agg.get("seq") is not None:
            continue
        if agg.get("python") is not None:  # its accumulators are folded row by row (python_aggregates)
            parts[f"__u{i}"] = pd.Series([None] * len(batch), dtype=object)
            continue
        ok = mask(agg["filter"])
        if agg["function"] == "ARRAY_AGG":  # a one-value array per row it takes (NULLs too, unless ignored)
            v = value(agg["column"], agg["kind"])
            if agg["ignore_nulls"]:
                ok = ok & v.notna().to_numpy()
            items = v.astype(object).where(v.notna(), None).to_numpy(dtype=object)
            parts[f"__m{i}"] = pd.Series([[x] if o else None for x, o in zip(items, ok)], dtype=object)
            continue
        if agg["column"] is not None:
            v = value(agg["column"], agg["kind"])
            ok = ok & v.notna().to_numpy()
        if agg["function"] == "COUNT":
            parts[f"__c{i}"] = sign * ok
            continue
        if agg["function"] in agg_values.PICK:  # insert-only input: one value is enough
            parts[f"__m{i}"] = v.where(ok)
            continue
        if agg["function"] in spreads.SPREADS:
            deviation = np.where(ok, spreads.floats(v).to_numpy(dtype="float64", na_value=0.0) - centres[i], 0.0)
            parts[f"__n{i}"] = sign * ok
            parts[f"__z{i}"] = centres[i]
            parts[f"__p{i}"] = deviation * sign
            parts[f"__q{i}"] = deviation * deviation * sign
            continue
        parts[f"__n{i}"] = sign * ok
        if agg["kind"] == "int":
            parts[f"__s{i}"] = np.where(ok, v.to_numpy(dtype="int64", na_value=0), 0) * sign
        elif agg["kind"] == "float":
            parts[f"__s{i}"] = np.where(ok, v.to_numpy(dtype="float64", na_value=0.0), 0.0) * sign
        else:  # DECIMAL
            zero = decimal.Decimal(0)
            parts[f"__s{i}"] = pd.Series([x * s if o else zero for x, o, s in zip(v, ok, sign)], dtype=object)
    frame = pd.DataFrame(parts)
    how = {c: _how(plan, c) for c in frame.columns if c not in keys}
    grouped = frame.groupby(keys, dropna=False, sort=False)
    delta = (grouped.sum() if set(how.values()) == {"sum"} else grouped.agg(how)).reset_index()
    for col in delta.columns:
        if col not in keys and delta[col].dtype == "int64":
            delta[col] = delta[col].astype("Int64")

    ms_delta = []
    for j, (column, filter_column, kind) in enumerate(plan["multisets"]):
        v = value(column, kind)
        ok = mask(filter_column) & v.notna().to_numpy()
        sub = batch.loc[ok, keys].copy()
        sub[VAL] = v[ok]
        sub[MULT] = sign[ok]
        counted = _canonical_keys(plan, sub.groupby(keys + [VAL], dropna=False, sort=False)[MULT].sum().reset_index())
        counted[VAL] = canonical(counted[VAL], kind)
        if j in plan.get("paired", ()):
            counted[distinct_pairs.PAIR] = distinct_pairs.pair_hashes(
                counted[distinct_pairs.HASH].to_numpy(dtype="int64"), counted[VAL], kind)
        ms_delta.append(counted)
    return delta, ms_delta


def _taken(batch: pd.DataFrame, filter_column: str | None) -> np.ndarray:
    """Which rows a call takes: those its FILTER column holds true (NULL: false), or all."""
    if filter_column is None:
        return np.ones(len(batch), dtype=bool)
    return batch[filter_column].astype("boolean").fillna(False).to_numpy(dtype=bool)


def _canonical_keys(plan, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its group key columns in their canonical dtypes (a groupby hands keys
    that are all NULL back as float64), so it merges with the state."""
    for name, kind in plan["keys"]:
        if name in frame.columns:
            frame[name] = canonical(frame[name], kind)
    return frame


def _how(plan, column: str) -> str:
    """How a batch's rows of a key fold into one accumulator column."""
    if column.startswith("__m"):
        agg = plan["aggs"][int(column[3:])]
        if agg["function"] == "ARRAY_AGG":
            return agg_values.concatenated
        return agg_values.joined(agg["separator"]) if agg["function"] == "LISTAGG" else agg_values.PICK[agg["function"]]
    return "first" if column.startswith(("__z", "__u")) else "sum"


def _empty_acc(delta, keys, out_cols):
    acc = delta.iloc[:0].copy()
    for col in out_cols:
        acc[col] = pd.Series(dtype=object)
    return acc


def _merge_multiset(old, delta, keys):
    if old is None or old.empty:
        merged = delta
    elif delta.empty:
        return old
    else:
        merged = pd.concat([old, delta], ignore_index=True)
        merged = merged.groupby(keys + [VAL], dropna=False, sort=False)[MULT].sum().reset_index()
    return merged[merged[MULT] > 0].reset_index(drop=True)


def _multiset_stats(plan, t, multisets, keys):
    """MIN/MAX/DISTINCT results of the touched keys (columns __x{i}, __y{i}) from the multisets."""
    for j, ms in enumerate(multisets):
        calls = [(i, a) for i, a in enumerate(plan["aggs"]) if a["ms"] == j]
        if j in plan.get("paired", ()):  # (kept in acc: distinct_pairs)
            continue
        if ms.empty:
            for i, agg in calls:
                t[f"__x{i}"] = pd.Series([None] * len(t), dtype=object)
                t[f"__y{i}"] = 0
                if agg["function"] in spreads.SPREADS:
                    t[f"__n{i}"] = t[f"__p{i}"] = t[f"__q{i}"] = 0
            continue
        touched = ms.merge(t[keys], on=keys, how="inner")
        grouped = touched.groupby(keys, dropna=False, sort=False)[VAL]
        stats = {}
        for i, agg in calls:
            fn = agg["function"]
            if fn == "MIN":
                stats[f"__x{i}"] = grouped.min()
            elif fn == "MAX":
                stats[f"__x{i}"] = grouped.max()
            elif fn == "COUNT":
                stats[f"__x{i}"] = grouped.size()
            elif fn in spreads.SPREADS:  # DISTINCT: over the key's distinct values, centred on one of them
                stats.update(spreads.distinct_sums(i, touched, keys))
            else:  # SUM / AVG (DISTINCT)
                stats[f"__x{i}"] = grouped.sum()
                stats[f"__y{i}"] = grouped.size()
        t = t.merge(_canonical_keys(plan, pd.DataFrame(stats).reset_index()), on=keys, how="left")
    return t


def _changelog(plan, t, keys, new, inserts, deletes, updates) -> pd.DataFrame:
    names = [a["name"] for a in plan["aggs"]]
    position = np.arange(len(t)) * 2
    old = t[keys].copy()
    for i, name in enumerate(names):
        old[name] = t[f"__o{i}"]
    fresh = t[keys].copy()
    for name, values in zip(names, new):
        fresh[name] = values
    parts = []
    for frame, rows, kind, offset in ((fresh, inserts, INSERT, 0), (old, deletes, DELETE, 0),
                                      (old, updates, UPDATE_BEFORE, 0), (fresh, updates, UPDATE_AFTER, 1)):
        if kind == UPDATE_BEFORE and not plan.get("update_before", True):
            continue  # its consumer takes UPDATE_AFTER only (plan.update_kinds)
        if rows.any():
            part = frame.loc[rows].copy()
            part.insert(0, ROWKIND, kind)
            part[ORDER] = position[rows] + offset
            parts.append(part)
    if not parts:
        return pd.DataFrame({c: [] for c in [ROWKIND] + keys + names})
    out = pd.concat(parts, ignore_index=True).sort_values(ORDER, kind="stable")
    return out.drop(columns=[ORDER]).reset_index(drop=True)


def _anti_join(ms, dead, keys):
    if ms.empty:
        return ms
    marked = ms.merge(dead, on=keys, how="left")
    return marked[marked["__dead"].isna()].drop(columns=["__dead"]).reset_index(drop=True)


# -- state as bytes in the state store (``state_bytes``) ---------------------------------------


def encode(state: BucketState) -> list[bytes]:
    return [state_bytes.to_bytes(state.acc)] + [state_bytes.to_bytes(ms) for ms in state.multisets]


def decode(blobs) -> BucketState:
    frames = [state_bytes.from_bytes(b, exact_ints=True) for b in blobs]
    return BucketState(frames[0], frames[1:])
