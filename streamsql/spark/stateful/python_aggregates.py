"""A Python aggregate function's (PyFlink's ``udaf``) accumulators in a GroupAggregate.

Flink keeps a Python AggregateFunction's accumulator per key in the operator's state and
calls ``accumulate`` for each row that adds to the key, ``retract`` for each row that takes
one back, then ``get_value``. Here a bucket's accumulator table (``accumulate``) holds the
accumulator of each key, pickled, in ``__u{i}``; ``fold`` brings the keys a micro-batch
touched up to date, each key's rows in arrival order. The function's own code runs row by
row (as Flink runs it), on the executors, in the call that folds the bucket.

Shipped by value with ``accumulate`` (pandas, numpy, Spark's cloudpickle and
``spark.udf_calls``, which reports a failure as a scalar function's is reported).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from streamsql.spark import udf_calls


def fold(agg: dict, i: int, t: pd.DataFrame, batch: pd.DataFrame, keys: list[str], sign: np.ndarray,
         ok: np.ndarray) -> tuple[pd.Series, pd.Series]:
    """The touched keys' (``t``'s rows) new accumulators (pickled) and values, from their old
    accumulators (``t['__u{i}']``, None: a new key) and the batch rows ``ok`` selects
    (FILTER), added where ``sign`` is 1 and retracted where it is -1."""
    from pyspark import cloudpickle

    function = agg["python"]
    _open(function)
    rows = _rows_per_key(t, batch, keys, ok)
    arguments = [_values(batch[c]) for c in agg["columns"]]
    old = t[f"__u{i}"].tolist()
    blobs, values = [None] * len(t), [None] * len(t)
    for r in range(len(t)):
        blob = old[r]
        accumulator = cloudpickle.loads(blob) if isinstance(blob, (bytes, bytearray)) \
            else _called(agg, function.create_accumulator)
        for p in rows.get(r, ()):
            args = [a[p] for a in arguments]
            _called(agg, function.accumulate if sign[p] > 0 else function.retract, accumulator, *args)
        blobs[r] = cloudpickle.dumps(accumulator)
        values[r] = _value(agg, function, accumulator)
    return pd.Series(blobs, dtype=object, index=t.index), pd.Series(values, dtype=object, index=t.index)


def folder(function, arity: int, distinct: bool = False):
    """What folds a Python aggregate function's rows (a plan.udfs.PythonFunction called with
    ``arity`` arguments): its AggregateFunction object, or a pandas one's ``PandasAggregate``;
    for a DISTINCT call, that in a ``DistinctAggregate``."""
    inner = PandasAggregate(function.function, arity) if function.vectorized else function.instance
    return DistinctAggregate(inner) if distinct else inner


def over_values(agg: dict, i: int, rows: pd.DataFrame, lo: np.ndarray, hi: np.ndarray) -> pd.Series:
    """The function over each frame [lo, hi] of the sorted ``rows`` (``over_frames``): rows
    carry their arguments (``__ca{i}_{j}``), a partition's summary row (arrival number below
    0) the pickled accumulator of the rows before (``__cb{i}``). Frames that start at the
    same row share one accumulator, taken forward to each frame's end."""
    frames = _Frames(agg, i, rows)
    out = [None] * len(lo)
    start, at, accumulator = None, 0, None
    for r in np.lexsort((hi, lo)):
        if lo[r] != start:
            start = int(lo[r])
            accumulator, at = frames.start(start)
        at = frames.take(accumulator, at, int(hi[r]))
        out[r] = _value(agg, frames.function, accumulator)
    return pd.Series(out, dtype=object)


def over_summaries(agg: dict, i: int, rows: pd.DataFrame, starts: np.ndarray, last: np.ndarray) -> list:
    """Each partition's accumulator of all its rows so far (pickled), from [starts, last]."""
    from pyspark import cloudpickle

    frames = _Frames(agg, i, rows)
    out = []
    for first, end in zip(starts, last):
        accumulator, at = frames.start(int(first))
        frames.take(accumulator, at, int(end))
        out.append(cloudpickle.dumps(accumulator))
    return out


class _Frames:
    """An OVER call's sorted rows, as ``over_values`` and ``over_summaries`` fold them: each
    row's arguments, whether it counts (LAG's rows kept for their values do not), whether it
    is a partition's summary, and a summary's pickled accumulator."""

    def __init__(self, agg: dict, i: int, rows: pd.DataFrame):
        self.agg, self.function = agg, agg["python"]
        _open(self.function)
        self.arguments = [_values(rows[f"__ca{i}_{j}"]) for j in range(len(agg["columns"]))]
        self.summary = rows["__seq"].to_numpy() < 0
        self.counted = (rows["__k"].to_numpy(dtype="int64") > 0) & ~self.summary
        self.blobs = rows[f"__cb{i}"].tolist()

    def start(self, at: int):
        """(the accumulator a frame starting at row ``at`` starts from, the first row to take)."""
        from pyspark import cloudpickle

        if self.summary[at] and isinstance(self.blobs[at], (bytes, bytearray)):
            return cloudpickle.loads(self.blobs[at]), at + 1
        return _called(self.agg, self.function.create_accumulator), at

    def take(self, accumulator, at: int, end: int) -> int:
        """Accumulate the rows that count in [at, end]; the next row to take."""
        for p in range(at, end + 1):
            if self.counted[p]:
                _called(self.agg, self.function.accumulate, accumulator, *[a[p] for a in self.arguments])
        return max(at, end + 1)


def values(agg: dict, accumulators: pd.Series) -> pd.Series:
    """The values of windows from the accumulators of their slices (a list of pickled ones
    per window, ``window_slices``): one slice's as it is, several merged into a fresh one
    (``merge(accumulator, accumulators)``, as Flink's slicing windows do)."""
    from pyspark import cloudpickle

    function = agg["python"]
    _open(function)
    out = []
    for blobs in accumulators:
        slices = [cloudpickle.loads(b) for b in blobs if isinstance(b, (bytes, bytearray))]
        if len(slices) == 1:
            accumulator = slices[0]
        else:
            accumulator = _called(agg, function.create_accumulator)
            _called(agg, function.merge, accumulator, slices)
        out.append(_value(agg, function, accumulator))
    return pd.Series(out, dtype=object, index=accumulators.index)


class PandasAggregate:
    """A pandas aggregate function (``func_type='pandas'``) as an AggregateFunction: its
    accumulator is the list of the arguments of the rows it took; its value, the function
    over them, one pandas Series per argument (as Flink hands it a window's rows)."""

    def __init__(self, function, arity: int):
        self.function, self.arity = function, arity

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, accumulator: list, *args) -> None:
        accumulator.append(args)

    def retract(self, accumulator: list, *args) -> None:
        accumulator.remove(args)  # (a row taken back was added before)

    def merge(self, accumulator: list, accumulators: list) -> None:
        for other in accumulators:
            accumulator.extend(other)

    def get_value(self, accumulator: list):
        return self.function(*[pd.Series([row[j] for row in accumulator]) for j in range(self.arity)])


class DistinctAggregate:
    """A DISTINCT call: its accumulator also counts each distinct argument tuple; the function
    takes a tuple when its count goes from 0 to 1 and gives it back when it returns to 0, as
    Flink's DISTINCT aggregates keep a value's count. Merged accumulators add their counts,
    and the function takes the tuples new to the first."""

    def __init__(self, inner):
        self.inner = inner

    def open(self, context) -> None:
        if hasattr(self.inner, "open"):
            self.inner.open(context)

    def create_accumulator(self) -> list:
        return [self.inner.create_accumulator(), {}]

    def accumulate(self, accumulator: list, *args) -> None:
        entry = accumulator[1].setdefault(_hashable(args), [args, 0])
        entry[1] += 1
        if entry[1] == 1:
            self.inner.accumulate(accumulator[0], *args)

    def retract(self, accumulator: list, *args) -> None:
        key = _hashable(args)
        entry = accumulator[1].get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del accumulator[1][key]
            self.inner.retract(accumulator[0], *args)

    def merge(self, accumulator: list, accumulators: list) -> None:
        for other in accumulators:
            for key, (args, count) in other[1].items():
                if key not in accumulator[1]:
                    accumulator[1][key] = [args, 0]
                    self.inner.accumulate(accumulator[0], *args)
                accumulator[1][key][1] += count

    def get_value(self, accumulator: list):
        return self.inner.get_value(accumulator[0])


def _hashable(args: tuple):
    try:
        hash(args)
        return args
    except TypeError:  # (an ARRAY or MAP argument)
        return repr(args)


def first_last_function(name: str, data_type):
    """FIRST_VALUE or LAST_VALUE (``name``) as a Python aggregate function (plan.udfs) folding
    ``FirstLast``: what a DISTINCT one is computed as, in a GROUP BY and in an OVER."""
    from streamsql.plan.udfs import PythonFunction

    folded = FirstLast(last=name == "LAST_VALUE")
    return PythonFunction(name, folded.accumulate, data_type, False, instance=folded, aggregate=True)


class _Values:
    """An aggregate function whose accumulator is the values that are not NULL, in order."""

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, accumulator: list, value) -> None:
        if value is not None:
            accumulator.append(value)


class FirstLast(_Values):
    """FIRST_VALUE / LAST_VALUE as an aggregate function that takes values back (under
    DISTINCT, ``DistinctAggregate`` hands it each value once): the values that are not NULL,
    in the order they came; the first or the last of those still there."""

    def __init__(self, last: bool):
        self.last = last

    def retract(self, accumulator: list, value) -> None:
        for at in range(len(accumulator) - 1, -1, -1):
            if accumulator[at] == value:
                del accumulator[at]
                return

    def merge(self, accumulator: list, accumulators: list) -> None:
        for other in accumulators:
            accumulator.extend(other)

    def get_value(self, accumulator: list):
        return (accumulator[-1] if self.last else accumulator[0]) if accumulator else None


class BuiltinOver(_Values):
    """COUNT, SUM, AVG, MIN, MAX, STDDEV_* and VAR_* as an aggregate function (in an OVER):
    what their DISTINCT calls fold, ``DistinctAggregate`` handing it each value once. The
    values that are not NULL; SUM wraps at the result's width (``bits``), an integer AVG
    truncates (Java's division of the long sum), a DECIMAL one rounds half up to ``scale``;
    STDDEV/VAR as Flink expands them with DISTINCT (``spark.over_spreads``): the distinct
    values' count and sum, and the sum of their distinct squares."""

    def __init__(self, function: str, kind: str | None, bits: int, scale: int):
        self.function, self.kind, self.bits, self.scale = function, kind, bits, scale

    def retract(self, accumulator: list, value) -> None:
        if value is not None:
            accumulator.remove(value)

    def get_value(self, accumulator: list):
        import decimal

        from streamsql.spark.stateful import spreads

        fn, values = self.function, accumulator
        if fn == "COUNT":
            return len(values)
        if not values:
            return None
        if fn in ("MIN", "MAX"):
            return min(values) if fn == "MIN" else max(values)
        total = sum(values)
        if fn == "SUM":
            return _wrapped(total, self.bits) if self.kind == "int" else total
        if fn == "AVG":
            if self.kind == "int":
                total = _wrapped(total, 64)
                return _wrapped(abs(total) // len(values) * (1 if total >= 0 else -1), self.bits)
            if self.kind == "float":
                return total / len(values)
            with decimal.localcontext(prec=80):
                return (total / len(values)).quantize(decimal.Decimal(1).scaleb(-self.scale), decimal.ROUND_HALF_UP)
        squares = {_wrapped(v * v, self.bits or 64) if self.kind == "int" else v * v for v in values}
        agg = {"function": fn, "kind": self.kind, "out_bits": self.bits, "out_scale": self.scale}
        n = np.array([len(values)], dtype="int64")
        kind = "int64" if self.kind == "int" else "float64" if self.kind == "float" else object
        value = spreads.over_spread(agg, n, np.array([total], dtype=kind), np.array([sum(squares)], dtype=kind)).iloc[0]
        return None if pd.isna(value) else value.item() if hasattr(value, "item") else value


def _wrapped(value: int, bits: int) -> int:
    """A Python integer as Java's ``bits``-wide integer holds it (0: as it is)."""
    if not bits:
        return value
    half = 1 << (bits - 1)
    return (value + half) % (2 * half) - half


class ListAgg(_Values):
    """LISTAGG(value [, separator]) as an aggregate function (in an OVER): the values that
    are not NULL, in order, joined; NULL when there are none."""

    def __init__(self, separator: str):
        self.separator = separator

    def get_value(self, accumulator: list):
        return self.separator.join(accumulator) if accumulator else None


class ArrayAgg:
    """ARRAY_AGG(value [IGNORE NULLS]) as an aggregate function (in an OVER): the values in
    order (NULLs too unless ignored); NULL when there are none (COLLECT: an empty array)."""

    def __init__(self, ignore_nulls: bool, collect: bool = False):
        self.ignore_nulls = ignore_nulls
        self.collect = collect

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, accumulator: list, value) -> None:
        if value is not None or not self.ignore_nulls:
            accumulator.append(value)

    def get_value(self, accumulator: list):
        return list(accumulator) if accumulator or self.collect else None


def _rows_per_key(t, batch, keys, ok) -> dict:
    """For each row of ``t`` (by position), the positions of its key's batch rows that count,
    in arrival order."""
    chosen = batch.loc[ok, keys].copy()
    chosen["__p"] = np.flatnonzero(ok)
    touched = t[keys].copy()
    touched["__r"] = np.arange(len(t))
    matched = chosen.merge(touched, on=keys, how="inner").sort_values("__p", kind="stable")
    positions = matched["__p"].to_numpy()
    return {r: positions[at] for r, at in matched.groupby("__r", sort=False).indices.items()}


def _values(column: pd.Series) -> list:
    """A column's values as Python objects, NULL as None (what a PyFlink function gets)."""
    return column.astype(object).where(column.notna(), None).tolist()


def _open(function) -> None:
    """``open`` once per worker (PyFlink's life cycle)."""
    if getattr(function, "_streamsql_opened", False) or not hasattr(function, "open"):
        return
    from streamsql.pyflink.table.udf import FunctionContext

    function.open(FunctionContext())
    function._streamsql_opened = True


def _value(agg: dict, function, accumulator):
    """``get_value``, checked against the declared result type (``udf_calls.result_check``)."""
    try:
        value = function.get_value(accumulator)
        return udf_calls.result_check(agg["result"].upper())(value) if agg.get("result") else value
    except Exception as error:
        udf_calls.failed(agg["udaf"], error, None, group=-1)  # (how many rows: the accumulator does not say)


def _called(agg: dict, method, *args):
    try:
        return method(*args)
    except Exception as error:
        udf_calls.failed(agg["udaf"], error, args[1:])
