"""A regular join of two changelogs for one bucket of join keys, with vectorised pandas.

This module runs in Spark's Python workers and is shipped to them by value (cloudpickle),
so it imports only pandas, numpy and ``accumulate`` and takes its configuration as a plain dict, the
*plan* (built by ``join.regular_join``):

    keys:       [column]           the equi-join key columns (``__k<i>``), on both sides
    left:       [column]           the left side's columns (``__l<j>``)
    right:      [column]           the right side's columns (``__r<j>``)
    kinds:      {column: kind}     how each column is held in pandas
    join_type:  InnerJoin | LeftOuterJoin | RightOuterJoin | FullOuterJoin

A bucket's state is each side's live rows, identical rows folded into one with a count
``__n``. ``fold`` takes a micro-batch (rows of both sides, ``__side`` 0 or 1, each with its
row kind) and emits the change of the join's result as Flink's join does, with the
mini-batch's changes folded: with L and R the sides before the batch and dL, dR their
changes, the joined rows change by dL ⋈ R + (L + dL) ⋈ dR (counts signed). An outer side's
row is null-padded while its key has no partner: when a key gains its first partner the
padded rows are retracted (``-D``), when it loses its last they come back (``+I``). A NULL
key never matches. Retractions come before insertions in the output, so a sink keyed by
an upsert key sees a row's old version deleted before its new one is written.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from streamsql.spark.stateful import accumulate

ROWKIND = "__rowkind"  # streamsql.changelog.ROWKIND_COLUMN (not imported: shipped by value)
ADDS = ("+I", "+U")
SIDE, COUNT = "__side", "__n"


def fold(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None, batch: pd.DataFrame):
    """(left state, right state, changes: ``__rowkind`` then the left and right columns)."""
    keys = plan["keys"]
    batch = batch.reset_index(drop=True)
    for name, kind in plan["kinds"].items():
        batch[name] = _canonical(batch[name], kind)
    sign = np.where(batch[ROWKIND].isin(ADDS).to_numpy(), 1, -1).astype("int64")
    side = batch[SIDE].to_numpy()
    left_cols, right_cols = keys + plan["left"], keys + plan["right"]
    kinds = plan["kinds"]
    left, d_left = _apply(left, _signed(batch.loc[side == 0, left_cols], sign[side == 0], kinds), left_cols)
    right, d_right = _apply(right, _signed(batch.loc[side == 1, right_cols], sign[side == 1], kinds), right_cols)
    old_left, old_right = _before(left, d_left, left_cols), _before(right, d_right, right_cols)

    parts = [_join(d_left, old_right, keys), _join(left, d_right, keys)]
    join_type = plan["join_type"]
    if join_type in ("LeftOuterJoin", "FullOuterJoin"):
        parts.append(_padded(old_left, left, d_left, old_right, right, d_right, keys, plan["right"]))
    if join_type in ("RightOuterJoin", "FullOuterJoin"):
        parts.append(_padded(old_right, right, d_right, old_left, left, d_left, keys, plan["left"]))
    out = _changes(plan, [p for p in parts if p is not None and len(p)])
    return _live(left), _live(right), out


def _canonical(series: pd.Series, kind: str) -> pd.Series:
    """accumulate.canonical, timestamps as datetime64[us] (what the state's Arrow gives back;
    an all-NULL column a groupby turned into floats too), and NULL as None in object
    columns (merges then match it)."""
    if kind in ("int", "float", "bool"):
        return accumulate.canonical(series, kind)
    if kind == "time":
        return series if series.dtype == "datetime64[us]" else pd.to_datetime(series).astype("datetime64[us]")
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


def _before(state: pd.DataFrame, delta: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The side as it was before the batch (counts ``__old``)."""
    return state[columns].assign(**{COUNT: state["__old"].to_numpy()}).loc[state["__old"].to_numpy() > 0]


def _live(state: pd.DataFrame) -> pd.DataFrame | None:
    live = state.loc[state[COUNT].to_numpy() > 0].drop(columns=["__old"])
    return live.reset_index(drop=True) if len(live) else None


def _matching(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows whose keys are all non-NULL (a NULL never equals anything)."""
    present = np.ones(len(rows), dtype=bool)
    for k in keys:
        present &= rows[k].notna().to_numpy()
    return rows.loc[present]


def _join(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """a ⋈ b on the keys, counts multiplied (``a`` or ``b`` holds state counts ``__n``)."""
    a, b = _matching(a, keys), _matching(b, keys)
    a = a.loc[a[COUNT].to_numpy() != 0] if COUNT in a else a
    b = b.loc[b[COUNT].to_numpy() != 0] if COUNT in b else b
    if a.empty or b.empty:
        return None
    joined = a.drop(columns=[c for c in ("__old",) if c in a]).merge(
        b.drop(columns=[c for c in ("__old",) if c in b]), on=keys, suffixes=("", "__b"))
    joined[COUNT] = joined[COUNT].to_numpy() * joined[COUNT + "__b"].to_numpy()
    return joined.drop(columns=[COUNT + "__b"])


def _partners(other: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per key, how many rows the other side holds (``__p``)."""
    matching = _matching(other, keys)
    return matching.groupby(keys, sort=False)[COUNT].sum().rename("__p").reset_index()


def _padded(old_side, new_side, d_side, old_other, new_other, d_other, keys, other_columns):
    """The change of an outer side's null-padded rows, for the keys the batch touched: a
    key without a partner before and after pads the side's own change; a key that found
    its first partner retracts its padded rows; one that lost its last brings them back."""
    touched = pd.concat([d_side[keys], d_other[keys]], ignore_index=True).drop_duplicates()
    if touched.empty:
        return None
    live = new_side.loc[new_side[COUNT].to_numpy() > 0, keys + [c for c in new_side.columns
                                                                  if c not in keys and c not in (COUNT, "__old")] + [COUNT]]
    live_other = new_other.loc[new_other[COUNT].to_numpy() > 0]
    before = _has_partner(touched, old_other, keys)
    after = _has_partner(touched, live_other, keys)
    parts = [touched.loc[~before & ~after].merge(d_side, on=keys),
             _negate(touched.loc[~before & after].merge(old_side, on=keys)),
             touched.loc[before & ~after].merge(live, on=keys)]
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    rows = pd.concat(parts, ignore_index=True)
    for column in other_columns:
        rows[column] = None
    return rows


def _has_partner(touched: pd.DataFrame, other: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per touched key: whether the other side holds a row with it (never for a NULL key)."""
    counts = touched.merge(_partners(other, keys), on=keys, how="left")["__p"].fillna(0).to_numpy() > 0
    for k in keys:
        counts &= touched[k].notna().to_numpy()
    return counts


def _negate(rows: pd.DataFrame | None) -> pd.DataFrame | None:
    if rows is None:
        return None
    return rows.assign(**{COUNT: -rows[COUNT].to_numpy()})


def _changes(plan, parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Signed rows as Flink's changelog: ``-D`` per retracted copy, then ``+I`` per added one."""
    columns = plan["left"] + plan["right"]
    if not parts:
        return pd.DataFrame(columns=[ROWKIND] + columns)
    with warnings.catch_warnings():  # all-NULL padding columns: their type is set just below
        warnings.simplefilter("ignore", FutureWarning)
        rows = pd.concat([p[columns + [COUNT]] for p in parts], ignore_index=True)
    for name in columns:
        rows[name] = _canonical(rows[name], plan["kinds"].get(name, "object"))
    rows = rows.groupby(columns, dropna=False, sort=False)[COUNT].sum().reset_index()
    rows = rows.loc[rows[COUNT].to_numpy() != 0]
    for name in columns:
        rows[name] = _canonical(rows[name], plan["kinds"].get(name, "object"))
    counts = rows[COUNT].to_numpy()
    order = np.argsort(counts > 0, kind="stable")  # retractions first
    rows, counts = rows.iloc[order], counts[order]
    out = rows.loc[rows.index.repeat(np.abs(counts)), columns].reset_index(drop=True)
    out.insert(0, ROWKIND, np.where(np.repeat(counts, np.abs(counts)) > 0, "+I", "-D"))
    return out
