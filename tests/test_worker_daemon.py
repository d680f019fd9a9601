"""Spark's Python workers fork from a daemon that has imported what they need
(streamsql.spark.worker_daemon, for a local master)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streamsql.runtime.session import with_preloading_workers

ROOT = str(Path(__file__).resolve().parent.parent)


def test_a_local_master_gets_the_preloading_daemon_and_this_streamsql_first_on_the_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere", ROOT]))
    conf = with_preloading_workers({"spark.master": "local[2]"})
    assert conf["spark.python.daemon.module"] == "streamsql.spark.worker_daemon"
    assert os.environ["PYTHONPATH"].split(os.pathsep) == ["/elsewhere", ROOT]  # there already: left as is
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with_preloading_workers({"spark.master": "local[*]"})
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [ROOT, "/elsewhere"]


def test_a_cluster_and_a_set_daemon_are_left_alone(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert with_preloading_workers({"spark.master": "spark://h:7077"}) == {"spark.master": "spark://h:7077"}
    assert os.environ["PYTHONPATH"] == "/elsewhere"
    chosen = {"spark.master": "local[2]", "spark.python.daemon.module": "pyspark.daemon"}
    assert with_preloading_workers(chosen)["spark.python.daemon.module"] == "pyspark.daemon"


def test_the_daemon_imports_the_workers_modules_before_forking():
    """What it preloads imports (a typo would silently preload nothing), and starts no
    Python thread (the fork would leave it behind)."""
    import importlib
    import subprocess

    from streamsql.spark.worker_daemon import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)
    script = ("import threading, streamsql.spark.worker_daemon as d; d.preload(); import sys;"
              " print(threading.active_count(), all(m in sys.modules for m in d.PRELOAD))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.stdout.split() == ["1", "True"], done.stderr


@pytest.mark.spark
def test_workers_fork_from_the_preloading_daemon(spark):
    def daemon(_):
        import sys

        return sys.modules["__main__"].__spec__.name, "pandas" in sys.modules

    assert set(spark.sparkContext.parallelize([0, 1], 2).map(daemon).collect()) == {
        ("streamsql.spark.worker_daemon", True)}
