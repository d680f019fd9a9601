"""Draining a continuous job (SIGUSR1, what STOP JOB ... WITH DRAIN sends): the end-of-input
signal reaches every window whatever the query's predicates and whatever the source."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for, write
from tests.jobs import kill_9, lines, start

pytestmark = pytest.mark.spark

EVENTS = """event_type INT,
  person ROW<id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING,
             `dateTime` TIMESTAMP(3), extra STRING>,
  auction ROW<id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
              `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING>,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3),
          extra STRING>,
  `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` WHEN event_type = 1 THEN auction.`dateTime`
                     ELSE bid.`dateTime` END,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND"""


def test_drain_fires_windows_behind_filters_joins_and_generated_sources(tmp_path):
    left, right = tmp_path / "left", tmp_path / "right"
    # left: v <= 1 rows are filtered out by a WHERE (Spark pushes it below the watermark);
    # right: joined by key in the same windows
    os.utime(write(left / "0.csv", "a,5,2026-01-01 00:00:01\na,1,2026-01-01 00:00:03\nb,7,2026-01-01 00:00:04\n"
                                   "a,9,2026-01-01 00:00:12\n"), (time.time() - 60,) * 2)
    os.utime(write(right / "0.csv", "a,x,2026-01-01 00:00:02\nb,y,2026-01-01 00:00:08\na,z,2026-01-01 00:00:13\n"),
             (time.time() - 60,) * 2)
    outs = {name: tmp_path / name for name in ("hop", "joined", "generated", "padded")}
    watched = "'format' = 'csv', 'source.monitor-interval' = '1s'"
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE l (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{left}', {watched});
CREATE TABLE r (k STRING, s STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{right}', {watched});
CREATE TABLE events ({EVENTS}) WITH ('connector' = 'nexmark', 'events.num' = '0',
  'source.max-rows-per-batch' = '3000');
CREATE TABLE hop (k STRING, window_start TIMESTAMP(3), n BIGINT, total BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{outs["hop"]}', 'format' = 'csv');
CREATE TABLE joined (k STRING, window_start TIMESTAMP(3), v BIGINT, s STRING)
  WITH ('connector' = 'filesystem', 'path' = '{outs["joined"]}', 'format' = 'csv');
CREATE TABLE generated (window_start TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{outs["generated"]}', 'format' = 'csv');
CREATE TABLE padded (k STRING, v BIGINT, s STRING)
  WITH ('connector' = 'filesystem', 'path' = '{outs["padded"]}', 'format' = 'csv');
EXECUTE STATEMENT SET BEGIN
INSERT INTO padded SELECT l.k, l.v, r.s FROM l FULL JOIN r
  ON l.k = r.k AND l.ts BETWEEN r.ts - INTERVAL '1' SECOND AND r.ts + INTERVAL '1' SECOND;
INSERT INTO hop SELECT k, window_start, COUNT(*), SUM(v)
  FROM TABLE(HOP(TABLE l, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) WHERE v > 1
  GROUP BY k, window_start, window_end;
INSERT INTO joined SELECT L.k, L.window_start, L.v, R.s
  FROM (SELECT * FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '10' SECOND))) L
  JOIN (SELECT * FROM TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND))) R
  ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end;
INSERT INTO generated SELECT window_start, COUNT(*)
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;
END;
""")
    job = start(tmp_path, script)
    try:
        checkpoints = tmp_path / "catalog" / "_checkpoints"
        assert wait_for(lambda: len(list(checkpoints.glob("*/checkpoint/commits/0"))) == 4 or job.poll() is not None,
                        240), "the job did not run a micro-batch of each query"
        assert wait_for(lambda: lines(outs["generated"]) or job.poll() is not None, 120)
        assert job.poll() is None, job.stderr.read()
        os.kill(job.pid, signal.SIGUSR1)
        assert job.wait(300) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    # every window, the last ones included (they only fire at the end of input)
    assert lines(outs["hop"]) == ["a,2025-12-31 23:59:55.000,1,5", "a,2026-01-01 00:00:00.000,1,5",
                                  "a,2026-01-01 00:00:05.000,1,9", "a,2026-01-01 00:00:10.000,1,9",
                                  "b,2025-12-31 23:59:55.000,1,7", "b,2026-01-01 00:00:00.000,1,7"]
    assert lines(outs["joined"]) == ["a,2026-01-01 00:00:00.000,1,x", "a,2026-01-01 00:00:00.000,5,x",
                                     "a,2026-01-01 00:00:10.000,9,z", "b,2026-01-01 00:00:00.000,7,y"]
    # an outer interval join: each row without a partner padded once
    assert lines(outs["padded"]) == [",,y", "a,1,x", "a,5,x", "a,9,z", "b,7,"]
    generated = lines(outs["generated"])
    starts = [line.split(",")[0] for line in generated]
    assert len(starts) == len(set(starts)) >= 2  # one row per second of event time, none twice


def _catches_sigusr1(pid: int) -> bool:
    """The process has installed its SIGUSR1 handler (bit 10 of SigCgt in /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGUSR1 - 1)))


def test_a_job_restarted_and_drained_before_its_first_batch_fires_its_restored_windows(tmp_path):
    """Killed with a window open in its state, restarted, and drained as soon as it listens:
    the restored window fires (the drain once stopped a query that had not run a micro-batch
    yet, and the window was lost)."""
    source, out = tmp_path / "in", tmp_path / "out"
    for f in range(3):  # 0..29 s, one file a batch; [20, 30) stays open until the drain
        rows = "".join(f"{'ab'[i % 2]},2026-01-01 00:00:{i:02d}\n" for i in range(f * 10, f * 10 + 10))
        os.utime(write(source / f"{f}.csv", rows), (time.time() - 60 + f,) * 2)
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',
        'source.max-files-per-batch' = '1');
CREATE TABLE out (k STRING, window_start TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT k, window_start, COUNT(*)
  FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
""")
    fired = sorted(f"{k},2026-01-01 00:00:{s:02d}.000,5" for s in (0, 10) for k in "ab")
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: lines(out) == fired or job.poll() is not None, 240), lines(out)
        time.sleep(3)  # the batch that fired them committed
        kill_9(job, "driver")
        job = start(tmp_path, script)
        assert wait_for(lambda: _catches_sigusr1(job.pid) or job.poll() is not None, 60)
        os.kill(job.pid, signal.SIGUSR1)
        assert job.wait(240) == 0, job.stderr.read()
        log = job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert lines(out) == sorted(fired + ["a,2026-01-01 00:00:20.000,5", "b,2026-01-01 00:00:20.000,5"]), log
