"""Jobs as processes for the tests: `streamsql run` started (``start``, ``cli``), stopped by
a signal (``finish``), killed -9 (``kill_9``) and resumed; what they wrote into a file sink
(``lines``) and committed (``committed_files``, ``committed_batches``)."""

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

from tests.conftest import ROOT, wait_for, write
from tests.processes import jvm_children

BASE = datetime(2026, 1, 1)


def rows_csv(first: int, last: int, key=lambda i: "ab"[i % 2]) -> str:
    """Rows id,k,ts for ids first..last-1; event time is BASE + id seconds (in order)."""
    return "".join(f"{i},{key(i)},{(BASE + timedelta(seconds=i)):%Y-%m-%d %H:%M:%S}\n" for i in range(first, last))


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


def cli(tmp_path, *args) -> subprocess.Popen:
    """`streamsql *args` in its own process group, with its own catalog and temporary files."""
    (tmp_path / "tmp").mkdir(exist_ok=True)  # its temporary files (runtime.process_dir)
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), TMPDIR=str(tmp_path / "tmp"))
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def committed_batches(tmp_path) -> int:
    """Micro-batches the job has committed into the sink (its commit records)."""
    return len(list((tmp_path / "catalog" / "_checkpoints").glob("*/commits/*/*.json")))
