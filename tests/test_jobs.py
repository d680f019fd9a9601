"""Jobs as real processes: crash with SIGKILL and resume exactly once; detach, SHOW JOBS, STOP JOB."""

from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import wait_for, write
from tests.jobs import cli, committed_batches, start

pytestmark = pytest.mark.spark

FILES, ROWS_PER_FILE = 30, 50


def job_script(tmp_path) -> str:
    source, sink = tmp_path / "in", tmp_path / "out"
    for f in range(FILES):
        write(source / f"{f:03d}.csv", "".join(f"{f * ROWS_PER_FILE + r},row-{f}-{r}\n" for r in range(ROWS_PER_FILE)))
    return write(tmp_path / "job.sql", f"""
CREATE TABLE src (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv',
  'source.monitor-interval' = '1 second', 'source.max-files-per-batch' = '1');
CREATE TABLE dst (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
INSERT INTO dst SELECT id, UPPER(s) FROM src;
""")


def sink_counts(run, tmp_path) -> tuple[int, int]:
    rows = run.rows(f"SET 'execution.runtime-mode' = 'batch'; CREATE TEMPORARY TABLE sink_now (id BIGINT, s STRING) WITH "
                    f"('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}', 'format' = 'csv');"
                    "SELECT COUNT(*), COUNT(DISTINCT id) FROM sink_now")
    run.rows("DROP TEMPORARY TABLE sink_now")
    return int(rows[0][0]), int(rows[0][1])


def test_sigkill_mid_stream_then_rerun_writes_every_row_once(run, tmp_path):
    script = job_script(tmp_path)
    job = cli(tmp_path, "run", str(script))
    assert wait_for(lambda: committed_batches(tmp_path) >= 5), job.stderr.read() if job.poll() is not None else "slow"
    os.killpg(job.pid, signal.SIGKILL)  # the job and its JVM, mid-stream
    job.wait()
    done_before = sink_counts(run, tmp_path)[0]
    assert 0 < done_before < FILES * ROWS_PER_FILE
    # The JVM's temporary files are in the killed process's directory, which nothing removed
    (left,) = (tmp_path / "tmp").iterdir()
    assert left.name.startswith(f"streamsql-process-{job.pid}-")
    assert {p.name.split("-")[0] for p in left.iterdir()} >= {"spark", "blockmgr", ".lock"}

    rerun = cli(tmp_path, "run", str(script))
    assert wait_for(lambda: sink_counts(run, tmp_path)[0] >= FILES * ROWS_PER_FILE)
    assert not left.exists()  # the next process removed it
    os.killpg(rerun.pid, signal.SIGTERM)
    rerun.wait(60)
    assert sink_counts(run, tmp_path) == (FILES * ROWS_PER_FILE, FILES * ROWS_PER_FILE)
    assert list((tmp_path / "tmp").iterdir()) == []  # and its own at its exit


def test_detach_show_and_stop_job(run, tmp_path):
    script = job_script(tmp_path)
    submitted = cli(tmp_path, "run", "--detach", str(script))
    out, err = submitted.communicate(60)
    assert submitted.returncode == 0, err
    job_id = out.split()[1]

    def status() -> list[str]:
        shown = cli(tmp_path, "run", "--format", "csv", "-e", "SHOW JOBS")
        lines = shown.communicate(120)[0].splitlines()
        return next((line.split(",") for line in lines if line.startswith(job_id)), [])

    assert wait_for(lambda: committed_batches(tmp_path) >= 3)
    assert wait_for(lambda: (lambda row: row[2] == "RUNNING" and int(row[3]) > 0)(status()), 60)  # progress every 2 s
    stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}'")
    assert stopper.wait(120) == 0
    assert wait_for(lambda: status()[2] == "CANCELED", 60)
    log = tmp_path / "catalog" / "_jobs" / f"{job_id}.log"
    assert wait_for(lambda: "Job stopped." in log.read_text(), 60)
    # rows out: the rows the file sink committed (Spark reports none for it); rows in: read
    written = sum(len(f.read_text().splitlines()) for f in (tmp_path / "out").glob("part-*.csv"))
    row = status()
    assert int(row[4]) == written > 0 and int(row[3]) == written, (row, written)
    assert row[8] == "0" and row[9], row  # no restarts yet; the time of its last commit
    # run again, and killed: SHOW JOBS keeps one row per job (its latest run), SHOW JOBS ALL each run
    again = cli(tmp_path, "run", str(script))
    assert wait_for(lambda: committed_batches(tmp_path) >= FILES, 180)
    os.killpg(again.pid, signal.SIGKILL)
    again.wait(60)
    shown = cli(tmp_path, "run", "--format", "csv", "-e", "SHOW JOBS").communicate(120)[0].splitlines()
    rows = [line.split(",") for line in shown[1:]]
    assert len(rows) == 1 and rows[0][1] == "insert-into-dst" and rows[0][2] == "FAILED" and rows[0][8] == "1", shown
    every = cli(tmp_path, "run", "--format", "csv", "-e", "SHOW JOBS ALL").communicate(120)[0].splitlines()
    assert [line.split(",")[2] for line in every[1:]] == ["CANCELED", "FAILED"], every


def test_stop_with_drain_fires_open_windows(run, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "out"
    write(source / "1.csv", "a,1,2026-01-01 00:00:01\na,1,2026-01-01 00:00:02\na,1,2026-01-01 00:00:12\n")
    script = write(tmp_path / "windows.sql", f"""
CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');
CREATE TABLE dst (window_start TIMESTAMP(3), c BIGINT) WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
INSERT INTO dst SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
""")
    out, err = cli(tmp_path, "run", "--detach", str(script)).communicate(60)
    job_id = out.split()[1]

    def written() -> list[str]:
        return sorted(line for f in sink.glob("part-*.csv") for line in f.read_text().splitlines())

    assert wait_for(lambda: written() == ["2026-01-01 00:00:00.000,2"]), written()
    stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}' WITH DRAIN")
    assert stopper.wait(120) == 0, stopper.stderr.read()
    assert wait_for(lambda: written() == ["2026-01-01 00:00:00.000,2", "2026-01-01 00:00:10.000,1"], 90), written()
    shown = cli(tmp_path, "run", "--format", "csv", "-e", "SHOW JOBS").communicate(120)[0]
    assert wait_for(lambda: f"{job_id},insert-into-dst,FINISHED" in
                    cli(tmp_path, "run", "--format", "csv", "-e", "SHOW JOBS").communicate(120)[0], 60), shown


def test_a_failing_insert_of_a_statement_set_fails_the_whole_job(tmp_path):
    """Two continuous INSERTs run side by side; when the second fails (a malformed row), the
    job stops the first and exits with the error, as a Flink job fails when any part does
    (it used to wait on the first, which never ends, with the second dead)."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    write(good / "0.csv", "1\n2\n")
    write(bad / "0.csv", "3\nnot a number\n")
    watched = "'format' = 'csv', 'source.monitor-interval' = '1s'"
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE good (n INT) WITH ('connector' = 'filesystem', 'path' = '{good}', {watched});
CREATE TABLE bad (n INT) WITH ('connector' = 'filesystem', 'path' = '{bad}', {watched});
CREATE TABLE a (n INT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "a"}', 'format' = 'csv');
CREATE TABLE b (n INT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "b"}', 'format' = 'csv');
EXECUTE STATEMENT SET BEGIN
INSERT INTO a SELECT n FROM good;
INSERT INTO b SELECT n FROM bad;
END;
""")
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: job.poll() is not None, 180), "the job went on with one of its INSERTs dead"
        assert job.returncode != 0
        assert "not a number" in job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
