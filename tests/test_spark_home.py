"""The Spark home streamsql launches Spark from: PySpark's, without the zip that Python
compiles again in every worker (runtime/spark_home)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pyspark
import pytest

from streamsql.runtime.spark_home import _links, compiled_spark_home

PYSPARK = Path(pyspark.__file__).resolve().parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "streamsql" / "spark-home"


def test_links_to_pyspark_without_its_python_folder(cache):
    home = Path(compiled_spark_home({"PYSPARK_PYTHON": sys.executable}))
    assert home.parent == cache
    assert (home / "jars").resolve() == PYSPARK / "jars" and (home / "bin" / "spark-submit").is_file()
    assert (PYSPARK / "python" / "lib" / "pyspark.zip").is_file()  # what Spark would put on the workers' path
    assert not (home / "python").exists()
    assert compiled_spark_home({}) == str(home)  # made once; PYSPARK_PYTHON unset means this interpreter


def test_leaves_spark_alone_when_the_workers_may_lack_pyspark(cache):
    assert compiled_spark_home({"SPARK_HOME": "/opt/spark"}) is None  # the user's own
    assert compiled_spark_home({"PYSPARK_PYTHON": "/usr/bin/python3-elsewhere"}) is None  # it may need the zip
    assert compiled_spark_home({}, conf={"spark.pyspark.python": "/usr/bin/python3-elsewhere"}) is None
    assert compiled_spark_home({}, master="yarn") is None  # YARN ships $SPARK_HOME/python/lib/pyspark.zip
    assert compiled_spark_home({}, conf={"spark.master": "k8s://https://host:6443"}) is None
    assert not cache.exists()
    assert compiled_spark_home({}, master="spark://host:7077") is not None  # standalone executors: the worker's home


def test_a_folder_that_is_a_link_inside_pyspark_leaves_the_home_as_it_is(tmp_path):
    """The links are read, not followed: a home linking to a folder that is itself a link
    is complete, and never made again under a running Spark."""
    source = tmp_path / "pyspark"
    (source / "jars").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (source / "data").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    home = tmp_path / "cache" / "home"
    _links(source, ["data", "jars"], home)
    made = home.stat().st_ino
    assert _links(source, ["data", "jars"], home) == home and home.stat().st_ino == made


def test_an_incomplete_home_is_replaced_and_concurrent_starts_agree(cache):
    first = Path(compiled_spark_home({}))
    (first / "jars").unlink()  # a home from an interrupted start, or an older PySpark
    homes: list[str | None] = []
    threads = [threading.Thread(target=lambda: homes.append(compiled_spark_home({}))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert homes == [str(first)] * 4
    assert (first / "jars").resolve() == PYSPARK / "jars"
    left = sorted(p.name for p in cache.iterdir())  # nothing half-built; the broken one moved aside whole
    assert len(left) == 3 and left[:2] == [first.name, first.name + ".broken." + left[1].split(".broken.")[1]]
    assert left[2] == first.name + ".lock"


def test_unwritable_cache_falls_back_to_sparks_own(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the folder would go
    assert compiled_spark_home({}) is None


@pytest.mark.spark
def test_workers_import_the_compiled_pyspark(spark):
    """Spark's Python workers (here a UDF's) import this interpreter's PySpark, not the zip."""
    where = spark.range(1).rdd.map(lambda _: __import__("pyspark").__file__).collect()[0]
    assert ".zip" not in where and Path(where).resolve().parent == PYSPARK, where
