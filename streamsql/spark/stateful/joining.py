"""A regular join of two changelogs for one bucket of join keys, with vectorised pandas.

This module runs in Spark's Python workers and is shipped to them by value (cloudpickle),
so it imports only pandas, numpy, ``accumulate`` and ``predicates`` and takes its configuration
as a plain dict, the *plan* (built by ``join.regular_join``):

    keys:       [column]           the equi-join key columns (``__k<i>``), on both sides
    left:       [column]           the left side's columns (``__l<j>``)
    right:      [column]           the right side's columns (``__r<j>``)
    kinds:      {column: kind}     how each column is held in pandas
    join_type:  InnerJoin | LeftOuterJoin | RightOuterJoin | FullOuterJoin | LeftSemiJoin | LeftAntiJoin
    output:     the columns emitted (a semi or anti join's: the left side's)
    residual:   the ON condition beyond the keys, as ``predicates`` evaluates it (or None)
    ttl_ms:     (left, right): how long each side's rows live after their last write (or None)

A bucket's state is each side's live rows, identical rows folded into one with a count
``__n``. ``fold`` takes a micro-batch (rows of both sides, ``__side`` 0 or 1, each with its
row kind) and emits the change of the join's result as Flink's join does, with the
mini-batch's changes folded: with L and R the sides before the batch and dL, dR their
changes, the joined rows change by dL ⋈ R + (L + dL) ⋈ dR (counts signed), pairs being
rows with equal keys for which the residual condition is TRUE. An outer side's row keeps
how many partners it has (``__a``, Flink's association count) and is null-padded while it
has none: when it gains its first partner its padded row is retracted (``-D``), when it
loses its last the padded row comes back (``+I``). A NULL key never matches. Retractions
come before insertions in the output, so a sink keyed by an upsert key sees a row's old
version deleted before its new one is written. A semi (anti) join emits a left row while it
has partners (none), from the same counts.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from streamsql.changelog import ADDS, DELETE, INSERT, ROWKIND_COLUMN as ROWKIND
from streamsql.spark.stateful import accumulate, predicates

SEMI = ("LeftSemiJoin", "LeftAntiJoin")  # emit left rows only, by whether they have a partner

SIDE, COUNT = "__side", "__n"
ASSOC = "__a"  # an outer side's row: how many partners it has (Flink's association count)
TOUCHED = "__t"  # when a row was last written (epoch ms), kept with a state TTL


def fold(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None, batch: pd.DataFrame,
         now_ms: int | None = None):
    """(left state, right state, changes: ``__rowkind`` then the left and right columns)."""
    keys = plan["keys"]
    batch = canonical_batch(plan, batch)
    sign = np.where(batch[ROWKIND].isin(ADDS).to_numpy(), 1, -1).astype("int64")
    side = batch[SIDE].to_numpy()
    left_cols, right_cols = keys + plan["left"], keys + plan["right"]
    kinds = plan["kinds"]
    ttl = plan.get("ttl_ms") or (None, None)
    if any(ttl):
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        left, right = _expire(left, ttl[0], now_ms), _expire(right, ttl[1], now_ms)
    join_type = plan["join_type"]
    semi = join_type in SEMI
    outer = counted_sides(join_type)
    residual = plan.get("residual")
    if outer[0]:
        left = _associated(left, right, keys, left_cols, right_cols, residual)
    if outer[1]:
        right = _associated(right, left, keys, right_cols, left_cols, residual)
    left, d_left = _apply(left, _signed(batch.loc[side == 0, left_cols], sign[side == 0], kinds), left_cols)
    right, d_right = _apply(right, _signed(batch.loc[side == 1, right_cols], sign[side == 1], kinds), right_cols)
    old_left, old_right = _before(left, left_cols), _before(right, right_cols)

    parts = [] if semi else [_join(d_left, old_right, keys, left_cols, right_cols, residual),
                             _join(left, d_right, keys, left_cols, right_cols, residual)]
    if outer[0]:
        left, padded = _padded(left, keys, left_cols, old_right, d_right, right_cols, residual, kinds,
                               matched=join_type == "LeftSemiJoin")
        parts.append(padded)
    if outer[1]:
        right, padded = _padded(right, keys, right_cols, old_left, d_left, left_cols, residual, kinds)
        parts.append(padded)
    out = _changes(plan, [p for p in parts if p is not None and len(p)])
    if any(ttl):
        left, right = _touch(left, ttl[0], now_ms), _touch(right, ttl[1], now_ms)
    return _live(left), _live(right), out


def _expire(state: pd.DataFrame | None, ttl_ms: int | None, now_ms: int) -> pd.DataFrame | None:
    """The side without its rows last written more than ``ttl_ms`` ago ('table.exec.state.ttl'
    or the STATE_TTL hint): they go without output, as Flink's expired state does. A row an
    outer side keeps counts its partners as it last saw them, so the expiry of a partner
    neither pads it nor retracts anything."""
    if state is None or not ttl_ms or TOUCHED not in state.columns:
        return state
    kept = state.loc[state[TOUCHED].to_numpy(dtype="float64", na_value=now_ms) >= now_ms - ttl_ms]
    return kept.reset_index(drop=True) if len(kept) else None


def _touch(state: pd.DataFrame, ttl_ms: int | None, now_ms: int) -> pd.DataFrame:
    """Rows written in this batch (their count or partner count changed) are stamped now."""
    if not ttl_ms:
        return state
    written = state[COUNT].to_numpy() != state["__old"].to_numpy()
    if ASSOC in state.columns:
        written |= state[ASSOC].to_numpy(dtype="float64", na_value=-1) != state["__olda"].to_numpy(
            dtype="float64", na_value=-1)
    stamps = state[TOUCHED].to_numpy(dtype="float64", na_value=now_ms) if TOUCHED in state.columns else \
        np.full(len(state), float(now_ms))
    return state.assign(**{TOUCHED: np.where(written, now_ms, stamps).astype("int64")})


def canonical_batch(plan: dict, batch: pd.DataFrame) -> pd.DataFrame:
    """A join operator's micro-batch (both sides, ``both_sides``' columns), each column as
    the pandas cores hold it (``_canonical``)."""
    batch = batch.reset_index(drop=True)
    for name, kind in plan["kinds"].items():
        batch[name] = _canonical(batch[name], kind)
    return batch


def counted_sides(join_type: str) -> tuple[bool, bool]:
    """(left, right): whether the join keeps a partner count (``ASSOC``) on that side's rows:
    an outer side (padded while it has none), and a semi or anti join's left side (emitted
    while it has some, or none)."""
    padded = padded_sides(join_type)
    return padded[0] or join_type in SEMI, padded[1]


def padded_sides(join_type: str) -> tuple[bool, bool]:
    """(left, right): whether the join keeps that side's rows without a partner, padded."""
    return join_type in ("LeftOuterJoin", "FullOuterJoin"), join_type in ("RightOuterJoin", "FullOuterJoin")


def appended(state: pd.DataFrame | None, rows: pd.DataFrame) -> pd.DataFrame | None:
    """A side's waiting rows (None: none) with ``rows`` after them."""
    if not len(rows):
        return state
    rows = rows.reset_index(drop=True)
    return rows if state is None else pd.concat([state, rows], ignore_index=True)


def shared_dtypes(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]) -> None:
    """Give ``columns`` one dtype in both frames, in place (object where they differ), as
    a merge on them needs."""
    for column in columns:
        if a[column].dtype != b[column].dtype:
            a[column], b[column] = a[column].astype(object), b[column].astype(object)


def nulls(kind: str, n: int):
    """A padding column of ``n`` NULLs, typed for its kind (an object column of None costs
    pandas a look at every value when it is concatenated)."""
    if kind in ("int", "float", "bool"):
        return np.full(n, np.nan)
    if kind == "time":
        return np.full(n, np.datetime64("NaT", "us"))
    return None


def _canonical(series: pd.Series, kind: str) -> pd.Series:
    """accumulate.canonical, timestamps as datetime64[us] (what the state's Arrow gives back;
    an all-NULL column a groupby turned into floats too), and NULL as None in object
    columns (merges then match it)."""
    if kind in ("int", "float", "bool"):
        return accumulate.canonical(series, kind)
    if kind == "time":
        if series.dtype == "datetime64[us]":
            return series
        if pd.api.types.is_datetime64_dtype(series.dtype):  # another unit: no parsing (to_datetime looks at values)
            return series.astype("datetime64[us]")
        return pd.to_datetime(series).astype("datetime64[us]")
    return series.astype(object).where(series.notna(), None)


def _signed(rows: pd.DataFrame, sign: np.ndarray, kinds: dict) -> pd.DataFrame:
    """Identical rows folded into one, with their summed signed count."""
    rows = rows.assign(**{COUNT: sign})
    if rows.empty:
        return rows.reset_index(drop=True)
    columns = [c for c in rows.columns if c != COUNT]
    folded = rows.groupby(columns, dropna=False, sort=False)[COUNT].sum().reset_index()
    for name in columns:  # grouping turns an all-NULL column into floats
        folded[name] = _canonical(folded[name], kinds.get(name, "object"))
    return folded[folded[COUNT] != 0].reset_index(drop=True)


def _apply(state: pd.DataFrame | None, delta: pd.DataFrame, columns: list[str]):
    """(new state with every row's count — zero for the rows that left — and the effective
    change: a retraction of a row the state does not hold changes nothing)."""
    if state is None or state.empty:
        state = pd.DataFrame({c: delta[c].iloc[0:0] for c in columns}).assign(**{COUNT: np.zeros(0, dtype="int64")})
    if delta.empty:
        return state.assign(__old=state[COUNT]), delta
    merged = state.merge(delta, on=columns, how="outer", suffixes=("", "__d"))
    old = merged[COUNT].fillna(0).astype("int64").to_numpy()
    new = np.maximum(old + merged[COUNT + "__d"].fillna(0).astype("int64").to_numpy(), 0)
    merged = merged.drop(columns=[COUNT + "__d"])
    merged[COUNT] = new
    merged["__old"] = old
    effective = merged.loc[new != old, columns].assign(**{COUNT: (new - old)[new != old]})
    return merged, effective.reset_index(drop=True)


def _before(state: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The side as it was before the batch (counts ``__old``)."""
    return state[columns].assign(**{COUNT: state["__old"].to_numpy()}).loc[state["__old"].to_numpy() > 0]


def _live(state: pd.DataFrame) -> pd.DataFrame | None:
    live = state.loc[state[COUNT].to_numpy() > 0].drop(columns=[c for c in ("__old", "__olda") if c in state])
    return live.reset_index(drop=True) if len(live) else None


def _matching(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows whose keys are all non-NULL (a NULL never equals anything)."""
    present = np.ones(len(rows), dtype=bool)
    for k in keys:
        present &= rows[k].notna().to_numpy()
    return rows.loc[present]


def _pairs(a: pd.DataFrame, b: pd.DataFrame | None, keys, a_columns, b_columns, residual) -> pd.DataFrame | None:
    """The rows of ``a`` and ``b`` with equal keys for which the residual ON condition holds,
    each with ``b``'s count (``__n``) and ``a``'s own columns as they are."""
    if b is None or a.empty or b.empty:
        return None
    b = _matching(b[b_columns + [COUNT]], keys)
    b = b.loc[b[COUNT].to_numpy() != 0]
    a = _matching(a, keys)
    if a.empty or b.empty:
        return None
    pairs = a.merge(b, on=keys)
    if residual is not None and len(pairs):
        pairs = pairs.loc[predicates.holds(residual, pairs)]
    return pairs


def _join(a, b, keys, a_columns, b_columns, residual) -> pd.DataFrame | None:
    """a ⋈ b on the keys and the residual condition, counts multiplied."""
    a = a[a_columns + [COUNT]]
    a = a.loc[a[COUNT].to_numpy() != 0].rename(columns={COUNT: "__na"})
    joined = _pairs(a, b, keys, a_columns, b_columns, residual)
    if joined is None or joined.empty:
        return None
    joined[COUNT] = joined[COUNT].to_numpy() * joined["__na"].to_numpy()
    return joined.drop(columns=["__na"])


NULL_AWARE = ("null_aware",)  # the residual of NOT IN's anti join: k = x OR k IS NULL OR x IS NULL


def null_aware_matches(rows: pd.DataFrame, other: pd.DataFrame | None, keys: list[str]) -> np.ndarray:
    """Per row of ``rows``: its partners in NOT IN's anti join (their counts summed). ``k NOT
    IN (x, ..)`` is TRUE only if no ``x`` equals ``k`` or is NULL, and a NULL ``k`` is UNKNOWN
    against any ``x``: an ``other`` row is a partner when its key equals, or is NULL, and
    every ``other`` row is a NULL key's partner (so only an empty subquery lets it through).
    The first key is ``k``; the others, if any, are a correlated NOT IN's equalities: a row's
    ``x`` are then only the ``other`` rows with those keys equal (none for a NULL one)."""
    out = np.zeros(len(rows), dtype="int64")
    if other is None or other.empty or rows.empty:
        return out
    key, group = keys[0], keys[1:]
    if group:
        return _grouped_null_aware_matches(rows, other, key, group)
    counts = other[COUNT].to_numpy(dtype="int64")
    nulls = other[key].isna().to_numpy()
    per_key = other.loc[~nulls].groupby(key, sort=False)[COUNT].sum()
    found = rows[key].map(per_key).to_numpy(dtype="float64", na_value=np.nan)
    out = np.nan_to_num(found).astype("int64") + int(counts[nulls].sum())
    out[rows[key].isna().to_numpy()] = int(counts.sum())
    return out


def _grouped_null_aware_matches(rows: pd.DataFrame, other: pd.DataFrame, key: str, group: list[str]) -> np.ndarray:
    """``null_aware_matches`` within groups of equal ``group`` keys."""
    out = np.zeros(len(rows), dtype="int64")
    other = _matching(other, group)
    mine = _matching(rows[group + [key]].assign(__rid=np.arange(len(rows))), group)
    if other.empty or mine.empty:
        return out
    other = other[group + [key, COUNT]].copy()
    shared_dtypes(mine, other, group + [key])
    nulls = other[key].isna().to_numpy()
    totals = other.assign(__nn=np.where(nulls, other[COUNT].to_numpy(dtype="int64"), 0)).groupby(
        group, sort=False).agg(__all=(COUNT, "sum"), __nn=("__nn", "sum")).reset_index()
    found = mine.merge(totals, on=group)
    null_key = found[key].isna().to_numpy()
    out[found["__rid"].to_numpy()] = np.where(null_key, found["__all"].to_numpy(dtype="int64"),
                                              found["__nn"].to_numpy(dtype="int64"))
    equal = _matching(mine, [key]).merge(other.loc[~nulls].groupby(group + [key], sort=False)[COUNT].sum()
                                         .reset_index(), on=group + [key])
    np.add.at(out, equal["__rid"].to_numpy(), equal[COUNT].to_numpy(dtype="int64"))
    return out


def _matches(rows: pd.DataFrame, other, keys, columns, other_columns, residual) -> np.ndarray:
    """Per row of ``rows``: how many rows of ``other`` are its partners (their counts summed)."""
    if residual == NULL_AWARE:
        return null_aware_matches(rows, other, keys)
    out = np.zeros(len(rows), dtype="int64")
    pairs = _pairs(rows[columns].assign(__rid=np.arange(len(rows))), other, keys, columns, other_columns, residual)
    if pairs is not None and len(pairs):
        sums = pairs.groupby("__rid")[COUNT].sum()
        out[sums.index.to_numpy()] = sums.to_numpy()
    return out


def _associated(state, other, keys, columns, other_columns, residual) -> pd.DataFrame | None:
    """An outer side's state with each row's partner count (``__a``), computed once for a
    state stored before the count was kept."""
    if state is None or ASSOC in state.columns:
        return state
    return state.assign(**{ASSOC: _matches(state, other, keys, columns, other_columns, residual)})


def _padded(state, keys, columns, old_other, d_other, other_columns, residual, kinds, matched=False):
    """(the outer side's state with its partner counts brought up to date, the change of its
    null-padded rows). A row is padded while it has no partner: its partner count comes from
    the state (as Flink's outer join keeps it), or, for a row new to the state, from the
    other side before the batch; the other side's changes in the batch then move it.
    ``matched``: the change of the rows that have a partner instead (a semi join's output)."""
    n_new, n_old = state[COUNT].to_numpy(), state["__old"].to_numpy()
    stored = (state[ASSOC].to_numpy(dtype="float64", na_value=np.nan) if ASSOC in state.columns
              else np.full(len(state), np.nan))
    fresh = n_old <= 0  # rows the state did not hold before this batch
    a_old = np.where(fresh, 0, np.nan_to_num(stored)).astype("int64")
    if fresh.any():
        a_old[fresh] = _matches(state.loc[fresh], old_other, keys, columns, other_columns, residual)
    a_new = np.maximum(a_old + _matches(state, d_other, keys, columns, other_columns, residual), 0)
    now, before = (a_new > 0, a_old > 0) if matched else (a_new == 0, a_old == 0)
    change = np.where((n_new > 0) & now, n_new, 0) - np.where((n_old > 0) & before, n_old, 0)
    padded = state.loc[change != 0, columns].assign(**{COUNT: change[change != 0]})
    for column in other_columns:
        if column not in columns:
            padded[column] = nulls(kinds.get(column, "object"), len(padded))
    return state.assign(__olda=stored, **{ASSOC: a_new}), padded


def _changes(plan, parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Signed rows as Flink's changelog: ``-D`` per retracted copy, then ``+I`` per added one."""
    columns = plan["output"] if "output" in plan else plan["left"] + plan["right"]
    if not parts:
        return pd.DataFrame(columns=[ROWKIND] + columns)
    with warnings.catch_warnings():  # all-NULL padding columns: their type is set just below
        warnings.simplefilter("ignore", FutureWarning)
        rows = pd.concat([p[columns + [COUNT]] for p in parts], ignore_index=True)
    for name in columns:
        rows[name] = _canonical(rows[name], plan["kinds"].get(name, "object"))
    if not columns:  # no column emitted (SELECT COUNT(*) .. WHERE k IN ..): rows told apart by kind only
        rows = pd.DataFrame({COUNT: [rows[COUNT].sum()]})
    else:
        rows = rows.groupby(columns, dropna=False, sort=False)[COUNT].sum().reset_index()
    rows = rows.loc[rows[COUNT].to_numpy() != 0]
    for name in columns:
        rows[name] = _canonical(rows[name], plan["kinds"].get(name, "object"))
    counts = rows[COUNT].to_numpy()
    order = np.argsort(counts > 0, kind="stable")  # retractions first
    rows, counts = rows.iloc[order], counts[order]
    out = rows.loc[rows.index.repeat(np.abs(counts)), columns].reset_index(drop=True)
    out.insert(0, ROWKIND, np.where(np.repeat(counts, np.abs(counts)) > 0, INSERT, DELETE))
    return out
