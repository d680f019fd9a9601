"""Hadoop's local file system without a process per file.

Without its native library (a pip-installed PySpark has none), Hadoop sets a local file's
permissions by running ``chmod``: once for every file or directory it creates, and a
checksum file goes with each. A streaming query creates several each micro-batch (its
offsets and commits, each stateful task's state changelog, a file sink's files, their
staging directories and ``_SUCCESS``): a streamed window aggregate into files ran about 22
``chmod`` processes a micro-batch, 5 ms each on an idle machine, more on a busy one.

``hadoop/*.java`` is Hadoop's local file system setting permissions through Java instead.
It is compiled once per Hadoop (runtime.java_build: ``javac``, about a second) into a jar,
and a local Spark (its executors in the driver's JVM) gets it on the driver's class path
as ``fs.file.impl``. Nothing changes when there is no ``javac`` (a JRE), the build
fails, the executors are processes of their own (a cluster, ``local-cluster``: they would
not have the jar), or ``fs.file.impl`` is the user's own.
"""

from __future__ import annotations

from pathlib import Path

from streamsql.runtime import java_build
from streamsql.runtime.java_build import spark_jar

SOURCES = Path(__file__).with_name("hadoop")
FILE_SYSTEM = "streamsql.hadoop.LocalFileSystem"
FS_KEY, CLASS_PATH_KEY = "spark.hadoop.fs.file.impl", "spark.driver.extraClassPath"


def with_local_files(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with streamsql's local file system, where it applies (see the module)."""
    from streamsql.runtime.shipping import runs_in_driver

    if FS_KEY in conf or not runs_in_driver(conf.get("spark.master")):  # (local-cluster: executors of their own)
        return conf
    jar = built_jar()
    if jar is None:
        return conf
    return {**java_build.on_driver_class_path(conf, jar), FS_KEY: FILE_SYSTEM}


def built_jar() -> Path | None:
    """The jar of ``hadoop/*.java`` for PySpark's Hadoop, built when there is none yet;
    None when it cannot be (no javac, no Hadoop jar, a failed build, nowhere to write)."""
    hadoop = spark_jar("hadoop-client-api-*.jar")
    if hadoop is None:
        return None
    return java_build.built_jar("streamsql-hadoop", sorted(SOURCES.glob("*.java")), [hadoop])
