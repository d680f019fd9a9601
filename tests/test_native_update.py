"""A GroupAggregate into a consumer that takes UPDATE_AFTER only, on Spark: Spark's own
streaming aggregation in update mode where it computes the calls (spark.physical), else
streamsql's operator emitting no -U rows (plan.update_kinds). Real Spark, real Delta tables
read back with delta-rs, the expected results computed with pandas from the same files."""

from __future__ import annotations

import os
import random
import signal
import time

import pandas as pd
import pytest
from deltalake import DeltaTable

from tests.conftest import wait_for, write
from tests.jobs import finish, kill_9, reap, start

pytestmark = pytest.mark.spark


def _part(rng: random.Random, first: int, rows: int) -> str:
    return "".join(f"{i},{rng.randint(1, 9)},{rng.randint(0, 999)},2026-01-01 00:{i // 600 % 60:02d}:{i % 60:02d}\n"
                   for i in range(first, first + rows))


def _files(source, seed: int, files: int, rows: int) -> None:
    """``files`` CSV files of ``rows`` rows each, older first (Spark's file stream reads files in
    modification-time order)."""
    rng = random.Random(seed)
    for f in range(files):
        path = write(source / f"part-{f:03d}.csv", _part(rng, f * rows, rows))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))


def _expected(source) -> dict:
    frame = pd.concat([pd.read_csv(f, header=None, names=["id", "k", "v", "ts"]) for f in sorted(source.glob("*.csv"))])
    grouped = frame.groupby("k")["v"]
    return {int(k): (int(g.size), int(g.sum()), int(g.sum()) // int(g.size), int(g.min()), int(g.max()),
                     int((g > 500).sum())) for k, g in grouped}


def _table(path) -> dict:
    if not DeltaTable.is_deltatable(str(path)):
        return {}
    rows = DeltaTable(str(path)).to_pandas()
    return {int(r.k): (int(r.c), int(r.s), int(r.a), int(r.mn), int(r.mx), int(r.big)) for r in rows.itertuples()}


def _ddl(source, sink, continuous: bool = False) -> str:
    watched = ", 'source.monitor-interval' = '1s', 'source.max-files-per-batch' = '1'" if continuous else ""
    return f"""
CREATE TABLE src (id BIGINT, k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv'{watched});
CREATE TABLE dst (k BIGINT, c BIGINT, s BIGINT, a BIGINT, mn BIGINT, mx BIGINT, big BIGINT, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'delta', 'table-path' = '{sink}');
"""


STATS = ("SELECT k, COUNT(*), SUM(v), AVG(v), MIN(v), MAX(v), COUNT(*) FILTER (WHERE v > 500)"
         " FROM src GROUP BY k")


def test_a_streamed_group_by_into_an_upsert_table_runs_on_sparks_aggregate_and_resumes(run, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "dst"
    _files(source, 3, 3, 500)
    script = _ddl(source, sink) + "SET 'execution.bounded-input' = 'stream';\n"
    explained = "\n".join(row[0] for row in run.rows(script + f"EXPLAIN INSERT INTO dst {STATS};"))
    assert "update mode): the GroupAggregate runs on Spark's own streaming aggregation" in explained
    assert "changelogMode=[I,UA]" in explained and "StateStoreSave" in explained
    run.rows(script + f"INSERT INTO dst {STATS};")
    assert _table(sink) == _expected(source)
    merges = [h for h in DeltaTable(str(sink)).history() if h.get("operation") == "MERGE"]
    assert len(merges) == 3  # a micro-batch a file, each the new rows of the keys it changed
    write(source / "part-003.csv", _part(random.Random(30), 1500, 500))
    run.rows(script + f"INSERT INTO dst {STATS};")  # resumed: the aggregate's state from the checkpoint
    assert _table(sink) == _expected(source)


def test_a_distinct_count_into_an_upsert_table_runs_on_streamsqls_operator_without_before_images(run, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "dst"
    _files(source, 4, 3, 300)
    script = _ddl(source, sink).replace(
        "c BIGINT, s BIGINT, a BIGINT, mn BIGINT, mx BIGINT, big BIGINT", "c BIGINT, d BIGINT") + \
        "SET 'execution.bounded-input' = 'stream';\n"
    query = "SELECT k, COUNT(*), COUNT(DISTINCT v) FROM src GROUP BY k"
    explained = "\n".join(row[0] for row in run.rows(script + f"EXPLAIN INSERT INTO dst {query};"))
    assert "append mode" in explained and "emitting no UPDATE_BEFORE: GroupAggregate" in explained
    run.rows(script + f"INSERT INTO dst {query};")
    frame = pd.concat([pd.read_csv(f, header=None, names=["id", "k", "v", "ts"]) for f in sorted(source.glob("*.csv"))])
    expected = {int(k): (int(g.size), int(g.nunique())) for k, g in frame.groupby("k")["v"]}
    rows = DeltaTable(str(sink)).to_pandas()
    assert {int(r.k): (int(r.c), int(r.d)) for r in rows.itertuples()} == expected


def test_kill_9_and_restart_of_a_native_update_aggregate_keeps_its_state(tmp_path):
    """A continuous job (a file a micro-batch) killed twice mid-stream and restarted: Spark's
    aggregate state and the sink's batches agree, so the table ends as the aggregate of
    every file exactly (a batch counted twice or lost would show in the counts)."""
    source, sink = tmp_path / "in", tmp_path / "dst"
    seed = int(os.environ.get("STREAMSQL_TEST_SEED", "9"))
    rng, files = random.Random(seed), 8
    _files(source, seed, files, 400)
    script = write(tmp_path / "job.sql", _ddl(source, sink, continuous=True) + f"INSERT INTO dst {STATS};\n")
    expected = _expected(source)

    def counted() -> int:
        return sum(row[0] for row in _table(sink).values())

    for attempt in range(2):
        job = start(tmp_path, script)
        try:
            before = counted()
            wait_for(lambda: counted() > before or job.poll() is not None, 180)
            time.sleep(rng.uniform(0, 2))
            kill_9(job, "jvm" if attempt % 2 else "driver")
        finally:
            reap(job)
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: counted() >= files * 400 or job.poll() is not None, 300)
        assert job.poll() is None, job.stderr.read()
        time.sleep(2)
        assert finish(job, signal.SIGTERM) is not None
    finally:
        reap(job)
    assert _table(sink) == expected
