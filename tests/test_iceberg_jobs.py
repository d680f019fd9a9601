"""A continuous `streamsql run` job into an Iceberg table, killed with `kill -9` mid-stream and
restarted: every row lands exactly once (an append-only table, so a double commit would show);
and an upsert job into a keyed table, which ends as exactly the final table."""

from __future__ import annotations

import os
import random
import signal
import time
from datetime import timedelta

import pytest

from tests.conftest import wait_for, write
from tests.jobs import BASE, FILES, finish, kill_9, reap, rows_csv, ROWS_PER_FILE, start


def _table(lake):
    from pyiceberg.catalog.sql import SqlCatalog

    if not (lake / "iceberg_catalog.db").exists():
        return None
    catalog = SqlCatalog("lake", uri=f"sqlite:///{lake}/iceberg_catalog.db", warehouse=f"file://{lake}")
    return catalog.load_table(("db", "dst")) if catalog.table_exists(("db", "dst")) else None


def _rows(lake) -> list[tuple]:
    table = _table(lake)
    if table is None:
        return []
    rows = table.scan().to_arrow()
    return sorted(zip(*(rows.column(name).to_pylist() for name in ("id", "k", "ts"))))


@pytest.mark.spark
def test_kill_9_at_random_points_then_restart_writes_every_row_once(tmp_path):
    source, lake = tmp_path / "in", tmp_path / "lake"
    for f in range(FILES):  # Spark's file stream reads files in modification-time order
        path = write(source / f"part-{f:03d}.csv", rows_csv(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (id BIGINT, k STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',
        'source.max-files-per-batch' = '1');
CREATE TABLE dst (id BIGINT, k STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'jdbc', 'warehouse' = '{lake}',
        'catalog-database' = 'db');
INSERT INTO dst SELECT id, UPPER(k), ts FROM src;
""")
    total = FILES * ROWS_PER_FILE

    def kill_while_writing(job, rng, which: str) -> None:
        """Once the job has committed something more, kill it within the next seconds: mid-batch
        or between batches (one file a batch)."""
        before = len(_rows(lake))
        wait_for(lambda: len(_rows(lake)) > before or job.poll() is not None, 120)
        time.sleep(rng.uniform(0, 3))
        kill_9(job, which)

    rng = random.Random(int(os.environ.get("STREAMSQL_TEST_SEED", "7")))
    for attempt in range(int(os.environ.get("STREAMSQL_TEST_KILLS", "3"))):
        kill_while_writing(start(tmp_path, script), rng, "jvm" if attempt % 2 else "driver")
        rows = _rows(lake)
        assert len(rows) == len(set(rows))  # whatever is committed is there once
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: len(_rows(lake)) >= total or job.poll() is not None, 480)
        assert job.poll() is None, job.stderr.read()
        time.sleep(2)  # a batch more would show as rows past the total
        assert finish(job, signal.SIGTERM) is not None
    finally:
        reap(job)
    assert _rows(lake) == sorted((i, "ab"[i % 2].upper(), BASE + timedelta(seconds=i)) for i in range(total))
    summaries = [s.summary for s in _table(lake).snapshots()]
    assert len({s["streamsql.job-id"] for s in summaries}) == 1  # one job, resumed across the restarts
    batches = [int(s["streamsql.batch-id"]) for s in summaries]
    assert batches == sorted(set(batches))  # each batch committed once, in order


def _keyed_rows(lake) -> list[tuple]:
    table = _table(lake)
    if table is None:
        return []
    rows = table.scan().to_arrow()
    return sorted(zip(*(rows.column(name).to_pylist() for name in ("k", "n", "last_id"))))


@pytest.mark.spark
def test_kill_9_of_an_upsert_job_then_restart_leaves_the_final_table(tmp_path):
    """An updating GROUP BY into a keyed table, killed mid-stream and restarted: one row a key,
    and at the end exactly the final table computed here (a batch applied twice would not
    show in a count that is overwritten, so the snapshots' batch ids are checked too)."""
    source, lake = tmp_path / "in", tmp_path / "lake"
    key = lambda i: f"k{(i * 7) % 11}"  # noqa: E731
    for f in range(FILES):
        path = write(source / f"part-{f:03d}.csv", rows_csv(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE, key))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (id BIGINT, k STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',
        'source.max-files-per-batch' = '1');
CREATE TABLE dst (k STRING, n BIGINT, last_id BIGINT, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'jdbc', 'warehouse' = '{lake}',
        'catalog-database' = 'db');
INSERT INTO dst SELECT k, COUNT(*), MAX(id) FROM src GROUP BY k;
""")
    total = FILES * ROWS_PER_FILE
    counted = lambda: sum(n for _, n, _ in _keyed_rows(lake))  # noqa: E731
    rng = random.Random(int(os.environ.get("STREAMSQL_TEST_SEED", "7")))
    for attempt in range(int(os.environ.get("STREAMSQL_TEST_KILLS", "3"))):
        job = start(tmp_path, script)
        before = counted()
        wait_for(lambda: counted() > before or job.poll() is not None, 120)
        time.sleep(rng.uniform(0, 3))
        kill_9(job, "jvm" if attempt % 2 else "driver")
        rows = _keyed_rows(lake)
        assert len({k for k, _, _ in rows}) == len(rows)  # one row a key
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: counted() >= total or job.poll() is not None, 480)
        assert job.poll() is None, job.stderr.read()
        time.sleep(2)
        assert finish(job, signal.SIGTERM) is not None
    finally:
        reap(job)
    expected = {}
    for i in range(total):
        n, _ = expected.get(key(i), (0, -1))
        expected[key(i)] = (n + 1, i)
    assert _keyed_rows(lake) == sorted((k, n, last) for k, (n, last) in expected.items())
    summaries = [s.summary for s in _table(lake).snapshots()]
    assert len({s["streamsql.job-id"] for s in summaries}) == 1
    batches = [int(s["streamsql.batch-id"]) for s in summaries]
    assert batches == sorted(set(batches))
