"""`--master spark://...` against a real standalone cluster (one master, one 1-core worker).

Each job runs as `streamsql run` in its own process, as a user runs it; its rows must equal
the local run's (or rows computed by hand), and the Python parts (UDFs, the stateful
GroupAggregate, streamsql's own reader code) must have run in the worker's executor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, wait_for, write
from tests.ports import free_ports
from tests.spark_cluster import standalone_cluster

pytestmark = pytest.mark.spark

SMALL = ["--conf", "spark.driver.memory=1g", "--conf", "spark.executor.memory=512m",
         "--conf", "spark.sql.shuffle.partitions=2"]

# Where a Python function ran: in an executor launched by the worker, or under the driver
# (local mode); and which streamsql that process imports.
UDFS = '''
import os

import udf_helpers  # a module of its own next to the script: the workers have no such file on their path


def _ancestors():
    pid = os.getpid()
    for _ in range(6):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                yield f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            return


def runs_in(x: int) -> str:
    import streamsql

    place = "executor" if any("CoarseGrainedExecutorBackend" in c for c in _ancestors()) else "driver"
    return place + (" shipped" if ".zip" in streamsql.__file__ else " installed")


def tag(s: str) -> str:
    return udf_helpers.tagged(s)


from pyflink.common import Row  # noqa: E402  (PyFlink's surface: streamsql's, shipped with it)
from pyflink.table import DataTypes  # noqa: E402
from pyflink.table.udf import TableFunction, udtf  # noqa: E402


class Letters(TableFunction):
    def eval(self, s):
        for i, c in enumerate(s):
            yield Row(c, i)


letters = udtf(Letters(), result_types=[DataTypes.STRING(), DataTypes.INT()])
'''
HELPERS = '''
def tagged(s):
    return s + "#" + str(len(s))
'''


def write_udfs(directory) -> None:
    write(directory / "my_udfs.py", UDFS)
    write(directory / "udf_helpers.py", HELPERS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as started:
        print(f"\ncluster up in {started.started_in:.1f} s: {started.url}")
        yield started


class Job:
    """`streamsql run --master MASTER ...` as a process; its stdout and stderr go to files."""

    def __init__(self, tmp_path, master: str, *args: str):
        env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / f"catalog-{master[:5]}"), PYSPARK_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        name = master.split(":")[0].strip("[]1")
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen([sys.executable, "-m", "streamsql.cli", "run", "--master", master, *SMALL, *args],
                                            cwd=tmp_path, env=env, stdout=out, stderr=err, start_new_session=True)

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def errors(self) -> str:
        return self.err.read_text()[-5000:]

    def ended(self) -> bool:
        return self.process.poll() is not None

    def wait(self, seconds: float) -> int:
        try:
            return self.process.wait(seconds)
        finally:
            self.kill()

    def stop(self) -> None:
        """SIGTERM (as `kill` would): the job stops its queries and Spark in order and exits 0."""
        if not self.ended():
            self.process.send_signal(signal.SIGTERM)
        assert self.wait(120) == 0, self.errors()
        assert "Job stopped." in self.errors()

    def kill(self) -> None:
        if not self.ended():  # whatever went wrong, nothing it started stays
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def finished(tmp_path, master: str, script) -> tuple[list[str], float]:
    """Run a script to its end; its output lines and the seconds it took."""
    started = time.time()
    job = Job(tmp_path, master, "--format", "csv", str(script))
    assert job.wait(300) == 0, job.errors()
    return job.lines(), time.time() - started


def ran_on(cluster, before: int) -> None:
    """The job was one more application of the cluster's master."""
    apps = cluster.applications()
    assert len(apps) == before + 1, apps
    assert max(apps, key=lambda app: app["starttime"])["name"] == "streamsql"


def test_windowed_query_and_udf_equal_the_local_run(cluster, tmp_path):
    write_udfs(tmp_path)
    rows = [(1, "ann", 5), (2, "bob", 9), (3, "ann", 14), (4, "cy", 17), (5, "bob", 23), (6, "ann", 31)]
    for part in (0, 1):  # two files: the worker reads a directory, as a cluster job would
        write(tmp_path / "in" / f"part-{part}.csv",
              "".join(f"{i},{u},2026-01-01 00:00:{s:02d}\n" for i, u, s in rows[part * 3:part * 3 + 3]))
    script = write(tmp_path / "job.sql", f"""
CREATE TEMPORARY FUNCTION tag AS 'my_udfs.tag' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION runs_in AS 'my_udfs.runs_in' LANGUAGE PYTHON;
CREATE TEMPORARY TABLE clicks (id BIGINT, usr STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}', 'format' = 'csv');
SELECT usr, COUNT(*) AS n, SUM(id) AS ids, window_start, window_end
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY usr, window_start, window_end;
SELECT id, tag(usr) AS tagged FROM clicks WHERE id > 2;
SELECT DISTINCT runs_in(id) AS place FROM clicks;
CREATE TEMPORARY FUNCTION letters AS 'my_udfs.letters' LANGUAGE PYTHON;
SELECT f0 AS letter, COUNT(*) AS n, SUM(f1) AS at FROM clicks, LATERAL TABLE(letters(usr)) GROUP BY f0;
CREATE TEMPORARY TABLE gen (id BIGINT, v INT) WITH ('connector' = 'datagen', 'number-of-rows' = '100',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100', 'seed' = '7', 'scan.parallelism' = '2');
SELECT COUNT(*) AS rows_, SUM(id) AS ids, SUM(v) AS vs FROM gen;
""")
    before = len(cluster.applications())
    remote, remote_seconds = finished(tmp_path, cluster.url, script)
    ran_on(cluster, before)
    local, local_seconds = finished(tmp_path, "local[1]", script)
    print(f"windowed + UDF job: cluster {remote_seconds:.1f} s, local[1] {local_seconds:.1f} s")

    windows, tagged, place, letters, generated = _results(remote)
    assert sorted(windows) == [
        "ann,1,1,2026-01-01 00:00:00.000,2026-01-01 00:00:10.000",
        "ann,1,3,2026-01-01 00:00:10.000,2026-01-01 00:00:20.000",
        "ann,1,6,2026-01-01 00:00:30.000,2026-01-01 00:00:40.000",
        "bob,1,2,2026-01-01 00:00:00.000,2026-01-01 00:00:10.000",
        "bob,1,5,2026-01-01 00:00:20.000,2026-01-01 00:00:30.000",
        "cy,1,4,2026-01-01 00:00:10.000,2026-01-01 00:00:20.000",
    ]
    assert sorted(tagged) == ["3,ann#3", "4,cy#2", "5,bob#3", "6,ann#3"]
    assert place == ["executor shipped"]  # the UDF ran in the worker's executor, importing the driver's streamsql
    assert generated[0].startswith("100,5050,")  # datagen's reader (streamsql code) ran there too
    expected = {}  # a table function (a PyFlink TableFunction class, its Rows) ran there too
    for _, usr, _ in rows:
        for i, c in enumerate(usr):
            n, at = expected.get(c, (0, 0))
            expected[c] = (n + 1, at + i)
    assert sorted(letters) == sorted(f"{c},{n},{at}" for c, (n, at) in expected.items())
    local_windows, local_tagged, local_place, local_letters, local_generated = _results(local)
    assert (sorted(local_windows), sorted(local_tagged), sorted(local_letters), local_generated) == (
        sorted(windows), sorted(tagged), sorted(letters), generated)
    assert local_place == ["driver installed"]


def _results(lines: list[str]) -> list[list[str]]:
    """The SELECTs' rows, split at their header lines."""
    results: list[list[str]] = []
    for line in lines:
        if line.startswith(("usr,", "id,", "place", "letter,", "rows_,")):
            results.append([])
        else:
            results[-1].append(line)
    return results


def test_streaming_insert_over_a_watched_directory(cluster, tmp_path):
    write_udfs(tmp_path)
    write(tmp_path / "in" / "0.csv", "1,a\n2,bb\n3,ccc\n")
    script = write(tmp_path / "job.sql", f"""
CREATE TEMPORARY FUNCTION tag AS 'my_udfs.tag' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION runs_in AS 'my_udfs.runs_in' LANGUAGE PYTHON;
CREATE TEMPORARY TABLE src (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}',
  'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE dst (id BIGINT, s STRING, place STRING) WITH ('connector' = 'filesystem',
  'path' = '{tmp_path / "out"}', 'format' = 'csv');
INSERT INTO dst SELECT id * 10, tag(s), runs_in(id) FROM src;
""")
    before = len(cluster.applications())
    started = time.time()
    job = Job(tmp_path, cluster.url, str(script))
    try:
        assert wait_for(lambda: len(_sink_rows(tmp_path)) == 3 or job.ended(), 240), job.errors()
        first = time.time() - started
        write(tmp_path / "in" / "1.csv", "4,dddd\n")  # arrives while the job runs
        assert wait_for(lambda: len(_sink_rows(tmp_path)) == 4 or job.ended(), 120), job.errors()
        job.stop()
    finally:
        job.kill()
    print(f"streaming INSERT: first rows committed {first:.1f} s after start on the cluster")
    ran_on(cluster, before)
    assert sorted(_sink_rows(tmp_path)) == ["10,a#1,executor shipped", "20,bb#2,executor shipped",
                                            "30,ccc#3,executor shipped", "40,dddd#4,executor shipped"]


def _sink_rows(tmp_path) -> list[str]:
    return [line for f in sorted((tmp_path / "out").glob("part-*")) for line in f.read_text().splitlines()]


def test_stateful_group_by_over_an_unbounded_source(cluster, tmp_path):
    write(tmp_path / "in" / "0.csv", "a,1\nb,2\na,3\n")
    script = write(tmp_path / "job.sql", f"""
CREATE TEMPORARY TABLE src (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}',
  'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE out (k STRING, n BIGINT, total BIGINT, top BIGINT) WITH ('connector' = 'print');
INSERT INTO out SELECT k, COUNT(*), SUM(v), MAX(v) FROM src GROUP BY k;
""")
    before = len(cluster.applications())
    job = Job(tmp_path, cluster.url, str(script))
    try:
        assert wait_for(lambda: len(_changes(job)) >= 2 or job.ended(), 240), job.errors()  # +I a, +I b
        write(tmp_path / "in" / "1.csv", "b,5\nc,7\na,-4\n")
        assert wait_for(lambda: len(_changes(job)) >= 7 or job.ended(), 120), job.errors()  # +I c, -U/+U b, -U/+U a
        job.stop()
    finally:
        job.kill()
    ran_on(cluster, before)
    lines = _changes(job)
    assert sorted(lines[:2]) == ["+I[a, 2, 4, 3]", "+I[b, 1, 2, 2]"]
    assert sorted(lines[2:]) == ["+I[c, 1, 7, 7]", "+U[a, 3, 0, 3]", "+U[b, 2, 7, 5]", "-U[a, 2, 4, 3]", "-U[b, 1, 2, 2]"]


def _changes(job: Job) -> list[str]:
    """The rows the print sink printed, with their kinds."""
    return [line.strip() for line in job.lines() if line[:2] in ("+I", "-U", "+U", "-D")]


def test_bi_server_on_the_cluster(cluster, tmp_path):
    """`serve --thrift --master spark://...`: a JDBC/ODBC client's queries run on the cluster."""
    from tests.test_thrift import query, streamsql as streamsql_process

    write(tmp_path / "sales" / "part-0.csv", "north,10\nsouth,4\nnorth,7\n")
    ddl = (f"CREATE TABLE sales (region STRING, units INT) WITH ('connector' = 'filesystem', "
           f"'path' = '{tmp_path / 'sales'}', 'format' = 'csv')")
    assert streamsql_process(tmp_path / "catalog", "run", "-e", ddl).wait(60) == 0
    before = len(cluster.applications())
    connect, port = free_ports(2)
    server = streamsql_process(tmp_path / "catalog", "serve", "--port", str(connect), "--thrift", str(port),
                               "--master", cluster.url, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        lines = [server.stdout.readline() for _ in range(2)]
        assert lines[1].startswith("JDBC/ODBC"), "".join(lines) + server.stdout.read()
        rows = query(port, "SELECT region, SUM(units) FROM default_database.sales GROUP BY region ORDER BY region")
        assert rows == [("north", 17), ("south", 4)]
        assert len(cluster.applications()) == before + 1
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_stateful_group_by_into_postgresql_on_the_cluster(cluster, tmp_path):
    """The updating result upserted into PostgreSQL by the executors' writers (streamsql's code, shipped)."""
    from tests.postgres import postgres_server, require_postgres

    write(tmp_path / "in" / "0.csv", "a,1\nb,2\na,3\n")
    write(tmp_path / "in" / "1.csv", "b,5\nc,7\na,-4\n")
    with postgres_server(require_postgres()) as postgres:
        postgres.create_database("shop")
        with postgres.connect("shop") as connection:
            connection.execute("CREATE TABLE totals (k TEXT PRIMARY KEY, n BIGINT, total BIGINT)")
            script = write(tmp_path / "job.sql", f"""
SET 'execution.bounded-input' = 'stream';
CREATE TEMPORARY TABLE src (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}',
  'format' = 'csv');
CREATE TEMPORARY TABLE totals (k STRING, n BIGINT, total BIGINT, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'jdbc', 'url' = '{postgres.url("shop")}', 'table-name' = 'totals', 'username' = 'postgres');
INSERT INTO totals SELECT k, COUNT(*), SUM(v) FROM src GROUP BY k;
""")
            before = len(cluster.applications())
            lines, seconds = finished(tmp_path, cluster.url, script)
            ran_on(cluster, before)
            print(f"stateful GROUP BY into PostgreSQL: {seconds:.1f} s on the cluster")
            assert sorted(connection.execute("SELECT k, n, total FROM totals").fetchall()) == [
                ("a", 3, 0), ("b", 2, 7), ("c", 1, 7)]
