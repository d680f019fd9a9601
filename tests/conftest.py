"""Shared fixtures: one SparkSession for the whole run (JVM start-up takes seconds)."""

from __future__ import annotations

import io
import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streamsql.catalog import Catalog
from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter
from tests import depth
from tests.processes import SESSION_MARK, descendants, gone_within, marked

ROOT = Path(__file__).resolve().parent.parent
os.environ[SESSION_MARK] = SESSION = uuid.uuid4().hex  # inherited by all the session starts
# Every driver JVM the tests start (the session's, each `streamsql run`'s: Spark's launcher
# reads SPARK_SUBMIT_OPTS) compiles with C1 alone. Their work is small and short, and C2's
# compiler threads were about half of a JVM's CPU in a streamed test; on 2 cores the JVM-bound
# test files took 333 s against 461 s. Results do not depend on it.
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, ["-XX:TieredStopAtLevel=1", os.environ.get("SPARK_SUBMIT_OPTS")]))


def unavailable(message: str):
    """A test's server or tool cannot be had here: skipped, but failed under CI (CI=true),
    where a skipped test would hide a gap."""
    pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


@pytest.fixture(scope="module")
def postgres(request):
    """A throwaway PostgreSQL server for a test module (tests/postgres.py), with the module's
    ``POSTGRES_SETTINGS`` (server settings), if it has any."""
    from tests.postgres import postgres_server, require_postgres

    with postgres_server(require_postgres(), getattr(request.module, "POSTGRES_SETTINGS", None)) as server:
        yield server


_databases = itertools.count()


@pytest.fixture
def db(postgres, request):
    """A fresh database on the module's server: (its jdbc url, an autocommit connection to it),
    with the module's ``POSTGRES_EXTENSIONS`` created."""
    name = f"db{next(_databases)}"
    postgres.create_database(name)
    with postgres.connect(name) as connection:
        for extension in getattr(request.module, "POSTGRES_EXTENSIONS", ()):
            connection.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        yield postgres.url(name), connection


def in_background(run, script: str) -> tuple:
    """Run a (continuous) script through ``run`` on a thread: (the thread, the errors it raised)."""
    import threading

    errors: list = []

    def target():
        try:
            run.rows(script)
        except Exception as error:  # reported to the test thread
            errors.append(error)

    job = threading.Thread(target=target, daemon=True)
    job.start()
    return job, errors


def streamsql(catalog: Path, *args: str, **popen) -> subprocess.Popen:
    """`streamsql ARGS` as a process of its own (its own process group) over ``catalog``,
    importing this checkout."""
    env = dict(os.environ, STREAMSQL_CATALOG=str(catalog),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-m", "streamsql.cli", *args], env=env, start_new_session=True, **popen)


def pytest_addoption(parser):
    parser.addoption("--thorough", action="store_true",
                     help="run the randomized model tests at full depth (tests/depth.py); the README's test command does")


def pytest_configure(config):
    depth.THOROUGH = config.getoption("--thorough")


def pytest_sessionfinish(session):
    """Fail the run if anything it started still lives: a child or grandchild of pytest, or
    an orphan (a JVM whose streamsql process is gone) carrying this session's mark. Runs
    after every fixture's teardown, the session SparkSession's (which ends its JVM) too."""
    leftovers = _leftovers()
    left = gone_within([p.pid for p in leftovers], 15)  # a killed process's JVM may take a moment
    leftovers = [p for p in leftovers if p.pid in left]
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.ensure_newline()
    lines = [f"The test session left {len(leftovers)} process(es) running (now killed):", *(f"  {p}" for p in leftovers)]
    for line in lines:
        reporter.write_line(line, red=True) if reporter else print(line)
    for p in leftovers:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except OSError:
            pass
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _leftovers():
    own = os.getpid()
    found = {p.pid: p for p in descendants(own)}
    found.update({p.pid: p for p in marked(SESSION) if p.pid != own})
    return list(found.values())


@pytest.fixture(scope="session")
def spark():
    from streamsql.runtime.session import default_conf, start_session, stop_session

    # Spark's classes archived once (runtime.class_archive): every JVM the tests start, and
    # the conformance runs after them, start faster.
    subprocess.run([sys.executable, "-m", "streamsql.runtime.class_archive"], stdout=subprocess.DEVNULL, check=False)
    conf = default_conf("local[2]")
    conf.update({"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g", "spark.ui.enabled": "false"})
    session = start_session(conf)
    yield session
    stop_session(session)


class Runner:
    """Runs SQL through a real Engine and hands back the printed rows."""

    def __init__(self, spark, catalog_dir: Path, work_dir: Path):
        self.catalog_dir = catalog_dir
        self.work_dir = work_dir
        self.log: list[str] = []
        self.engine = Engine(Catalog(catalog_dir), base_dir=work_dir, log=self.log.append, spark=spark)

    def rows(self, sql: str) -> list[list[str]]:
        """Run a script; the CSV rows of its SELECTs (header dropped, NULL as '')."""
        import csv

        out = io.StringIO()
        self.engine.run_script(sql, ResultWriter("csv", out))
        lines = list(csv.reader(io.StringIO(out.getvalue())))
        return lines[1:]

    def output(self, sql: str, fmt: str = "csv") -> str:
        out = io.StringIO()
        self.engine.run_script(sql, ResultWriter(fmt, out))
        return out.getvalue()


@pytest.fixture
def run(spark, tmp_path):
    runner = Runner(spark, tmp_path / "catalog", tmp_path)
    yield runner
    runner.engine.stop()


@pytest.fixture
def source_files(tmp_path, monkeypatch):
    """The tables' files exist (a source's path is checked when a query reads it); relative
    paths resolve in tmp_path."""
    for name in ("bid.csv", "auction.csv"):
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def python_module(tmp_path, monkeypatch):
    """``python_module(name, source)`` writes a module importable by ``name`` for the test
    (a UDF module CREATE FUNCTION names); it is forgotten afterwards."""
    names = []

    def make(name: str, source: str) -> None:
        write(tmp_path / f"{name}.py", source)
        monkeypatch.syspath_prepend(str(tmp_path))
        names.append(name)

    yield make
    for name in names:
        sys.modules.pop(name, None)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def counting_command(folder: Path, command: str, log: Path) -> None:
    """``folder/command``: put first on PATH, it notes each call in ``log``, then runs the
    real ``command``."""
    import stat

    real = next(os.path.join(d, command) for d in os.environ["PATH"].split(os.pathsep)
                if os.access(os.path.join(d, command), os.X_OK))
    script = write(folder / command, f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{real}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def wait_for(check, seconds: float = 120) -> bool:
    """Poll until check() holds (True) or the time is up (False)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def pytest_collection_modifyitems(items):
    """A test that uses the SparkSession (directly or through `run`) is a Spark test, marked or not."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
