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
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from streamsql.errors import JobStateError, ValidationError
from tests.conftest import ROOT, wait_for, write
from tests.processes import jvm_children

pytestmark = pytest.mark.spark

BASE = datetime(2026, 1, 1)


def rows_csv(first: int, last: int, key=lambda i: "ab"[i % 2]) -> str:
    """Rows id,k,ts for ids first..last-1; event time is BASE + id seconds (in order)."""
    return "".join(f"{i},{key(i)},{(BASE + timedelta(seconds=i)):%Y-%m-%d %H:%M:%S}\n" for i in range(first, last))


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


def part_files(directory) -> list:
    """The part files a directory listing shows (any tool's view), outside the writers' staging
    directories. ``os.walk`` neither enters them nor fails when one vanishes while it lists: a
    running job renames and removes its staging directories at every commit."""
    found = []
    for parent, subdirs, names in os.walk(directory):
        subdirs[:] = [d for d in subdirs if d != ".streamsql-staging"]
        found.extend(Path(parent, name) for name in names if name.startswith("part-"))
    return found


def lines(directory) -> list[str]:
    """Every line of every part file a directory listing shows (any tool's view)."""
    return sorted(line for f in part_files(directory) for line in f.read_text().splitlines())


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

FILES, ROWS_PER_FILE = 12, 40


def start(tmp_path, script) -> subprocess.Popen:
    """`streamsql run script` in its own process group; Spark's Python workers import this
    checkout's streamsql too (they start in tmp_path)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), PYTHONPATH=path)
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "run", str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(job: subprocess.Popen, how: int = signal.SIGUSR1) -> int:
    """A running job stopped by a signal (SIGUSR1: drain, SIGTERM: stop); its exit status."""
    assert job.poll() is None, job.stderr.read()
    os.kill(job.pid, how)
    return job.wait(240)


def reap(job: subprocess.Popen) -> None:
    """Whatever is left of a job a failed test leaves running."""
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def jvm_of(pid: int) -> int | None:
    children = jvm_children(pid)
    return children[0].pid if children else None


def killed_resumed_drained(tmp_path, script, part, ready, seconds: float = 240) -> None:
    """``script`` run as a job over a watched directory that ``part(n)`` feeds: part 0, and
    once ``ready[0]()`` (its first output) a kill -9 of its driver; part 1 and a restart, until
    ``ready[1]()``; part 2, until ``ready[2]()``; then a drain (SIGUSR1: the watermark goes to
    +infinity, the last windows fire), which must end it cleanly."""
    part(0)
    job = start(tmp_path, script)
    try:
        assert wait_for(lambda: ready[0]() or job.poll() is not None, seconds), "no output before the input ended"
        assert job.poll() is None, job.stderr.read()
        kill_9(job, "driver")
        part(1)
        job = start(tmp_path, script)
        assert wait_for(lambda: ready[1]() or job.poll() is not None, seconds)
        part(2)
        assert wait_for(lambda: ready[2]() or job.poll() is not None, seconds)
        assert finish(job, signal.SIGUSR1) == 0, job.stderr.read()
    finally:
        reap(job)


def killed_then_drained(run, tmp_path, ddl: str, query: str, sink, part, waiting: int, resumed: int,
                        more: int) -> tuple[list[str], list[str]]:
    """A continuous INSERT over a watched directory that ``part(n)`` feeds: after part 0 it
    writes output before the input ends (fewer than ``waiting`` lines: the rest waits for
    the watermark); a kill -9 of its driver, part 1 and a restart (more than ``resumed``
    lines), part 2 (more than ``more``), then a drain. Returns (the lines it wrote, the lines
    batch mode writes for the same query)."""
    script = write(tmp_path / "job.sql", ddl + query + ";")

    def first() -> bool:
        if not lines(sink):
            return False
        assert len(lines(sink)) < waiting  # what the watermark has not passed waits
        return True

    killed_resumed_drained(tmp_path, script, part, [first, lambda: len(lines(sink)) > resumed,
                                                    lambda: len(lines(sink)) > more], seconds=180)
    batch_sink = tmp_path / "batch"
    run.rows(ddl.replace(str(sink), str(batch_sink)).replace("CREATE TABLE", "CREATE TEMPORARY TABLE")
             + "SET 'execution.runtime-mode' = 'batch';" + query + ";")
    return lines(sink), lines(batch_sink)


def kill_9(job: subprocess.Popen, which: str) -> None:
    """kill -9 the job's driver JVM ('jvm') or its Python process, then whatever is left of it."""
    jvm = jvm_of(job.pid)
    try:
        os.kill(jvm if which == "jvm" and jvm is not None else job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        job.wait(30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()


def kill_at_random(job: subprocess.Popen, rng: random.Random, which: str) -> None:
    assert wait_for(lambda: jvm_of(job.pid) is not None or job.poll() is not None, 120)
    time.sleep(rng.uniform(0, 8))
    kill_9(job, which)


def visible_files(directory) -> set[str]:
    return {str(f.relative_to(directory)) for f in part_files(directory)}


def committed_files(tmp_path, directory) -> set[str]:
    """The files the jobs' commit records say they published into ``directory``."""
    files = set()
    for record in (tmp_path / "catalog" / "_checkpoints").glob("*/commits/*/*.json"):
        state = json.loads((record.parents[2] / "job.json").read_text())
        if state["path"] == str(directory):
            files |= {final for _, final in json.loads(record.read_text())["files"]}
    return files


def all_read(tmp_path) -> bool:
    """Each streaming query has read every input file and committed the micro-batch that did.

    Spark's file source logs the files it picks (``sources/0/<n>``) before the micro-batch's
    offsets are logged, so a file in that log is read only once a committed batch's offset
    (the source log's batch id it reached) covers its entry."""
    checkpoints = list((tmp_path / "catalog" / "_checkpoints").glob("*/checkpoint"))
    if len(checkpoints) != 2:
        return False
    for checkpoint in checkpoints:
        logs = {int(p.name.split(".")[0]): p for p in (checkpoint / "sources" / "0").glob("[0-9]*")}
        read = {line for log in logs.values() for line in log.read_text().splitlines() if line.startswith("{")}
        committed = max((int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")), default=-1)
        if len(read) < FILES or committed < 0:
            return False
        offsets = (checkpoint / "offsets" / str(committed)).read_text().splitlines()
        if json.loads(offsets[2])["logOffset"] < max(logs):
            return False
    return True


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
