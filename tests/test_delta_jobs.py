"""A continuous `streamsql run` job into a Delta table, killed with `kill -9` mid-stream and
restarted: every row lands exactly once (the table has no key, so a double write would show)."""

from __future__ import annotations

import os
import random
import signal
import time
from datetime import timedelta, timezone

import pytest
from deltalake import DeltaTable

from tests.conftest import wait_for, write
from tests.jobs import BASE, FILES, finish, kill_9, reap, rows_csv, ROWS_PER_FILE, start


def _rows(path) -> list[tuple]:
    if not DeltaTable.is_deltatable(str(path)):
        return []
    table = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*(table.column(name).to_pylist() for name in ("id", "k", "ts"))))


@pytest.mark.spark
def test_kill_9_at_random_points_then_restart_writes_every_row_once(tmp_path):
    source, sink = tmp_path / "in", tmp_path / "dst"
    for f in range(FILES):  # Spark's file stream reads files in modification-time order
        path = write(source / f"part-{f:03d}.csv", rows_csv(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (id BIGINT, k STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',
        'source.max-files-per-batch' = '1');
CREATE TABLE dst (id BIGINT, k STRING, ts TIMESTAMP(3)) PARTITIONED BY (k)
  WITH ('connector' = 'delta', 'table-path' = '{sink}');
INSERT INTO dst SELECT id, UPPER(k), ts FROM src;
""")
    total = FILES * ROWS_PER_FILE

    def kill_while_writing(job, rng, which: str) -> None:
        """Once the job has committed something more, kill it within the next seconds: mid-batch
        or between batches (one file a batch)."""
        before = len(_rows(sink))
        wait_for(lambda: len(_rows(sink)) > before or job.poll() is not None, 120)
        time.sleep(rng.uniform(0, 3))
        kill_9(job, which)

    rng = random.Random(int(os.environ.get("STREAMSQL_TEST_SEED", "7")))
    for attempt in range(int(os.environ.get("STREAMSQL_TEST_KILLS", "3"))):
        kill_while_writing(start(tmp_path, script), rng, "jvm" if attempt % 2 else "driver")
        rows = _rows(sink)
        assert len(rows) == len(set(rows))  # whatever is committed is there once
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: len(_rows(sink)) >= total or job.poll() is not None, 480)
        assert job.poll() is None, job.stderr.read()
        time.sleep(2)  # a batch more would show as rows past the total
        assert finish(job, signal.SIGTERM) is not None
    finally:
        reap(job)
    assert _rows(sink) == sorted((i, "ab"[i % 2].upper(), BASE.replace(tzinfo=timezone.utc) + timedelta(seconds=i))
                                 for i in range(total))
    assert len(_app_ids(sink)) == 1  # one job, resumed: one app id across the restarts


def _app_ids(path) -> set[str]:
    import json

    ids = set()
    for log in (path / "_delta_log").glob("*.json"):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                ids.add(action["txn"]["appId"])
    return ids
