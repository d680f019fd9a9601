"""streamsql's lookup operator: a stream's rows joined with a PostgreSQL table by key.

A lookup join cut out of a query (spark.lookup_joins) runs here: the left rows, each with
its keys (``__lk<i>``, already cast to the dimension columns' types), go through
``mapInArrow``; per Arrow batch the task takes the batch's distinct keys, finds what it can
in its cache, asks PostgreSQL for the rest in one query per 10,000 keys
(``WHERE k = ANY(%s::t[])``; for several keys ``WHERE (k1, k2) IN (SELECT * FROM
unnest(%s::t1[], %s::t2[]))``), and hands back each row
with its dimension row's columns (several rows for a key that is not unique; for a LEFT
join, NULLs when none) — never a query per row. The database is read as it is at the time
of the lookup, as in Flink: a row changed under a running job is seen by the rows after.

**Flink's options.** ``lookup.cache`` = 'PARTIAL' keeps looked-up keys (their rows, or that
they had none, unless ``lookup.partial-cache.cache-missing-key`` = 'false') in a cache per
Python worker process, as Flink keeps one per task: at most
``lookup.partial-cache.max-rows`` keys (least recently used go first), each for
``lookup.partial-cache.expire-after-write`` after it was read and
``lookup.partial-cache.expire-after-access`` after it was last used. Without it (Flink's
'NONE') every batch asks the database. A failed query is retried ``lookup.max-retries``
times (Flink's default 3) on a new connection, a second more between each.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from streamsql.errors import EXECUTOR_MARK, ConnectorError
from streamsql.plan.objects import TableDef

KEYS_PER_QUERY = 10_000
DEFAULT_MAX_RETRIES = 3


@dataclass(frozen=True)
class LookupSpec:
    """A dimension table as the lookup operator asks it (plain data: shipped to the executors)."""

    params: dict
    relation: str
    select: tuple  # the dimension's columns as read (runtime.jdbc_source), in __d<j> order
    keys: tuple  # per key: its position in ``select``
    key_types: tuple  # per key: its PostgreSQL type (the arrays of keys are cast to it)
    label: str
    cache: bool = False
    max_rows: int | None = None
    expire_write_s: float | None = None
    expire_access_s: float | None = None
    cache_missing: bool = True
    max_retries: int = DEFAULT_MAX_RETRIES

    def query(self) -> str:
        """One key: ``k = ANY(array)`` (PostgreSQL plans it with the array's length, so an index
        on the key is used); several: the rows of their arrays unnested side by side."""
        if len(self.keys) == 1:
            return (f"SELECT {', '.join(self.select)} FROM {self.relation} WHERE {self.select[self.keys[0]]}"
                    f" = ANY(%s::{self.key_types[0]}[])")
        columns = ", ".join(self.select[p] for p in self.keys)
        arrays = ", ".join(f"%s::{t}[]" for t in self.key_types)
        return (f"SELECT {', '.join(self.select)} FROM {self.relation} WHERE ({columns}) IN"
                f" (SELECT * FROM unnest({arrays}))")


def resolve_lookup(table: TableDef, key_columns: list[str]) -> LookupSpec:
    """The dimension looked up on the driver (its table, columns and types checked as a scan's)."""
    from streamsql.plan.durations import parse_duration
    from streamsql.runtime.jdbc_source import pg_type, resolve_source

    source = resolve_source(table)
    names = [c.name for c in table.physical_columns]
    positions = tuple(names.index(k) for k in key_columns)
    options = table.options

    def seconds(key: str) -> float | None:
        return parse_duration(options[key]) / 1000 if key in options else None

    return LookupSpec(
        params=source.params, relation=source.relation, select=tuple(source.select), keys=positions,
        key_types=tuple(pg_type(table.physical_columns[p].type) for p in positions), label=source.label,
        cache=options.get("lookup.cache", "NONE").upper() == "PARTIAL",
        max_rows=int(options["lookup.partial-cache.max-rows"]) if "lookup.partial-cache.max-rows" in options else None,
        expire_write_s=seconds("lookup.partial-cache.expire-after-write"),
        expire_access_s=seconds("lookup.partial-cache.expire-after-access"),
        cache_missing=options.get("lookup.partial-cache.cache-missing-key", "true").lower() == "true",
        max_retries=int(options.get("lookup.max-retries", DEFAULT_MAX_RETRIES)),
    )


class Cache:
    """Keys -> their dimension rows, with Flink's partial cache's bounds (see the module)."""

    def __init__(self, spec: LookupSpec):
        self.spec = spec
        self.entries: OrderedDict = OrderedDict()  # key -> (rows, written at, used at)

    def get(self, key, now: float):
        entry = self.entries.get(key)
        if entry is None:
            return None
        rows, written, used = entry
        spec = self.spec
        if (spec.expire_write_s is not None and now - written >= spec.expire_write_s) or (
                spec.expire_access_s is not None and now - used >= spec.expire_access_s):
            del self.entries[key]
            return None
        self.entries[key] = (rows, written, now)
        self.entries.move_to_end(key)
        return rows

    def put(self, key, rows: list, now: float) -> None:
        if not rows and not self.spec.cache_missing:
            return
        self.entries[key] = (rows, now, now)
        self.entries.move_to_end(key)
        if self.spec.max_rows is not None:
            while len(self.entries) > self.spec.max_rows:
                self.entries.popitem(last=False)


_CACHES: dict = {}  # per worker process: repr(LookupSpec) -> Cache
_CONNECTIONS: dict = {}  # per worker process: the params' repr -> an open connection


class Lookup:
    """The function ``mapInArrow`` runs over the left rows (see the module)."""

    def __init__(self, spec: LookupSpec, schema, left: list[str], keys: int, outer: bool):
        self.spec, self.schema, self.left, self.key_count, self.outer = spec, schema, left, keys, outer

    def __call__(self, batches):
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow = to_arrow_schema(self.schema, timezone="UTC")
        self.dims = [arrow.field(i) for i in range(len(self.left), len(arrow))]
        self.dim_types = [f.type for f in self.dims]
        cache = _CACHES.setdefault(repr(self.spec), Cache(self.spec)) if self.spec.cache else None
        for batch in batches:
            yield from self._joined(batch, arrow, cache)

    def _joined(self, batch, arrow, cache):
        """The batch's rows with their dimension rows: its distinct keys looked up (in Python,
        once each), then an Arrow hash join of the rows with the rows found."""
        import pyarrow as pa

        names = [f"__lk{i}" for i in range(self.key_count)]
        rows = pa.Table.from_batches([batch])
        distinct = rows.select(names).group_by(names).aggregate([])
        keys = {k for k in zip(*[distinct.column(n).to_pylist() for n in names]) if None not in k}
        found = [row for matched in self._rows_of(keys, cache).values() for row in matched]
        right = pa.table({
            **{n: pa.array([r[p] for r in found], type=rows.schema.field(n).type) for n, p in zip(names, self.spec.keys)},
            **{f.name: pa.array([r[j] for r in found], type=f.type) for j, f in enumerate(self.dims)},
        })
        joined = rows.join(right, keys=names, join_type="left outer" if self.outer else "inner", use_threads=False)
        return joined.select([*self.left, *(f.name for f in self.dims)]).cast(arrow).to_batches()

    def _rows_of(self, wanted: set, cache) -> dict:
        now = time.monotonic()
        found, missing = {}, []
        for key in wanted:
            rows = cache.get(key, now) if cache is not None else None
            if rows is None:
                missing.append(key)
            else:
                found[key] = rows
        for start in range(0, len(missing), KEYS_PER_QUERY):
            chunk = missing[start:start + KEYS_PER_QUERY]
            looked = {key: [] for key in chunk}
            for row in self._query(chunk):
                key = tuple(row[p] for p in self.spec.keys)
                if key in looked:
                    looked[key].append(row)
            found.update(looked)
            if cache is not None:
                for key, rows in looked.items():
                    cache.put(key, rows, now)
        return found

    def _query(self, keys: list) -> list[tuple]:
        """The dimension rows of ``keys``, their values as Arrow gives them back (so a row's key
        compares equal to the left rows' keys)."""
        import psycopg
        import pyarrow as pa

        arrays = [list(values) for values in zip(*keys)]
        for attempt in range(self.spec.max_retries + 1):
            try:
                rows = _connection(self.spec).execute(self.spec.query(), arrays).fetchall()
                break
            except psycopg.Error as error:
                _CONNECTIONS.pop(repr(self.spec.params), None)
                if attempt == self.spec.max_retries or not isinstance(error, psycopg.OperationalError):
                    message = (str(error).strip().splitlines() or ["unknown error"])[0]
                    raise ConnectorError(f"{EXECUTOR_MARK}{self.spec.label}: lookup failed: {message}") from None
                time.sleep(attempt + 1)
        if not rows:
            return []
        columns = [pa.array(list(values), type=t).to_pylist() for values, t in zip(zip(*rows), self.dim_types)]
        return list(zip(*columns))


def _connection(spec: LookupSpec):
    from streamsql.runtime.jdbc_target import connect

    key = repr(spec.params)
    connection = _CONNECTIONS.get(key)
    if connection is None or connection.closed:
        connection = connect(spec.params)
        connection.autocommit = True  # each lookup sees the table as it is now
        _CONNECTIONS[key] = connection
    return connection


def with_lookups(spark, plan, to_sql):
    """``to_sql`` for a streaming query's SQL with its lookup joins into jdbc tables cut out
    (spark.lookup_joins) and their views made; ``to_sql`` itself when it has none."""
    from streamsql.plan.steps import spark_name
    from streamsql.spark.lookup_joins import cut_lookups

    dimensions = {spark_name(t.name): t for t in plan.tables if t.options["connector"] == "jdbc"
                  and spark_name(t.name) in plan.lookups and not any(c.is_computed for c in t.columns)}
    if not dimensions:
        return to_sql
    columns = {name: [c.name for c in t.physical_columns] for name, t in dimensions.items()}

    def sql(query) -> str:
        rewritten, cuts = cut_lookups(query, columns)
        for cut in cuts:
            lookup_view(spark, cut, dimensions[cut.table], to_sql)
        return to_sql(rewritten)

    return sql


def lookup_view(spark, cut, table: TableDef, to_sql) -> None:
    """Make ``cut.view`` (spark.lookup_joins): the left rows with the dimension's columns."""
    from pyspark.sql.types import StructField, StructType
    from sqlglot import exp

    from streamsql.spark.dialect import spark_type

    spec = resolve_lookup(table, cut.key_columns)
    types = {c.name: c.type for c in table.physical_columns}
    left_rows = spark.sql(to_sql(exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(cut.alias)))
                                 .from_(cut.left.copy())))
    left_view = f"{cut.view}_left"
    left_rows.createOrReplaceTempView(left_view)
    keys = [f"CAST({to_sql(key)} AS {spark_type(types[column])}) AS `__lk{i}`"
            for i, (key, column) in enumerate(zip(cut.keys, cut.key_columns))]
    frame = spark.sql(f"SELECT `{cut.alias}`.*, {', '.join(keys)} FROM `{left_view}` AS `{cut.alias}`")
    left = list(left_rows.columns)
    dims = StructType.fromDDL(", ".join(f"`{cut.dim_column(j)}` {spark_type(types[c])}" for j, c in enumerate(cut.columns)))
    schema = StructType([*(frame.schema[name] for name in left),
                         *[StructField(f.name, f.dataType, True) for f in dims.fields]])
    frame.mapInArrow(Lookup(spec, schema, left, len(keys), cut.outer), schema).createOrReplaceTempView(cut.view)
