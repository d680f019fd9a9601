"""Shared fixtures: one SparkSession for the whole run (JVM start-up takes seconds)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from streamsql.catalog import Catalog
from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def spark():
    from streamsql.runtime.session import default_conf, start_session

    conf = default_conf("local[2]")
    conf.update({"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g", "spark.ui.enabled": "false"})
    session = start_session(conf)
    yield session
    session.stop()


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


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


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
