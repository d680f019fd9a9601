"""The class-data-sharing archive of Spark's classes (runtime/class_archive): used when it
matches the Java and the jars, never when Spark is not launched from streamsql's own home
and conf folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from streamsql.runtime import class_archive
from streamsql.runtime.class_archive import LOG_CONFIG, archive_path, launch_env

OURS = str(LOG_CONFIG.parent)


@pytest.fixture
def home(tmp_path) -> Path:
    """A Spark home of three jars, in a cache folder of its own."""
    folder = tmp_path / "cache" / "0123456789abcdef"
    (folder / "jars").mkdir(parents=True)
    for name in ("a.jar", "b.jar", "spark-core.jar"):
        (folder / "jars" / name).write_bytes(name.encode())
    return folder


def test_without_an_archive_spark_starts_as_before(home):
    assert archive_path(str(home)).parent == home.parent
    assert launch_env(str(home), OURS) == {}


def test_an_archive_for_these_jars_is_mapped_with_an_empty_conf_folder(home, monkeypatch):
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dmine=1")
    path = archive_path(str(home))
    path.write_bytes(b"archive")
    env = launch_env(str(home), OURS)
    options = env["SPARK_SUBMIT_OPTS"].split()
    assert options[0] == "-Dmine=1"  # a user's options are kept
    assert f"-XX:SharedArchiveFile={path}" in options and "-Xlog:cds*=off" in options
    assert f"-Dlog4j2.configurationFile={LOG_CONFIG}" in options and LOG_CONFIG.is_file()
    conf = Path(env["SPARK_CONF_DIR"])
    assert conf.is_dir() and not any(conf.iterdir())  # CDS takes no non-empty folder on the class path
    # A SPARK_CONF_DIR of the user's may hold anything: the archive cannot be used with it.
    assert launch_env(str(home), "/etc/spark/conf") == {} and launch_env(str(home), None) == {}


def test_a_start_marks_its_archive_used_and_removes_those_unused_for_30_days(home):
    def last_used(path: Path, days: int) -> None:
        then = time.time() - days * 86400
        os.utime(path, (then, then))

    path = archive_path(str(home))
    path.write_bytes(b"archive")
    last_used(path, 40)
    stale, recent = home.parent / "classes-0000000000000001.jsa", home.parent / "classes-0000000000000002.jsa"
    making = home.parent / "classes-0000000000000003.123.tmp"  # being written: not an archive yet
    for other in (stale, recent, making):
        other.write_bytes(b"another java's")
        last_used(other, 40)
    last_used(recent, 29)
    assert launch_env(str(home), OURS) != {}
    assert not stale.exists() and recent.exists() and making.exists()
    assert time.time() - path.stat().st_mtime < 60  # used now: 30 more days
    # a cache folder that cannot be written: the archive is still used
    home.parent.chmod(0o555)
    try:
        last_used(recent, 40)
        assert launch_env(str(home), OURS) != {} and (os.getuid() == 0 or recent.exists())
    finally:
        home.parent.chmod(0o755)


def test_another_jar_or_java_is_another_archive(home, monkeypatch, tmp_path):
    before = archive_path(str(home))
    jar = home / "jars" / "b.jar"
    jar.write_bytes(b"b.jar, another build")
    assert archive_path(str(home)) != before
    changed = archive_path(str(home))
    os.utime(jar, (1, 1))
    assert archive_path(str(home)) != changed
    now = archive_path(str(home))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert archive_path(str(home)) != now
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    assert archive_path(str(home)) is None and launch_env(str(home), OURS) == {}


def test_another_class_path_before_the_jars_is_another_archive(home, tmp_path):
    """The driver's extra class path (runtime.local_files' jar) is part of the JVM's."""
    plain = archive_path(str(home))
    jar = tmp_path / "streamsql-hadoop.jar"
    jar.write_bytes(b"one")
    with_jar = archive_path(str(home), str(jar))
    assert with_jar != plain and archive_path(str(home), str(jar)) == with_jar
    jar.write_bytes(b"another")
    assert archive_path(str(home), str(jar)) != with_jar
    # a class path entry that cannot be read (a wildcard, a missing jar): no archive, as before
    assert launch_env(str(home), OURS, str(tmp_path / "lib" / "*")) == {}


def test_while_made_the_jvm_writes_then_tries_it(home, monkeypatch, tmp_path):
    written = tmp_path / "classes.tmp"
    monkeypatch.setattr(class_archive, "_dump_to", written)
    assert f"-XX:ArchiveClassesAtExit={written}" in launch_env(str(home), OURS)["SPARK_SUBMIT_OPTS"].split()
    monkeypatch.setattr(class_archive, "_dump_to", None)
    monkeypatch.setattr(class_archive, "_trying", written)
    options = launch_env(str(home), OURS)["SPARK_SUBMIT_OPTS"].split()
    assert f"-XX:SharedArchiveFile={written}" in options and "-Xshare:on" in options


@pytest.mark.spark
def test_the_session_jvm_maps_the_archive(spark):
    """The test session's JVM maps the archive made before it started (conftest): its class
    path matched (a mismatch is silent), and it found streamsql's logging settings."""
    from pyspark.core.context import SparkContext

    from streamsql.runtime.spark_home import compiled_spark_home

    class_path = spark.sparkContext.getConf().get("spark.driver.extraClassPath")  # (runtime.local_files)
    path = archive_path(compiled_spark_home(), class_path)
    maps = Path(f"/proc/{SparkContext._gateway.proc.pid}/maps").read_text()
    assert path.is_file() and str(path) in maps
    assert spark.sparkContext._jvm.java.lang.System.getProperty("log4j2.configurationFile") == str(LOG_CONFIG)


def test_a_home_or_cache_that_cannot_be_read_starts_spark_as_before(tmp_path):
    assert launch_env(str(tmp_path / "gone"), OURS) == {}  # no jars folder to read
