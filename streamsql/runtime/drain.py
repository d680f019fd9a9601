"""STOP JOB ... WITH DRAIN: fire every open window before stopping, as Flink does.

Flink drains by sending its maximal watermark through the job. Spark has no way to set a
running query's watermark, so each watermarked, unbounded source — files of any format,
generated, whatever its watermark column (computed too) — is read together with a private
directory that stays empty (runtime.sources.drain_rows: a stream of the table's columns,
NULL but the time); draining writes one sentinel time there, the largest. It moves the
watermark past every window (they fire) and every timer, and is filtered out right after
the watermark is taken, behind a node the query's own filters cannot be pushed through,
so no predicate removes it first and no result ever contains it. A drained job has
finished: its watermark is at the end of time, as a drained Flink job's is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from streamsql.plan.objects import TableDef

SENTINEL = "9999-12-31 23:59:59.999"
PREFIX = "streamsql-drain-"  # of the sentinel directories, which name a query's drained sources


class DrainSources:
    """The sentinel directories of one session's unbounded sources, or of one query's bounded
    ones; made under a private temporary directory when first asked for, removed by
    ``discard`` once nothing reads them."""

    def __init__(self):
        self._root: Path | None = None
        self.folders: set[Path] = set()
        self.released = False

    @property
    def root(self) -> Path:
        if self._root is None:
            from streamsql.runtime.process_dir import process_dir

            self._root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=process_dir()))
        return self._root

    def discard(self) -> None:
        """Remove the directories (their queries have stopped)."""
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None
        self.folders.clear()

    def directory(self, table: TableDef) -> Path:
        """The (empty) directory whose sentinel ends this table's input; one per table."""
        folder = self.root / f"{table.name.database}__{table.name.name}"
        folder.mkdir(exist_ok=True)
        self.folders.add(folder)
        return folder

    def heartbeat_directory(self, table: TableDef, split: tuple[str, int]) -> Path:
        """The (empty) directory of one Kafka partition's idleness heartbeats
        (runtime.kafka.idleness)."""
        folder = self.root / f"{table.name.database}__{table.name.name}__idle__{split[0]}__{split[1]}"
        folder.mkdir(exist_ok=True)
        return folder

    def release(self) -> None:
        """Write each source's sentinel row (renamed into place, so it is read whole)."""
        if self.released:
            return
        self.released = True
        for folder in self.folders:
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                handle.write(SENTINEL + "\n")
            os.replace(tmp, folder / "drain.csv")


def is_sentinel_source(source) -> bool:
    """A source of a micro-batch's progress is a sentinel directory (a drain's, or end of
    input's), not one of the job's own sources."""
    return PREFIX in (source.get("description") or "")


def drained(query) -> bool:
    """The query has run the micro-batch in which its watermark reached the sentinel, or it
    reads no sentinel directory (nothing of it waits on a watermark). Only an executed
    batch reports a watermark: a progress without one (Spark reports a trigger that found no
    new data too, the first one of a job restarted from its checkpoint among them) has not
    drained — stopping there lost the open windows of the restored state."""
    progress = query.lastProgress
    if not progress:
        return False
    if not any(is_sentinel_source(source) for source in progress.get("sources") or []):
        return True
    watermark = (progress.get("eventTime") or {}).get("watermark")
    return watermark is not None and watermark.startswith("9999")
