"""Exactly-once INSERTs into files: reruns, new input, changed queries, lost state, kill -9.

The sink is read as any tool would read it — every ``part-*`` file listed, lines counted
— not through the commit log, so a file that is visible but uncommitted shows up as a
wrong answer.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from streamsql.errors import JobStateError, ValidationError
from tests.conftest import wait_for, write
from tests.jobs import (FILES, ROWS_PER_FILE, all_read, committed_files, finish, kill_9, kill_at_random, lines,
                        reap, rows_csv, start, visible_files)

pytestmark = pytest.mark.spark


def ddl(source, sink, wsink, continuous: bool = False) -> str:
    watched = ", 'source.monitor-interval' = '1s', 'source.max-files-per-batch' = '1'" if continuous else ""
    return f"""
CREATE TABLE src (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv'{watched});
CREATE TABLE dst (id BIGINT, k STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
CREATE TABLE wdst (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{wsink}', 'format' = 'csv');
"""


PLAIN = "INSERT INTO dst SELECT id, UPPER(k), ts FROM src"
WINDOWED = ("INSERT INTO wdst SELECT k, window_start, window_end, COUNT(*) FROM"
            " TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end")


@pytest.fixture
def paths(tmp_path):
    return tmp_path / "in", tmp_path / "out", tmp_path / "wout"


def test_bounded_windowed_rerun_adds_only_new_windows(run, paths):
    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 20, key=lambda i: "a"))
    script = ddl(source, sink, wsink) + WINDOWED + ";"
    run.rows(script)
    first = lines(wsink)
    assert len(first) == 2, first

    run.rows(script)  # nothing new
    assert lines(wsink) == first
    assert any("no new input" in message for message in run.log)

    write(source / "part-1.csv", rows_csv(20, 30, key=lambda i: "a"))
    run.rows(script)
    assert lines(wsink) == sorted(first + ["a,2026-01-01 00:00:20.000,2026-01-01 00:00:30.000,10"])


def test_bounded_windowed_rerun_refuses_to_change_written_windows(run, paths):
    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 15, key=lambda i: "a"))
    script = ddl(source, sink, wsink) + WINDOWED + ";"
    run.rows(script)
    before = lines(wsink)
    write(source / "part-1.csv", rows_csv(15, 25, key=lambda i: "a"))  # window 10-20 gets 5 more rows
    with pytest.raises(JobStateError, match="changes rows this job already wrote"):
        run.rows(script)
    assert lines(wsink) == before


def test_plain_insert_rerun_adds_only_new_rows(run, paths):
    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 10))
    script = ddl(source, sink, wsink) + PLAIN + ";"
    run.rows(script)
    run.rows(script)
    assert len(lines(sink)) == 10
    write(source / "part-1.csv", rows_csv(10, 25))
    run.rows(script)
    written = lines(sink)
    assert len(written) == 25 and len(set(written)) == 25


@pytest.mark.parametrize("query", [PLAIN, WINDOWED], ids=["plain", "windowed"])
def test_changed_query_is_refused_with_what_to_do(run, paths, query):
    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 10))
    run.rows(ddl(source, sink, wsink) + query + ";")
    changed = query.replace("UPPER(k)", "LOWER(k)").replace("COUNT(*)", "COUNT(id)")
    write(source / "part-1.csv", rows_csv(10, 12))
    with pytest.raises(JobStateError) as error:
        run.rows(ddl(source, sink, wsink) + changed + ";")
    message = error.value.message
    assert "differs from the one job" in message and "restore the previous query" in message
    assert "new sink path" in message and "delete its state directory" in message
    # Spacing, comments and keyword case are not changes.
    run.rows(ddl(source, sink, wsink) + "-- same job\n" + query.replace(" FROM", "\n  from") + ";")


def test_lost_state_with_output_in_the_sink_is_refused(run, paths, tmp_path):
    import shutil

    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 10))
    script = ddl(source, sink, wsink) + PLAIN + ";"
    run.rows(script)
    shutil.rmtree(tmp_path / "catalog" / "_checkpoints")
    with pytest.raises(JobStateError, match="state .* is gone"):
        run.rows(script)
    assert len(lines(sink)) == 10


def test_a_kill_while_spark_wrote_its_first_offsets_does_not_block_the_restart(run, paths, tmp_path):
    """Killed while Spark wrote offsets/0: a temporary file and nothing committed. Spark
    would start at batch 0 and refuse the non-empty directory; the job starts afresh."""
    import shutil

    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 10))
    script = ddl(source, sink, wsink) + PLAIN + ";"
    run.rows(script)
    (state,) = (tmp_path / "catalog" / "_checkpoints").glob("insert-into-dst-*")
    shutil.rmtree(sink)
    shutil.rmtree(state / "checkpoint")
    shutil.rmtree(state / "commits", ignore_errors=True)
    write(state / "checkpoint" / "offsets" / ".0.5c1d2e3f.tmp", "v1\n")
    run.rows(script)
    assert len(lines(sink)) == 10


def test_insert_column_list_maps_by_name(run, tmp_path):
    write(tmp_path / "in" / "part-0.csv", "7,x\n")
    out = tmp_path / "named"
    run.rows(f"""CREATE TABLE s (n BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}', 'format' = 'csv');
CREATE TABLE d (s STRING, n BIGINT, extra STRING) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO d (n, s) SELECT n, s FROM s;""")
    assert lines(out) == ["x,7,"]


def test_insert_overwrite_needs_batch_mode(run, paths):
    source, sink, wsink = paths
    write(source / "part-0.csv", rows_csv(0, 4))
    with pytest.raises(ValidationError, match="batch mode"):
        run.rows(ddl(source, sink, wsink) + PLAIN.replace("INTO", "OVERWRITE") + ";")
    run.rows("SET 'execution.runtime-mode' = 'batch';" + PLAIN.replace("INTO", "OVERWRITE") + ";")
    run.rows(PLAIN.replace("INTO", "OVERWRITE") + ";")
    assert len(lines(sink)) == 4
    assert not (sink / ".streamsql-staging").exists()


# -- kill -9 at random points, then restart: the output of an uninterrupted run ------------


def expected(run, source, name: str, query: str) -> list[str]:
    """The rows an uninterrupted run writes, computed by a batch-mode run into a fresh table."""
    out = source.parent / f"expected-{name}"
    target, columns = ("dst", "id BIGINT, k STRING, ts TIMESTAMP(3)") if name == "plain" else (
        "wdst", "k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT")
    run.rows(f"SET 'execution.runtime-mode' = 'batch'; CREATE TEMPORARY TABLE e_{name} ({columns}) WITH"
             f" ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');"
             + query.replace(f"INSERT INTO {target}", f"INSERT INTO e_{name}") + ";")
    return lines(out)


@pytest.mark.parametrize("continuous", [False, True], ids=["bounded", "continuous"])
def test_kill_9_at_random_points_then_restart_gives_the_uninterrupted_output(run, tmp_path, continuous):
    source, sink, wsink = tmp_path / "in", tmp_path / "out", tmp_path / "wout"
    for f in range(FILES):  # Spark's file stream reads files in modification-time order
        path = write(source / f"part-{f:03d}.csv", rows_csv(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))
    script = write(tmp_path / "job.sql", ddl(source, sink, wsink, continuous)
                   + f"EXECUTE STATEMENT SET BEGIN {PLAIN}; {WINDOWED}; END;")
    rng = random.Random(int(os.environ.get("STREAMSQL_TEST_SEED", "7")) + continuous)
    kills = int(os.environ.get("STREAMSQL_TEST_KILLS", "5"))
    for attempt in range(kills):
        kill_at_random(start(tmp_path, script), rng, "jvm" if attempt % 2 else "driver")
        for directory in (sink, wsink):  # whatever is visible is committed: never a row twice
            assert len(lines(directory)) == len(set(lines(directory)))
            assert visible_files(directory) <= committed_files(tmp_path, directory)

    job = start(tmp_path, script)
    if continuous:  # run until both queries have read every file, then drain: every window fires
        assert wait_for(lambda: all_read(tmp_path) or job.poll() is not None, 480)
        assert job.poll() is None, job.stderr.read()
        os.kill(job.pid, signal.SIGUSR1)
    assert job.wait(240) == 0, job.stderr.read()
    assert lines(sink) == expected(run, source, "plain", PLAIN)
    assert lines(wsink) == expected(run, source, "windowed", WINDOWED)


@pytest.mark.spark
def test_a_job_resumes_with_the_shuffle_partitions_its_checkpoint_started_with(run, tmp_path):
    """A stateful job started with 3 shuffle partitions, killed, and restarted where the
    session has another count (streamsql's default here): Spark keeps the checkpoint's count
    for its operators, and streamsql's stateful operators hash keys into buckets by it, so
    the resumed job reads the state it wrote (it would stop, its buckets counted anew)."""
    source, sink = tmp_path / "in", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{i},{'abc'[i % 3]},{i % 7},2026-01-01 00:00:{i:02d}\n" for i in range(n * 20, n * 20 + 20))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (id BIGINT, k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, k STRING, s INT) WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = "INSERT INTO out SELECT id, k, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM src"
    first, again = write(tmp_path / "first.sql", "SET 'parallelism.default' = '3';" + ddl + query + ";"), \
        write(tmp_path / "again.sql", ddl + query + ";")
    part(0)
    job = start(tmp_path, first)
    try:
        assert wait_for(lambda: lines(sink) or job.poll() is not None, 180), "no output"
        assert job.poll() is None, job.stderr.read()
        kill_9(job, "driver")
        part(1)
        job = start(tmp_path, again)
        assert wait_for(lambda: len(lines(sink)) > 25 or job.poll() is not None, 180)
        assert finish(job) == 0, job.stderr.read()
    finally:
        reap(job)
    checkpoint = next((tmp_path / "catalog" / "_checkpoints").glob("*/checkpoint"))
    assert json.loads(sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
                      .read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"] == "3"
    run.rows(ddl.replace(str(sink), str(tmp_path / "batch")).replace("CREATE TABLE", "CREATE TEMPORARY TABLE")
             + "SET 'execution.runtime-mode' = 'batch';" + query + ";")
    assert lines(sink) == lines(tmp_path / "batch") and len(lines(sink)) == 40
