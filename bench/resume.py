"""How fast a killed job resumes: `streamsql run job.sql`, kill -9, new input, the same
command again; the seconds from that command's start to its first new micro-batch committed.

Two jobs (issue #59's): a TUMBLE window over a watched directory of CSV files into CSV files
('file'), and an updating GROUP BY over the same input into PostgreSQL ('jdbc', a throwaway
server from tests/postgres.py). Each run of the job gets a fresh catalog and data; the
restart's milestones are read off the process and its checkpoint as they happen:

    jvm        Spark's JVM started (a child java process)
    replayed   the commit of a micro-batch the first run had planned and not committed (when
               the kill cut one short: Spark runs it again first)
    planned    Spark wrote the offsets of a micro-batch past every one the first run planned:
               the first over the new input
    committed  that micro-batch's commit record

Usage: bench/resume.py [--job file|jdbc|both] [--rows-per-file N] [--repeat N] [--daemon MODULE]
(--daemon pyspark.daemon: Spark's own Python daemon, for a before/after of
streamsql.spark.worker_daemon's preloading workers.)
Prints one line per restart and a median per job.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = datetime(2024, 1, 1)
TOTALS = "CREATE TABLE totals (k TEXT PRIMARY KEY, n BIGINT, total BIGINT, top INT)"  # the jdbc job's sink


def rows(first: int, last: int) -> str:
    return "".join(f"{i},{'abcdefgh'[i % 8]},{i % 97},{BASE + timedelta(seconds=i):%Y-%m-%d %H:%M:%S}\n"
                   for i in range(first, last))


def script(kind: str, source: Path, sink: Path, url: str | None, daemon: str | None = None) -> str:
    ddl = f"SET 'spark.python.daemon.module' = '{daemon}';\n" if daemon else ""
    ddl += (f"CREATE TABLE src (id BIGINT, k STRING, v INT, ts TIMESTAMP(3),"
           f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem',"
           f" 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s',"
           f" 'source.max-files-per-batch' = '1');\n")
    if kind == "file":
        return (ddl + f"CREATE TABLE out (k STRING, window_start TIMESTAMP(3), n BIGINT, total BIGINT) WITH"
                f" ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');\n"
                "INSERT INTO out SELECT k, window_start, COUNT(*), SUM(v) FROM TABLE(TUMBLE(TABLE src,"
                " DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;\n")
    return (ddl + f"CREATE TABLE totals (k STRING, n BIGINT, total BIGINT, top INT, PRIMARY KEY (k) NOT ENFORCED)"
            f" WITH ('connector' = 'jdbc', 'url' = '{url}', 'table-name' = 'totals', 'username' = 'postgres');\n"
            "INSERT INTO totals SELECT k, COUNT(*), SUM(v), MAX(v) FROM src GROUP BY k;\n")


def batches(checkpoint_root: Path, log: str) -> set[int]:
    return {int(p.name) for p in checkpoint_root.glob(f"*/checkpoint/{log}/[0-9]*") if p.name.isdigit()}


def java_child(pid: int) -> bool:
    found = subprocess.run(["pgrep", "-g", str(pid), "java"], capture_output=True, text=True).stdout.split()
    return bool(found)


def start(work: Path, job: Path) -> subprocess.Popen:
    env = dict(os.environ, STREAMSQL_CATALOG=str(work / "catalog"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "run", str(job)], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill(job: subprocess.Popen) -> None:
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()


def wait(condition, timeout: float, job: subprocess.Popen, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        if job.poll() is not None:
            raise SystemExit(f"the job ended while waiting for {what}: {job.stderr.read()[-3000:]}")
        time.sleep(0.05)
    raise SystemExit(f"no {what} within {timeout:.0f} s")


def one_restart(kind: str, url: str | None, rows_per_file: int, daemon: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="streamsql-resume-") as scratch:
        work = Path(scratch)
        source, sink = work / "in", work / "out"
        source.mkdir()
        job_file = work / "job.sql"
        job_file.write_text(script(kind, source, sink, url, daemon))
        checkpoints = work / "catalog" / "_checkpoints"
        for n in range(2):
            (source / f"part-{n}.csv").write_text(rows(n * rows_per_file, (n + 1) * rows_per_file))
        first = start(work, job_file)
        try:
            wait(lambda: len(batches(checkpoints, "commits")) >= 2, 300, first, "two committed micro-batches")
            time.sleep(1.0)
        finally:
            kill(first)
        done, planned_before = max(batches(checkpoints, "commits")), max(batches(checkpoints, "offsets"))
        (source / "part-2.csv").write_text(rows(2 * rows_per_file, 3 * rows_per_file))
        began = time.monotonic()
        second = start(work, job_file)
        try:
            jvm = wait(lambda: java_child(second.pid), 120, second, "Spark's JVM")
            replayed = None
            if planned_before > done:
                replayed = wait(lambda: planned_before in batches(checkpoints, "commits"), 300, second,
                                "the replayed micro-batch committed") - began
            planned = wait(lambda: any(b > planned_before for b in batches(checkpoints, "offsets")), 300, second,
                           "a new micro-batch")
            committed = wait(lambda: any(b > planned_before for b in batches(checkpoints, "commits")), 300, second,
                             "a new micro-batch committed")
        finally:
            kill(second)
        return {"jvm": jvm - began, "replayed": replayed, "planned": planned - began, "committed": committed - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=("file", "jdbc", "both"), default="both")
    parser.add_argument("--rows-per-file", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--daemon", help="spark.python.daemon.module for the job")
    args = parser.parse_args()
    kinds = ("file", "jdbc") if args.job == "both" else (args.job,)
    with ExitStack() as stack:
        url = None
        if "jdbc" in kinds:
            sys.path.insert(0, str(ROOT))
            from tests.postgres import postgres_server, require_postgres

            server = stack.enter_context(postgres_server(require_postgres()))
            url = server.url("postgres")
        for kind in kinds:
            totals = []
            for n in range(args.repeat):
                if kind == "jdbc":
                    with server.connect() as connection:
                        connection.execute("DROP TABLE IF EXISTS totals")
                        connection.execute(TOTALS)
                times = one_restart(kind, url, args.rows_per_file, args.daemon)
                totals.append(times["committed"])
                replay = f", replayed batch committed {times['replayed']:.1f} s" if times["replayed"] else ""
                print(f"{kind} restart {n + 1}: JVM up {times['jvm']:.1f} s{replay}, new micro-batch planned"
                      f" {times['planned']:.1f} s, committed {times['committed']:.1f} s", flush=True)
            print(f"{kind}: first new micro-batch committed {statistics.median(totals):.1f} s after start"
                  f" (median of {len(totals)}; {min(totals):.1f}-{max(totals):.1f})", flush=True)


if __name__ == "__main__":
    main()
