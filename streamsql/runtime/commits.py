"""Exactly-once output into a filesystem table: stage, record, publish.

Every INSERT into a filesystem table writes through one protocol, whatever runs it (a
streaming micro-batch, a bounded computation, a statement set):

1. **Stage**: the rows are written into a hidden directory inside the sink,
   ``<path>/.streamsql-staging/<job key>-<n>/``. Readers never list hidden names (Spark,
   pandas and DuckDB globs of ``part-*`` alike), so staged rows are invisible.
2. **Record**: a commit record ``<job state>/commits/<n>.json`` is written atomically
   (temporary file, fsync, rename). It lists the staged files and their final names, and
   what the job had consumed when it wrote them. From this instant the output counts as
   committed.
3. **Publish**: each staged file is renamed to ``part-<job key>-<n>-<i>.<ext>`` in the
   sink directory (atomic per file on one filesystem).

A process that dies anywhere in between is repaired by the next run (``recover``): a
record whose files are not all published is published; staged directories without a
record are orphans and are removed. A micro-batch that Spark replays after a crash finds
its record and is skipped, so a row is never written twice. Record ``n`` is the Spark
micro-batch id for streaming jobs, the run number for bounded ones.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

STAGING = ".streamsql-staging"


@dataclass(frozen=True)
class SinkCommitter:
    """The commit protocol of one job writing into one sink directory (picklable: Spark
    Connect runs foreachBatch functions on the server)."""

    sink: str  # the table's directory
    state: str  # the job's state directory
    key: str  # the job's key, in staged and published file names

    @property
    def _commits(self) -> Path:
        return Path(self.state) / "commits" / self.key

    def _record_path(self, n: int) -> Path:
        return self._commits / f"{n:010d}.json"

    def staging(self, n: int) -> Path:
        return Path(self.sink) / STAGING / f"{self.key}-{n}"

    # -- reading the log ---------------------------------------------------------------

    def is_committed(self, n: int) -> bool:
        return self._record_path(n).exists()

    def last(self) -> dict | None:
        """The latest commit record, or None when the job has committed nothing."""
        if not self._commits.exists():
            return None
        records = sorted(p for p in self._commits.glob("*.json") if not p.name.startswith("."))
        return json.loads(records[-1].read_text()) if records else None

    def published_files(self) -> list[Path]:
        """The files this job has published into the sink (any depth: partitions)."""
        return sorted(p for p in Path(self.sink).rglob(f"part-{self.key}-*") if STAGING not in p.parts)

    # -- writing -----------------------------------------------------------------------

    def recover(self) -> None:
        """Finish publishing the last record; remove this job's orphaned staged files."""
        last = self.last()
        if last is not None:
            self._publish(last)
        root = Path(self.sink) / STAGING
        if root.exists():
            for staged in root.glob(f"{self.key}-*"):
                shutil.rmtree(staged, ignore_errors=True)
            _remove_if_empty(root)

    def stage(self, n: int) -> Path:
        """An empty staging directory for output ``n`` (leftovers of a crash removed)."""
        staged = self.staging(n)
        if staged.exists():
            shutil.rmtree(staged)
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    def commit(self, n: int, **extra) -> dict:
        """Record the files staged for ``n`` (with ``extra``, e.g. what was consumed), then
        publish them. Returns the record."""
        files = final_names(self.staging(n), f"{self.key}-{n:06d}")
        record = {"n": n, "files": files, **extra}
        self._commits.mkdir(parents=True, exist_ok=True)
        write_atomically(self._record_path(n), json.dumps(record))
        self._publish(record)
        return record

    def _publish(self, record: dict) -> None:
        publish(Path(self.sink), self.staging(record["n"]), record["files"])


def final_names(staged: Path, prefix: str) -> list[list[str]]:
    """Each data file staged in ``staged`` (relative path) and its published name in the sink,
    ``part-<prefix>-<i>.<ext>`` in the same partition directory."""
    files = []
    for index, path in enumerate(sorted(_data_files(staged))):
        relative = path.relative_to(staged)
        extension = relative.name.split(".", 1)[1] if "." in relative.name else ""
        final = relative.parent / f"part-{prefix}-{index:05d}.{extension}".rstrip(".")
        files.append([str(relative), str(final)])
    return files


def publish(sink: Path, staged: Path, files: list[list[str]]) -> None:
    """Rename staged files to their final names (idempotent: a file already moved is done),
    then remove the staging directory."""
    for relative, final in files:
        source, target = staged / relative, sink / final
        if source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        elif not target.exists():
            raise OSError(f"committed output file {target} is missing and its staged copy {source} too")
    if staged.exists():
        shutil.rmtree(staged, ignore_errors=True)
        _remove_if_empty(staged.parent)


def _data_files(directory: Path):
    """Spark's output files: nothing hidden (staging, _SUCCESS, .crc checksums), no empty text files."""
    for path in directory.rglob("*"):
        if not path.is_file() or any(part.startswith(("_", ".")) for part in path.relative_to(directory).parts):
            continue
        if path.stat().st_size == 0 and not path.name.endswith(".parquet"):
            continue
        yield path


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole: a temporary file, fsync, rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
