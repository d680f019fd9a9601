"""Delta data files written from the executors, for the driver to commit (runtime.delta.sink).

**One file per task and partition value.** ``FileWriter`` is a ``mapInArrow`` function: a
task's rows, cast to the Delta schema's Arrow types (a ``timestamp_ntz`` column gets the
UTC wall-clock time without its zone, which is Flink's TIMESTAMP), are split by the
table's partition columns and each part written as one Snappy Parquet file under the table's
directory, ``<col>=<value>/.../part-<batch>-<uuid>.snappy.parquet`` (values URI-quoted,
NULL as ``__HIVE_DEFAULT_PARTITION__``; the directories are only names: readers take
partition values from the log). Partition columns are left out of the files, as the Delta
protocol has it. The task yields one row per file, its add action: the path relative to
the table, the size, the partition values (serialised as the protocol says: text, dates
ISO, timestamps ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC) and the file's statistics.

**Statistics** (``numRecords``, ``nullCount``, ``minValues``, ``maxValues``): readers skip
files by them, so they must be true bounds. Integers, dates and floats without NaN give their
exact extremes; timestamps are rounded outwards to the millisecond (the protocol's
precision); strings give a minimum cut to 32 characters (still a lower bound) and a maximum
only when it is at most 32 long; decimals, booleans, binary and nested columns give counts
only.

A file written by a task that then failed, or by a micro-batch that never committed, is in
the directory but not in the log: no reader sees it, and Delta's VACUUM removes it.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass
from urllib.parse import quote

from streamsql.changelog import INSERT, ROWKIND_COLUMN

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STRING_STATS = 32
ACTION_SCHEMA = "path STRING, size BIGINT, partition_values STRING, stats STRING, rows BIGINT"


@dataclass(frozen=True)
class FileWriter:
    """mapInArrow function: the task's rows as Delta data files; one add action per file."""

    root: str  # the table's URI (delta-rs's table_uri)
    schema: object  # pyarrow.Schema of the table's columns, Delta's names and types, in the frame's order
    partitions: tuple  # the partition columns (Delta's names)
    prefix: str  # part-<batch>: the files' name prefix
    label: str  # "Table 'name'", for errors

    def __call__(self, batches):
        import pyarrow as pa

        batches = [b for b in batches if b.num_rows]
        actions = []
        if batches:
            rows = pa.Table.from_batches(batches)
            if ROWKIND_COLUMN in rows.column_names:
                _check_insert_only(self.label, rows.column(ROWKIND_COLUMN))
                rows = rows.drop_columns([ROWKIND_COLUMN])
            rows = rows.rename_columns(self.schema.names).cast(self.schema)
            actions = [self._write(part, values) for part, values in _split(rows, self.partitions)]
        yield pa.RecordBatch.from_pylist(actions, schema=pa.schema([
            ("path", pa.string()), ("size", pa.int64()), ("partition_values", pa.string()),
            ("stats", pa.string()), ("rows", pa.int64())]))

    def _write(self, rows, values: dict) -> dict:
        import pyarrow.parquet as pq
        from pyarrow import fs as pafs

        filesystem, base = pafs.FileSystem.from_uri(self.root)
        base = base.rstrip("/")
        directory = "/".join(f"{name}={NULL_PARTITION if v is None else quote(v, safe='')}" for name, v in values.items())
        relative = (f"{directory}/" if directory else "") + f"{self.prefix}-{uuid.uuid4()}.snappy.parquet"
        if directory:
            filesystem.create_dir(f"{base}/{directory}", recursive=True)
        data = rows.drop_columns(list(self.partitions)) if self.partitions else rows
        pq.write_table(data, f"{base}/{relative}", filesystem=filesystem, compression="snappy")
        size = filesystem.get_file_info(f"{base}/{relative}").size
        return {"path": relative, "size": size, "partition_values": json.dumps(values),
                "stats": json.dumps(statistics(data)), "rows": rows.num_rows}


def _split(rows, partitions: tuple):
    """(rows, {partition column: serialised value}) for each partition value among the rows."""
    import pyarrow.compute as pc

    if not partitions:
        yield rows, {}
        return
    keys = rows.select(list(partitions)).group_by(list(partitions)).aggregate([])
    for key in keys.to_pylist():
        mask = None
        for name in partitions:
            column = rows.column(name)
            test = pc.is_null(column) if key[name] is None else pc.fill_null(pc.equal(column, key[name]), False)
            mask = test if mask is None else pc.and_(mask, test)
        yield rows.filter(mask), {name: partition_value(key[name]) for name in partitions}


def partition_value(value) -> str | None:
    """A partition value as the Delta protocol serialises it."""
    import datetime
    import decimal

    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, (datetime.date, int, decimal.Decimal)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise ValueError(f"cannot partition by a value of type {type(value).__name__}")


def statistics(data) -> dict:
    """The file's Delta statistics (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stats = {"numRecords": data.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name, column in zip(data.column_names, data.columns):
        kind = column.type
        if pa.types.is_nested(kind):
            continue
        stats["nullCount"][name] = column.null_count
        if column.null_count == len(column):
            continue
        bounds = None
        if pa.types.is_integer(kind) or pa.types.is_date(kind):
            bounds = _min_max(column)
            if pa.types.is_date(kind):
                bounds = tuple(v.isoformat() for v in bounds)
        elif pa.types.is_floating(kind) and not pc.any(pc.is_nan(column)).as_py():
            bounds = tuple(v if math.isfinite(v) else None for v in _min_max(column))
        elif pa.types.is_timestamp(kind):
            bounds = _timestamp_bounds(column, kind.tz is not None)
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            low, high = _min_max(column)
            bounds = (low[:STRING_STATS], high if len(high) <= STRING_STATS else None)
        if bounds is None:
            continue
        if bounds[0] is not None:
            stats["minValues"][name] = bounds[0]
        if bounds[1] is not None:
            stats["maxValues"][name] = bounds[1]
    return stats


def _min_max(column) -> tuple:
    import pyarrow.compute as pc

    extremes = pc.min_max(column)
    return extremes["min"].as_py(), extremes["max"].as_py()


def _timestamp_bounds(column, utc: bool) -> tuple[str, str]:
    """The extremes in milliseconds, the minimum rounded down and the maximum up."""
    import datetime

    import pyarrow as pa
    import pyarrow.compute as pc

    micros = pc.min_max(column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64()))
    low, high = micros["min"].as_py() // 1000, -(-micros["max"].as_py() // 1000)
    suffix = "Z" if utc else ""
    epoch = datetime.datetime(1970, 1, 1)

    def text(ms: int) -> str:
        return (epoch + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + suffix

    return text(low), text(high)


def _check_insert_only(label: str, kinds) -> None:
    import pyarrow.compute as pc

    others = pc.unique(pc.filter(kinds, pc.not_equal(kinds, INSERT))).to_pylist()
    if others:
        raise RuntimeError(
            f"{label}: the table has no PRIMARY KEY, so it takes inserts only, but the query produced"
            f" '{others[0]}' rows; declare PRIMARY KEY (...) NOT ENFORCED to upsert and delete by it")


def now_ms() -> int:
    return int(time.time() * 1000)
