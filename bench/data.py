"""The benchmark's input: N Nexmark events written once as CSV files, and catalogs over them.

Events come from streamsql's Nexmark generator (the same one behind 'connector' =
'nexmark'); each of person/auction/bid is split into files of at most FILE_ROWS rows,
so a streaming read takes bounded micro-batches (one file each) instead of one
micro-batch holding the whole input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FILE_ROWS = 250_000
SIDE_INPUT = Path(__file__).resolve().parent.parent / "catalog" / "nexmark" / "side_input.sql"  # q13's table
KINDS = {"person": 0, "auction": 1, "bid": 2}  # event_type codes (generators.nexmark); flink_job.py
# imports this module in Flink's virtualenv, so streamsql and pyarrow are imported where used.
# person's id is NOT NULL (never NULL in Nexmark) so that a versioned person may declare it its key
# (bench/queries/temporal_join.sql): Flink refuses a key over a nullable column taken by LIKE.
COLUMNS = {
    "person": "id BIGINT NOT NULL, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING,"
              " `dateTime` TIMESTAMP(3), extra STRING",
    "auction": "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,"
               " `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), extra STRING",
}


def generate_files(directory: Path, events: int) -> dict:
    """Write the events (once: an existing complete directory is reused); the row counts."""
    import pyarrow.compute as pc

    from streamsql.runtime.generators.nexmark import NexmarkConfig, generate

    done = directory / "counts.json"
    if done.exists():
        return json.loads(done.read_text())
    print(f"Generating {events:,} Nexmark events into {directory} ...", file=sys.stderr)
    writers: dict[str, _SplitWriter] = {kind: _SplitWriter(directory / kind, kind) for kind in KINDS}
    for batch in generate(NexmarkConfig(events=events), 0, events):
        kinds = batch.column("event_type")
        for kind, code in KINDS.items():
            rows = batch.column(kind).filter(pc.equal(kinds, code))
            if len(rows):
                writers[kind].write(_flatten(rows))
    counts = {kind: writer.close() for kind, writer in writers.items()}
    (directory / "counts.json").write_text(json.dumps(counts))
    return counts


def _flatten(rows):
    """Struct rows as columns, timestamps as 'yyyy-MM-dd HH:mm:ss.SSS' text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns, names = [], []
    for field, column in zip(rows.type, rows.flatten()):
        if pa.types.is_timestamp(field.type):
            # Arrow's %S carries the fraction to microseconds: keep milliseconds.
            column = pc.utf8_slice_codeunits(pc.strftime(column, format="%Y-%m-%d %H:%M:%S"), 0, 23)
        columns.append(column)
        names.append(field.name)
    return pa.table(columns, names=names)


class _SplitWriter:
    def __init__(self, directory: Path, kind: str):
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.kind = directory, kind
        self.rows, self.file_rows, self.writer = 0, 0, None

    def write(self, table: pa.Table) -> None:
        if self.writer is None or self.file_rows >= FILE_ROWS:
            self._roll(table.schema)
        self.writer.write_table(table)
        self.rows += len(table)
        self.file_rows += len(table)

    def _roll(self, schema) -> None:
        import pyarrow.csv as csv

        if self.writer is not None:
            self.writer.close()
        path = self.directory / f"part-{self.rows // FILE_ROWS:05d}.csv"
        self.writer = csv.CSVWriter(path, schema, write_options=csv.WriteOptions(include_header=False))
        self.file_rows = 0

    def close(self) -> int:
        if self.writer is not None:
            self.writer.close()
        return self.rows


def streamsql_catalog(directory: Path, data: Path) -> Path:
    """A catalog whose database 'nexmark' holds person/auction/bid over the files, so the
    queries in queries/nexmark/ run on them unchanged."""
    database = directory / "nexmark"
    database.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        (database / f"{kind}.sql").write_text(table_ddl(kind, data / kind, "'source.max-files-per-batch' = '1'"))
    (database / "side_input.sql").write_text(side_input_ddl())
    return directory


def side_input_ddl() -> str:
    """The embedded catalog's side_input table (q13), its file by absolute path."""
    return SIDE_INPUT.read_text().replace("'nexmark/data/side_input.csv'", repr(str(side_input_file())))


def side_input_file() -> Path:
    return SIDE_INPUT.parent / "data" / "side_input.csv"


def spark_schema(kind: str) -> str:
    """The columns of person/auction/bid as a Spark DDL schema (Spark's TIMESTAMP has no precision)."""
    return COLUMNS[kind].replace("TIMESTAMP(3)", "TIMESTAMP").replace(" NOT NULL", "")


def table_ddl(kind: str, path: Path, *extra: str) -> str:
    options = ", ".join(["'connector' = 'filesystem'", f"'path' = '{path}'", "'format' = 'csv'", *extra])
    return (f"CREATE TABLE {kind} ({COLUMNS[kind]},\n"
            f"  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND\n) WITH ({options});\n")
