"""STOP JOB ... WITH DRAIN: fire every open window before stopping, as Flink does.

Flink drains by sending its maximal watermark through the job. Spark has no way to set a
running query's watermark, so each watermarked, unbounded source is read together with a
private directory that stays empty; draining writes one sentinel row with the largest
timestamp there. It moves the watermark past every window (they fire), and is filtered
out right after the watermark is taken, so no result ever contains it. A drained job has
finished: its watermark is at the end of time, as a drained Flink job's is.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from streamsql.errors import StreamsqlError
from streamsql.plan.connectors import KAFKA, csv_separator
from streamsql.plan.objects import TableDef

SENTINEL = "9999-12-31 23:59:59.999"


class DrainSources:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="streamsql-drain-"))
        self.tables: dict[Path, TableDef] = {}
        self.released = False

    def can_drain(self, table: TableDef) -> bool:
        column = table.column(table.watermark.column) if table.watermark else None
        return column is not None and not column.is_computed and sentinel_format(table) in ("csv", "json")

    def directory(self, table: TableDef) -> Path:
        folder = self.root / f"{table.name.database}__{table.name.name}"
        folder.mkdir(exist_ok=True)
        self.tables[folder] = table
        return folder

    def release(self) -> None:
        """Write each source's sentinel row (renamed into place, so it is read whole)."""
        if self.released:
            return
        self.released = True
        for folder, table in self.tables.items():
            text = _sentinel_row(table)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.replace(tmp, folder / f"drain.{sentinel_format(table)}")


def drained(query) -> bool:
    """The query has run the micro-batch in which its watermark reached the sentinel."""
    progress = query.lastProgress or {}
    watermark = (progress.get("eventTime") or {}).get("watermark")
    return watermark is None or watermark.startswith("9999")


def sentinel_format(table: TableDef) -> str | None:
    """The file format of the table's drain directory: its own, or JSON for a Kafka table."""
    return "json" if table.options["connector"] in KAFKA else table.options.get("format")


def _sentinel_row(table: TableDef) -> str:
    names = [c.name for c in table.physical_columns]
    if sentinel_format(table) == "json":
        return json.dumps({table.watermark.column: SENTINEL}) + "\n"
    out = io.StringIO()
    separator = csv_separator(table.options)
    csv.writer(out, delimiter=separator, lineterminator="\n").writerow(
        [SENTINEL if n == table.watermark.column else "" for n in names]
    )
    return out.getvalue()


def not_drainable(table: TableDef) -> StreamsqlError:
    return StreamsqlError(f"Table '{table.name.name}' cannot be drained (its watermark column is computed, or its format is not csv/json)")
