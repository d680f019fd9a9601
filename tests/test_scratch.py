"""A statement's temporary directories (a streaming SELECT's checkpoint, the end-of-input
and drain directories) are removed once nothing reads them: a long shell session, or a
test suite, does not fill the temporary directory."""

from __future__ import annotations

import csv
import io
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamsql.catalog import Catalog
from streamsql.runtime.engine import Engine
from streamsql.runtime.process_dir import process_dir
from tests.conftest import write


@pytest.fixture
def scratch() -> Path:
    """Where they go: this process's directory (runtime.process_dir), which its JVM's
    temporary files share."""
    folder = process_dir()
    assert folder is not None and folder.is_dir() and folder.parent == Path(tempfile.gettempdir())
    return folder


def _ours(folder: Path, before: tuple = ()) -> list[str]:
    """The query and drain directories in ``folder``, less those ``before`` named (left by an
    earlier test's session in this process, whose directory this is: the test suite runs a
    file's tests in one of several processes, after other files')."""
    return sorted(p.name for p in folder.iterdir()
                  if p.name.startswith(("streamsql-query-", "streamsql-drain-")) and p.name not in before)


def test_drain_directories_are_made_when_asked_for_and_removed_when_the_session_stops(scratch, tmp_path):
    before = tuple(_ours(scratch))
    engine = Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path, log=lambda message: None)
    assert _ours(scratch, before) == []  # a session that never streams an unbounded source makes none
    folder = engine.drain.directory(SimpleNamespace(name=SimpleNamespace(database="db", name="t")))
    assert folder.is_dir() and len(_ours(scratch, before)) == 1
    engine.drain.release()
    assert (folder / "drain.csv").read_text().startswith("9999")
    engine.stop()
    assert _ours(scratch, before) == [] and not folder.exists()


@pytest.mark.spark
def test_streaming_statements_leave_no_directories_behind(run, scratch, tmp_path):
    before = tuple(_ours(scratch))
    folder = tmp_path / "parts"
    for i, text in enumerate(["a,1,2026-01-01 00:00:01\n", "a,2,2026-01-01 00:00:07\nb,3,2026-01-01 00:00:08\n"]):
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    table = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)"
             f" WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv',"
             f" 'source.max-files-per-batch' = '1');"
             f"CREATE TEMPORARY TABLE o (k STRING, n BIGINT) WITH ('connector' = 'filesystem',"
             f" 'path' = '{tmp_path / 'out'}', 'format' = 'csv');")
    window = "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
    out = run.output(table + "SET 'execution.bounded-input' = 'stream';"
                     f"SELECT k, COUNT(*) AS n FROM {window} GROUP BY k, window_start, window_end;"
                     "SELECT k, SUM(v) AS total FROM t GROUP BY k")
    rows = list(csv.reader(io.StringIO(out)))
    # Both windows fired (the end of input), and the GROUP BY's changelog ran micro-batch by
    # micro-batch: the statements ran as streams.
    header = rows.index(["op", "k", "total"])
    assert sorted(rows[1:header]) == [["a", "1"], ["a", "1"], ["b", "1"]]
    assert rows[header + 1:] == [["+I", "a", "1"], ["-U", "a", "1"], ["+U", "a", "3"], ["+I", "b", "3"]]
    assert _ours(scratch, before) == []
    run.output(f"INSERT INTO o SELECT k, COUNT(*) FROM {window} GROUP BY k, window_start, window_end")
    assert sorted(line for f in (tmp_path / "out").rglob("*.csv") for line in f.read_text().split()) == \
        ["a,1", "a,1", "b,1"]
    assert _ours(scratch, before) == []
