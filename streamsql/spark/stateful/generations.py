"""A bucket's keyed rows in generations, so a micro-batch reads and writes only the keys it
brings, not the whole bucket (#10).

An operator that keeps rows per key (Rank: a partition's rows) stored a bucket's rows as
one value, read and rewritten whole by every micro-batch touching the bucket: with keys
spread over the buckets that is every bucket, so a micro-batch cost time in proportion to
all the state, and each rewrite went to the checkpoint's changelog. Spark's per-key state
calls from Python cost a round trip to the JVM each, too slow for the tens of thousands of
keys a micro-batch brings. So a bucket's rows are split by when they were written:

- every stored row carries ``__h``, the 64-bit hash of its key (Spark's ``xxhash64``,
  computed with the bucket: rows of one key share it; two keys may share one too);
- a *generation* is the rows one micro-batch wrote, one MapState entry (generation number
  → each table as Arrow IPC, lz4);
- the bucket's *index* (a ValueState, with the bucket count and the arrival counter) says
  which generations hold each hash's live rows: (hash, generation) pairs (a hash twice
  only in a store ``peek`` adds to: its rows in several generations, all live).

``load(hashes)`` reads only the generations that hold one of the micro-batch's hashes and
gives the operator those hashes' rows (and nothing else); ``store`` writes the operator's
rows for them as a new generation. Keys arriving close in time share generations, and a key
moves to the newest generation whenever it is written, so a micro-batch reads the few
generations its keys live in: the cost follows the keys it brings, not the state.

A generation a key moved out of is not rewritten then: the index no longer files the key's
hash under it, so its rows there are *stale*, read past (a load takes only the rows of the
hashes the index files under the generation). A generation is rewritten with its live rows
once fewer than half the hashes it was written with are still filed under it, and folded
into the new one once few rows are left, so every row written is rewritten about once at
most, whatever the keys: a micro-batch whose keys are spread over all the generations (Nexmark
q16's distinct bidders) reads them all but writes about what it brings, not the state. With a state TTL (the
operator's ``__t`` column, epoch ms of a key's last change), a generation whose newest
row is older than the TTL is dropped whole, unread. With ``expires`` (a column of epoch ms
below which the watermark retires a row: ``join_expiry``), a generation whose rows all lie
below the watermark is dropped whole, unread, too.

Shipped to Python workers by value with the operators (numpy, pandas, pyarrow, pyspark).
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import types as T

from streamsql.spark.stateful import accumulate, state_bytes

HASH = "__h"
TOUCHED = accumulate.TOUCHED  # (ranking's and joining's too)
# a generation left with fewer rows than this, or than a quarter of the new one, is folded
# into the new one
SMALL_ROWS = 512
# a store only looked up (``load(peek=True)``) adds its rows to its newest generation while
# that has fewer rows than this, so a trickle of micro-batches does not spread a key's rows
# over a generation each
APPEND_ROWS = 16_384
NEVER = 2 ** 63 - 1  # a generation's bound when one of its rows has none: the watermark never retires it
DROPPED = -1  # (an index entry's generation while a store removes it)


class Generations:
    """A bucket's tables (pandas, each with ``HASH``, or the column ``hashes`` names for it)
    for ``names``; ``load(hashes)`` gives (next_seq, tables of those hashes' rows, None for
    none), ``store(next_seq, tables)`` takes them back after the operator changed them."""

    def __init__(self, handle, plan: dict, names: list[str], operator: str, ttl_ms: int | None = None,
                 hashes: list[str] | None = None, store: str = "", expires: str | None = None):
        self.plan, self.operator, self.count, self.ttl_ms = plan, operator, len(names), ttl_ms
        self.expires = expires  # the column the watermark retires rows by (join_expiry), or None
        self.columns = hashes or [HASH] * len(names)  # the column each table is filed by
        # (``store``: a name for an operator's second store, e.g. a join's side)
        self.meta = handle.getValueState(f"index{store}", T.StructType([
            T.StructField("buckets", T.IntegerType(), False), T.StructField("next_seq", T.LongType(), False),
            T.StructField("last", T.LongType(), False), T.StructField("index", T.BinaryType(), False),
            T.StructField("generations", T.BinaryType(), False)]))
        self.generations = handle.getMapState(
            f"generations{store}", T.StructType([T.StructField("generation", T.LongType(), False)]),
            T.StructType([T.StructField(name, T.BinaryType(), True) for name in names]))

    # -- reading ------------------------------------------------------------------------------

    def load(self, hashes: np.ndarray, peek: bool = False) -> tuple[int, list]:
        """``peek``: the rows are only read — the generations stay as they are, and ``store``
        writes only the rows it is given, as a new generation (rows the operator never
        changes: an inner join's insert-only side, looked up by the other side's keys)."""
        stored = self.meta.get()
        # generation -> (its tables as read, stale rows and all; how many of its hashes were loaded)
        self.read: dict[int, tuple[list, int]] = {}
        self.peeked = peek
        if stored is None:
            self.last, self.hashes, self.gens = 0, np.zeros(0, "int64"), np.zeros(0, "int64")
            self.info = _Info.empty()
            return 0, [None] * self.count
        if stored[0] != self.plan["buckets"]:
            raise ValueError(f"This checkpoint's {self.operator} state has {stored[0]} buckets, the query asks "
                             f"for {self.plan['buckets']}: restart with the same count")
        next_seq, self.last = stored[1], stored[2]
        index = state_bytes.ipc_table(stored[3])
        self.hashes, self.gens = index.column(0).to_numpy(), index.column(1).to_numpy()
        self.info = _Info.read(stored[4])
        hit = _member(self.hashes, np.asarray(hashes, dtype="int64"))
        hit_gens, hit_hashes = self.gens[hit], self.hashes[hit]
        order = np.argsort(hit_gens, kind="stable")
        touched, starts, hits = np.unique(hit_gens[order], return_index=True, return_counts=True)
        self.held = dict(zip(*(a.tolist() for a in np.unique(self.gens, return_counts=True))))
        parts: list[list] = [[] for _ in range(self.count)]
        for generation, start, count in zip(touched.tolist(), starts.tolist(), hits.tolist()):
            value = self.generations.getValue((generation,))
            # its live hashes the micro-batch wants: a row of another hash is either not
            # wanted or stale (its key moved to a newer generation, the index no longer
            # files it here)
            mine_hashes = hit_hashes[order[start:start + count]]
            held = self.held[generation]
            whole = count == held and self.info.clean(generation, held)  # all its rows
            read = []
            for j, blob in enumerate(value):
                table = None if blob is None else state_bytes.ipc_table(blob)
                read.append(table)
                if table is None:
                    continue
                parts[j].append(table if whole else table.filter(_isin(table.column(self.columns[j]), mine_hashes)))
            if not peek:
                self.read[generation] = (read, count)
        if not peek:  # the loaded hashes' entries go: ``store`` writes them anew
            self.hashes, self.gens = self.hashes[~hit], self.gens[~hit]
        return next_seq, [_frame(p) for p in parts]

    # -- writing ------------------------------------------------------------------------------

    def store(self, next_seq: int, tables: list, now_ms: int | None = None, watermark: int | None = None,
              pinned: np.ndarray | None = None) -> None:
        """``watermark``: with ``expires``, the generations whose rows it has all passed go.
        ``pinned``: hashes whose generations the TTL keeps (an OVER partition with rows
        still waiting for the watermark)."""
        import pyarrow as pa

        new = self.last + 1
        written = [_arrow(t) for t in tables]
        rows = _rows(written)
        hashes, gens = [self.hashes], [self.gens]
        for generation, (read, taken) in self.read.items():
            live = self.held[generation] - taken  # hashes still filed under it
            stored, keys = self.info.rows[generation][0], self.info.written(generation, self.held[generation])
            left = stored * live // max(keys, 1)  # its live rows, about (a key's rows move together)
            if live == 0:
                self.generations.removeKey((generation,))
                self.info.drop(generation)
            elif left < max(SMALL_ROWS, rows // 4):  # its live rows folded into the new generation
                rest = self._live(generation, read, watermark)
                written = [_concat(a, b) for a, b in zip(written, rest)]
                rows += _rows(rest)
                moved = self.gens == generation
                gone = self._retired(moved, rest)
                gens[0] = np.where(gone, DROPPED, np.where(moved, new, gens[0]))
                self.generations.removeKey((generation,))
                self.info.drop(generation)
            elif 2 * live < keys:  # mostly stale: rewritten with its live rows only
                rest = self._live(generation, read, watermark)
                gone = self._retired(self.gens == generation, rest)
                gens[0] = np.where(gone, DROPPED, gens[0])
                if _rows(rest):
                    self.generations.updateValue((generation,), tuple(_bytes(t) for t in rest))
                    self.info.put(generation, _rows(rest), _newest(rest), self._bound(rest),
                                  live - int(np.count_nonzero(gone)))
                else:
                    self.generations.removeKey((generation,))
                    self.info.drop(generation)
            # else it stays as it is: its stale rows are read past until it is rewritten
        if rows:
            fresh = np.unique(np.concatenate([_unique_hashes(t, c) for t, c in zip(written, self.columns)
                                              if t is not None and t.num_rows]))
            if self.peeked and 0 < self.info.rows.get(self.last, (APPEND_ROWS,))[0] < APPEND_ROWS:
                new = self.last  # added to the newest generation
                before = self.generations.getValue((new,))
                written = [_concat(state_bytes.ipc_table(b) if b is not None else None, t)
                           for b, t in zip(before, written)]
                rows += self.info.rows[new][0]
            self.generations.updateValue((new,), tuple(_bytes(t) for t in written))
            fresh = fresh[~_member(fresh, hashes[0][gens[0] == new])]  # (already there, folded in)
            hashes.append(fresh)
            gens.append(np.full(len(fresh), new, dtype="int64"))
            self.last = new
        self.hashes, self.gens = np.concatenate(hashes), np.concatenate(gens)
        kept = self.gens != DROPPED
        self.hashes, self.gens = self.hashes[kept], self.gens[kept]
        if rows:
            self.info.put(new, rows, _newest(written), self._bound(written), int(np.count_nonzero(self.gens == new)))
        if self.ttl_ms:
            old = self.info.older_than((now_ms or 0) - self.ttl_ms)
            if old and pinned is not None and len(pinned):
                kept = set(np.unique(self.gens[_member(self.hashes, pinned)]).tolist())
                old = [g for g in old if g not in kept]
            self._expire(old)
        if self.expires and watermark is not None and watermark >= 0:
            self._expire(self.info.below(watermark))
        if not len(self.hashes):
            self.meta.clear()
            return
        index = pa.table({"h": pa.array(self.hashes, pa.int64()), "g": pa.array(self.gens, pa.int64())})
        self.meta.update((self.plan["buckets"], int(next_seq), int(self.last), state_bytes.ipc_bytes(index, "lz4"),
                          self.info.bytes()))

    def _live(self, generation: int, tables: list, watermark: int | None = None) -> list:
        """A generation's tables without the rows of hashes no longer filed under it (moved
        to a newer generation, or loaded now), nor, with ``expires``, the rows the watermark
        retired (a fold would carry them on, each new generation's bound recent)."""
        import pyarrow.compute as pc

        live = self.hashes[self.gens == generation]
        out = []
        for table, column in zip(tables, self.columns):
            if table is not None:
                keep = _isin(table.column(column), live)
                if self.expires and watermark is not None and self.expires in table.column_names:
                    keep = pc.and_(keep, pc.fill_null(pc.greater_equal(table.column(self.expires), watermark), True))
                table = table.filter(keep)
            out.append(table)
        return out

    def _retired(self, filed: np.ndarray, rest: list) -> np.ndarray:
        """Of the index entries ``filed`` (a generation's live hashes), those with no row left
        in ``rest`` (the watermark retired them all, ``_live``): they go from the index."""
        gone = np.zeros(len(self.hashes), dtype=bool)
        if self.expires:
            present = [_unique_hashes(t, c) for t, c in zip(rest, self.columns) if t is not None and t.num_rows]
            gone[filed] = ~_member(self.hashes[filed], np.concatenate(present) if present else np.zeros(0, "int64"))
        return gone

    def _bound(self, tables: list) -> int:
        """The largest ``expires`` of the tables' rows (NEVER: no such column, or a row without)."""
        import pyarrow.compute as pc

        if not self.expires:
            return NEVER
        bound = None
        for table in tables:
            if table is None or not table.num_rows:
                continue
            if self.expires not in table.column_names or table.column(self.expires).null_count:
                return NEVER
            value = pc.max(table.column(self.expires)).as_py()
            bound = value if bound is None else max(bound, value)
        return NEVER if bound is None else int(bound)

    def _expire(self, generations: list[int]) -> None:
        """Drop these generations, unread."""
        for generation in generations:
            self.generations.removeKey((generation,))
            self.info.drop(generation)
            keep = self.gens != generation
            self.hashes, self.gens = self.hashes[keep], self.gens[keep]


class _Info:
    """Each live generation's stored row count, newest ``__t`` (-1 when the rows have none),
    largest ``expires`` (NEVER: a row without one) and the count of hashes it was written
    with (``keys``: the index files fewer under it once some of its keys moved on; an earlier
    layout's index has neither column: it rewrote a generation whenever a key moved on)."""

    def __init__(self, rows: dict[int, tuple[int, int]], bounds: dict[int, int] | None = None,
                 keys: dict[int, int] | None = None):
        self.rows = rows
        self.bounds = bounds if bounds is not None else {}
        self.keys = keys if keys is not None else {}

    @classmethod
    def empty(cls) -> "_Info":
        return cls({})

    @classmethod
    def read(cls, blob: bytes) -> "_Info":
        table = state_bytes.ipc_table(blob)
        generations = table.column(0).to_pylist()

        def column(i: int) -> dict:
            return dict(zip(generations, table.column(i).to_pylist())) if table.num_columns > i else {}

        return cls({g: (n, t) for g, n, t in zip(generations, *(table.column(i).to_pylist() for i in (1, 2)))},
                   column(3), column(4))

    def put(self, generation: int, rows: int, newest: int, bound: int = NEVER, keys: int | None = None) -> None:
        self.rows[generation] = (rows, newest)
        self.bounds[generation] = bound
        if keys is not None:
            self.keys[generation] = keys

    def drop(self, generation: int) -> None:
        self.rows.pop(generation, None)
        self.bounds.pop(generation, None)
        self.keys.pop(generation, None)

    def written(self, generation: int, held: int) -> int:
        """How many hashes a generation the index files ``held`` hashes under was written with
        (an earlier layout's: ``held``, it had no stale rows)."""
        return self.keys.get(generation, held)

    def clean(self, generation: int, held: int) -> bool:
        """Whether a generation the index files ``held`` hashes under holds no stale rows."""
        return self.written(generation, held) == held

    def below(self, watermark: int) -> list[int]:
        """The generations whose rows all expire before ``watermark``."""
        return [g for g, bound in self.bounds.items() if bound < watermark]

    def older_than(self, oldest: int) -> list[int]:
        return [g for g, (_, newest) in self.rows.items() if 0 <= newest < oldest]

    def bytes(self) -> bytes:
        import pyarrow as pa

        items = sorted(self.rows.items())
        return state_bytes.ipc_bytes(pa.table({
            "g": pa.array([g for g, _ in items], pa.int64()), "rows": pa.array([n for _, (n, _) in items], pa.int64()),
            "newest": pa.array([t for _, (_, t) in items], pa.int64()),
            "bound": pa.array([self.bounds.get(g, NEVER) for g, _ in items], pa.int64()),
            "keys": pa.array([self.keys.get(g) for g, _ in items], pa.int64())}))


def _member(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``wanted`` (int64 arrays): pandas' hash table, where
    ``np.isin`` sorts both (an index of 3 M hashes against 300,000: 46 against 380 ms)."""
    import pandas as pd

    return pd.Series(values, copy=False).isin(wanted).to_numpy()


def _isin(column, wanted: np.ndarray):
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(column, value_set=pa.array(wanted, pa.int64()))


def _unique_hashes(table, column: str) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.unique(table.column(column)).to_numpy(zero_copy_only=False).astype("int64")


def _rows(tables: list) -> int:
    return sum(t.num_rows for t in tables if t is not None)


def _frame(parts: list):
    """The loaded rows of one table as pandas (accumulate's dtypes; none: an empty frame of
    its columns), or None when no generation held the table."""
    import pyarrow as pa

    if not parts:
        return None
    return state_bytes.frame_of(pa.concat_tables(parts, promote_options="permissive"), exact_ints=True)


def _arrow(frame):
    import pyarrow as pa

    if frame is None:
        return None
    return pa.Table.from_pandas(frame, preserve_index=False)


def _concat(a, b):
    import pyarrow as pa

    tables = [t for t in (a, b) if t is not None]
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")


def _bytes(table):
    """A table's bytes; one of no rows is kept too (its columns: a key's empty multiset)."""
    if table is None:
        return None
    return state_bytes.ipc_bytes(table, "lz4")


def _newest(tables: list) -> int:
    import pyarrow.compute as pc

    newest = -1
    for table in tables:
        if table is not None and table.num_rows and TOUCHED in table.column_names:
            value = pc.max(table.column(TOUCHED)).as_py()
            if value is not None:
                newest = max(newest, int(value))
    return newest
