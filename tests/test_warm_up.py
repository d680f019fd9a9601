"""The shell's warm-up (runtime.warm_up): a small streaming query of its own once Spark is
ready, which a statement needing Spark lets end (or stops), leaving nothing behind."""

from __future__ import annotations

import io
import time

import pytest

from streamsql.catalog import Catalog
from streamsql.cli import build_parser
from streamsql.runtime import warm_up as warm_up_module
from streamsql.runtime.engine import Engine
from streamsql.runtime.process_dir import process_dir
from streamsql.runtime.results import ResultWriter
from streamsql.runtime.warm_up import WarmUp, applies
from streamsql.shell.startup import SparkStarter


def _left(spark) -> tuple[list, list]:
    """The streaming queries still active, and the warm-up's scratch directories left."""
    return list(spark.streams.active), sorted(p.name for p in process_dir().iterdir() if p.name.startswith("streamsql-warm-up-"))


def test_only_a_local_master_is_warmed_up():
    assert applies(None, None) and applies("local[*]", None) and applies("local[2]", None) and applies("local", None)
    assert not applies("spark://host:7077", None) and not applies("yarn", None)
    assert not applies(None, "sc://localhost:15002")


def test_the_shell_warms_up_unless_told_not_to():
    assert build_parser().parse_args([]).warm_up is True
    assert build_parser().parse_args(["--no-warm-up"]).warm_up is False


def test_a_statement_before_spark_is_ready_means_no_warm_up():
    warm_up = WarmUp()
    warm_up.settle()
    warm_up.start(object())  # (a session it would fail on, had it started)
    assert warm_up._thread is None and not warm_up.finished


@pytest.mark.spark
def test_a_warm_up_runs_to_its_end_and_leaves_nothing(spark):
    settings = {key: spark.conf.get(key, None) for key in (
        "spark.sql.shuffle.partitions", "spark.sql.exchange.reuse", "spark.sql.session.timeZone")}
    warm_up = WarmUp()
    warm_up.start(spark)
    warm_up._thread.join(120)
    assert warm_up.finished
    assert len(warm_up._queries) == 1 and warm_up._queries[0].lastProgress is not None
    assert sum(p["numInputRows"] for p in warm_up._queries[0].recentProgress) == warm_up_module.FILES * warm_up_module.ROWS
    assert _left(spark) == ([], [])
    assert {key: spark.conf.get(key, None) for key in settings} == settings


@pytest.mark.spark
def test_a_statement_lets_a_running_warm_up_end_then_runs(spark, tmp_path):
    engine = Engine(Catalog(tmp_path / "catalog"), spark=spark, base_dir=tmp_path, log=lambda message: None)
    engine.warm_up = warm_up = WarmUp()
    warm_up.start(spark)
    deadline = time.monotonic() + 60
    while not warm_up._queries and time.monotonic() < deadline:  # it is streaming now
        time.sleep(0.05)
    out = io.StringIO()
    engine.run_script("SELECT 1 + 1 AS two", ResultWriter("csv", out))  # engine.spark: the warm-up ends first
    assert not warm_up._thread.is_alive() and warm_up.finished
    assert out.getvalue().splitlines() == ["two", "2"]
    assert _left(spark) == ([], [])


@pytest.mark.spark
def test_a_warm_up_that_runs_too_long_is_stopped(spark, monkeypatch):
    monkeypatch.setattr(warm_up_module, "ROWS", 200_000)  # (seconds a file: more than the wait)
    warm_up = WarmUp()
    warm_up.start(spark)
    deadline = time.monotonic() + 60
    while not warm_up._queries and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    warm_up.settle(wait=0.5)
    assert not warm_up._thread.is_alive() and not warm_up.finished
    assert time.monotonic() - started < 20
    assert _left(spark) == ([], [])


@pytest.mark.spark
def test_the_starter_warms_up_a_local_session_once_spark_is_ready(spark, tmp_path):
    engine = Engine(Catalog(tmp_path / "catalog"), spark=spark, base_dir=tmp_path, log=lambda message: None)
    starter = SparkStarter(engine, warm_up=True)
    starter.start()
    assert starter.wait(60) and starter.ready
    assert engine.warm_up is not None
    engine.warm_up._thread.join(120)
    assert engine.warm_up.finished and _left(spark) == ([], [])

    other = Engine(Catalog(tmp_path / "other"), spark=spark, base_dir=tmp_path, log=lambda message: None)
    SparkStarter(other).start()  # (the default: none)
    assert other.warm_up is None
