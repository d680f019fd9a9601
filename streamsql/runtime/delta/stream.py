"""A Delta table read as an unbounded source: its snapshot, then each commit as it lands.

delta-flink's streaming mode, with its option names: ``'mode' = 'streaming'`` makes the
table unbounded. The first micro-batch is the snapshot of the table's latest version (or,
with ``startingVersion``, nothing: the stream starts with the changes of that version);
each later one holds the data files that the commits since the last one added, read from
the commits themselves (``_delta_log/<version>.json``): so a row is read once, when its
commit lands. The offset is the last version read, in the job's checkpoint: a restarted job
goes on from there. As in delta-flink, a commit that removes data (a DELETE, UPDATE or
MERGE) stops the stream with an error naming the version, unless ``ignoreChanges`` (its
added files are read, so updated rows come again) or, for deletes only, ``ignoreDeletes``.
A commit that only rewrites files (OPTIMIZE: ``dataChange`` false) adds no rows.

The files are read with pyarrow in the executors (runtime.delta.source.read_file), a task
per file; the driver reads only the log.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from streamsql.errors import EXECUTOR_MARK, ConnectorError
from streamsql.plan.objects import TableDef
from streamsql.runtime.delta.source import File, read_file, snapshot_files
from streamsql.runtime.delta.table import check_protocol, columns, open_snapshot, spark_schema, table_path

NAME = "streamsql_delta_stream"


def is_streaming(table: TableDef) -> bool:
    return table.options.get("mode", "batch").lower() == "streaming"


def stream_frame(spark, table: TableDef):
    """The table's rows as an unbounded stream (see the module)."""
    from streamsql.spark.dialect import spark_type

    delta = open_snapshot(table, time_travel=False)
    check_protocol(table, delta)
    matched = columns(table, delta, reading=True)
    fields = {f.name: f for f in spark_schema(delta).fields}
    options = table.options
    spec = {
        "path": table_path(table), "label": f"Table '{table.name.name}'",
        "columns": [[c.delta, c.partition] for c in matched],
        "partitions": [c.delta for c in matched if c.partition],
        "types": {c.delta: fields[c.delta].dataType.jsonValue() for c in matched},
        "starting": int(options["startingVersion"]) if "startingVersion" in options else None,
        "ignore_changes": options.get("ignoreChanges", "false").lower() == "true",
        "ignore_deletes": options.get("ignoreDeletes", "false").lower() == "true",
    }
    spark.dataSource.register(DeltaStream)  # every time: a flag on the Python session object can outlive the JVM's
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    return spark.readStream.format(NAME).schema(schema).option("spec", json.dumps(spec)).load()


class DeltaStream(DataSource):
    @classmethod
    def name(cls):
        return NAME

    def streamReader(self, schema):
        return _Commits(json.loads(self.options["spec"]), schema)


class _Commits(DataSourceStreamReader):
    def __init__(self, spec: dict, schema):
        self.spec, self.schema = spec, schema

    def initialOffset(self):
        """Before the first micro-batch: the snapshot still to read, or the version before
        'startingVersion' (its changes come next)."""
        starting = self.spec["starting"]
        return {"version": -1, "snapshot": True} if starting is None else {"version": starting - 1}

    def latestOffset(self):
        from deltalake import DeltaTable

        return {"version": DeltaTable(self.spec["path"]).version()}

    def partitions(self, start, end):
        first, last = start["version"], end["version"]
        if last <= first:
            return []
        if start.get("snapshot"):  # the snapshot at the first micro-batch's version
            from deltalake import DeltaTable

            return [File(path, values) for path, values in
                    snapshot_files(DeltaTable(self.spec["path"], version=last), self.spec["partitions"])]
        return [file for version in range(first + 1, last + 1) for file in self._added(version)]

    def _added(self, version: int) -> list[File]:
        """The data files commit ``version`` added (with its partition values, as strings)."""
        root = Path(self.spec["path"].removeprefix("file://"))
        log = root / "_delta_log" / f"{version:020d}.json"
        try:
            actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        except OSError as error:
            raise ConnectorError(f"{EXECUTOR_MARK}{self.spec['label']}: cannot read Delta commit {version} ({log}):"
                                 f" {error.strerror} (removed by log retention before the job read it?)") from None
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        if removes and not self.spec["ignore_changes"] and not (self.spec["ignore_deletes"] and not adds):
            raise ConnectorError(
                f"{EXECUTOR_MARK}{self.spec['label']}: Delta commit {version} removes data (a DELETE, UPDATE or MERGE);"
                " a streaming read takes appends only: set 'ignoreChanges' = 'true' to read its added files (updated"
                " rows come again) or 'ignoreDeletes' = 'true' to skip deletes")
        return [File(_absolute(root, a["path"]), [a.get("partitionValues", {}).get(p) for p in self.spec["partitions"]])
                for a in adds]

    def read(self, partition: File):
        yield from read_file(self.spec, partition, self.schema)

    def commit(self, end):
        pass


def _absolute(root: Path, path: str) -> str:
    return unquote(path) if "://" in path else str(root / unquote(path))
