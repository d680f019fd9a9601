"""No JVM outlives its streamsql process, however that process ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest

from tests.conftest import ROOT, wait_for, write
from tests.processes import SESSION_MARK, alive, gone_within, jvm_children, marked

ENDLESS = ("CREATE TEMPORARY TABLE g (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');"
           "CREATE TEMPORARY TABLE b (id BIGINT) WITH ('connector' = 'blackhole');"
           "INSERT INTO b SELECT id FROM g")


def start_cli(tmp_path, mark: str, *args) -> subprocess.Popen:
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), **{SESSION_MARK: mark})
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.spark
@pytest.mark.parametrize("sig, group", [(signal.SIGKILL, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
                         ids=["kill-9", "sigterm", "sigterm-to-the-group"])
def test_jvm_ends_with_its_streamsql_process(tmp_path, sig, group):
    """The JVM dies with streamsql; a SIGTERM to streamsql alone or to its whole process
    group (`timeout`, a supervisor) stops the job in order: the JVM ignores SIGTERM, so it
    is not ended under the running query."""
    mark = uuid.uuid4().hex
    job = start_cli(tmp_path, mark, "run", "-e", ENDLESS)
    try:
        assert wait_for(lambda: jvm_children(job.pid) and list((tmp_path / "catalog" / "_jobs").glob("*.json")), 180), (
            job.communicate(timeout=60) if job.poll() is not None else "the job did not start")
        jvm = jvm_children(job.pid)[0]
        if group:
            os.killpg(job.pid, sig)
        else:
            os.kill(job.pid, sig)  # the Python process only, not its group
        job.wait(60)
        assert gone_within([jvm.pid], 10) == [], f"the JVM outlived streamsql ({signal.Signals(sig).name}): {jvm}"
        assert gone_within([p.pid for p in marked(mark)], 10) == [], marked(mark)
    finally:
        for p in marked(mark):
            os.kill(p.pid, signal.SIGKILL)
    err = job.communicate(timeout=30)[1]
    if sig == signal.SIGTERM:
        assert job.returncode == 0 and "Job stopped." in err and "Traceback" not in err, err


@pytest.mark.spark
def test_a_killed_jvm_is_one_paragraph_and_the_job_resumes(tmp_path):
    """kill -9 of Spark's JVM under a running job: the CLI says so in one paragraph (no
    traceback, none from the job registry's thread), exits 1, and records the job as FAILED with it."""
    write(tmp_path / "in" / "0.csv", "".join(f"{i},{i % 3}\n" for i in range(300)))
    script = (f"CREATE TABLE src (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'in'}',"
              " 'format' = 'csv', 'source.monitor-interval' = '1s');"
              f"CREATE TABLE out (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}',"
              " 'format' = 'csv');"
              "INSERT INTO out SELECT a, b FROM src WHERE b = 1")
    mark = uuid.uuid4().hex
    job = start_cli(tmp_path, mark, "run", "-e", script)
    try:
        assert wait_for(lambda: jvm_children(job.pid) and list((tmp_path / "out").glob("part-*")), 180), (
            job.communicate(timeout=60) if job.poll() is not None else "the job wrote nothing")
        jvm = jvm_children(job.pid)[0]
        os.kill(jvm.pid, signal.SIGKILL)
        out, err = job.communicate(timeout=60)
    finally:
        for p in marked(mark):
            os.kill(p.pid, signal.SIGKILL)
    assert job.returncode == 1, err
    assert err.strip() == (f"Execution error: Spark's JVM (pid {jvm.pid}) exited unexpectedly (killed by signal 9,"
                           " SIGKILL): the job stopped; run the same command to resume from its last checkpoint."), err
    (record,) = (tmp_path / "catalog" / "_jobs").glob("*.json")
    assert '"status": "FAILED"' in record.read_text() and "exited unexpectedly" in record.read_text()


def test_an_accumulator_update_connection_broken_as_processes_stop_prints_nothing(capfd):
    """PySpark's accumulator server (the driver's thread the JVM sends task updates to)
    printed a traceback for a connection closed before its token came in, as a job's
    processes stopped on a SIGTERM to their group; streamsql's session drops such a one
    quietly (runtime.session.quiet_broken_updates). No JVM: PySpark's own server."""
    import socket
    import time

    from pyspark.accumulators import _start_update_server

    from streamsql.runtime.session import quiet_broken_updates

    def broken_connection(quiet: bool) -> str:
        server = _start_update_server("a-token", False)
        if quiet:
            quiet_broken_updates(server)
        try:
            socket.create_connection(server.server_address).close()
            time.sleep(1.5)  # the server polls its connections every second
        finally:
            server.shutdown()
        return capfd.readouterr().err

    assert "is not correct" in broken_connection(quiet=False)  # PySpark's own behaviour
    assert broken_connection(quiet=True) == ""


@pytest.mark.spark
def test_failing_udf_is_one_line_and_nothing_outlives_the_cli(tmp_path):
    """A UDF's error names the function, the exception and the row; --verbose adds the whole
    trace; and when the CLI has exited, nothing it started is left, not even for a moment."""
    write(tmp_path / "text_udfs.py", "def count_char(s: str, c: int) -> int:\n    return len(s) // c\n")
    write(tmp_path / "d.csv", "abc,0\n")
    script = (f"CREATE TEMPORARY TABLE t (s STRING, n INT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'd.csv'}',"
              " 'format' = 'csv'); CREATE TEMPORARY FUNCTION count_char AS 'text_udfs.count_char' LANGUAGE PYTHON;"
              "SELECT count_char(s, n) FROM t")
    mark = uuid.uuid4().hex
    out, err = (cli := start_cli(tmp_path, mark, "run", "--verbose", "-e", script)).communicate(timeout=300)
    assert marked(mark) == []
    assert cli.returncode == 1
    expected = "Execution error: Python function 'count_char' raised ZeroDivisionError: integer division or modulo by zero (arguments: 'abc', 0)"
    assert expected in err.splitlines(), err
    assert "Traceback" in err and "return len(s) // c" in err and "org.apache.spark" in err, err  # --verbose: all of it


@pytest.mark.spark  # starts a process
def test_session_mark_reaches_the_processes_a_test_starts():
    """The end-of-session check finds leftovers by the mark they inherit: it must be there.
    Popen returns once the exec is past its point of no return, a moment before the kernel
    shows the new environment in /proc (empty until then), so the check waits for it."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert wait_for(lambda: child.pid in [p.pid for p in marked(os.environ[SESSION_MARK])], 10), marked(os.environ[SESSION_MARK])
    finally:
        child.kill()
        child.wait()
    assert not alive(child.pid)


@pytest.mark.spark
def test_sigterm_ends_the_shell_and_its_jvm_in_order(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), TERM="xterm", HOME=str(tmp_path),
               SPARK_LOCAL_DIRS=str(tmp_path / "spark-local"))
    shell = pexpect.spawn(sys.executable, [str(ROOT / "cli.py")], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=180)
    try:
        shell.expect_exact("Flink SQL>")
        shell.send("SELECT 1 AS x;\r")
        shell.expect("1 row")
        jvms = jvm_children(shell.pid)
        assert jvms
        os.kill(shell.pid, signal.SIGTERM)
        shell.expect(pexpect.EOF, timeout=60)
        shell.close()
        assert shell.exitstatus == 128 + signal.SIGTERM
        assert gone_within([p.pid for p in jvms], 0) == []
        assert list((tmp_path / "spark-local").iterdir()) == []  # Spark's shutdown hooks ran: an orderly stop
    finally:
        shell.terminate(force=True)
