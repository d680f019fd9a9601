"""Hadoop's local file system without a process per file.

Without its native library (a pip-installed PySpark has none), Hadoop sets a local file's
permissions by running ``chmod``: once for every file or directory it creates, and a
checksum file goes with each. A streaming query creates several each micro-batch (its
offsets and commits, each stateful task's state changelog, a file sink's files, their
staging directories and ``_SUCCESS``): a streamed window aggregate into files ran about 22
``chmod`` processes a micro-batch, 5 ms each on an idle machine, more on a busy one.

``hadoop/*.java`` is Hadoop's local file system setting permissions through Java instead.
It is compiled once per Hadoop (``javac``, about a second) into a jar in streamsql's cache
folder, and a local Spark (its executors in the driver's JVM) gets it on the driver's class
path as ``fs.file.impl``. Nothing changes when there is no ``javac`` (a JRE), the build
fails, the executors are processes of their own (a cluster, ``local-cluster``: they would
not have the jar), or ``fs.file.impl`` is the user's own.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).with_name("hadoop")
FILE_SYSTEM = "streamsql.hadoop.LocalFileSystem"
FS_KEY, CLASS_PATH_KEY = "spark.hadoop.fs.file.impl", "spark.driver.extraClassPath"
JAVAC_TIMEOUT_S = 120


def with_local_files(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with streamsql's local file system, where it applies (see the module)."""
    from streamsql.runtime.shipping import runs_in_driver

    if FS_KEY in conf or not runs_in_driver(conf.get("spark.master")):  # (local-cluster: executors of their own)
        return conf
    jar = built_jar()
    if jar is None:
        return conf
    paths = [p for p in conf.get(CLASS_PATH_KEY, "").split(os.pathsep) if p]
    return {**conf, FS_KEY: FILE_SYSTEM, CLASS_PATH_KEY: os.pathsep.join([*paths, str(jar)])}


def built_jar() -> Path | None:
    """The jar of ``hadoop/*.java`` for PySpark's Hadoop, built when there is none yet;
    None when it cannot be (no javac, no Hadoop jar, a failed build, nowhere to write)."""
    try:
        return _built_jar()
    except (OSError, subprocess.SubprocessError):
        return None


def _built_jar() -> Path | None:
    from streamsql.runtime.spark_home import jdk_command

    hadoop, javac = _hadoop_api_jar(), jdk_command("javac")
    if hadoop is None or javac is None:
        return None
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha1()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    stat = hadoop.stat()
    digest.update(f"{hadoop.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0{javac}".encode())
    jar = _cache_dir() / f"streamsql-hadoop-{digest.hexdigest()[:16]}.jar"
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamsql-hadoop-") as scratch:
        classes = Path(scratch, "classes")
        result = subprocess.run([str(javac), "--release", "17", "-nowarn", "-cp", str(hadoop), "-d", str(classes),
                                 *map(str, sources)], capture_output=True, timeout=JAVAC_TIMEOUT_S)
        if result.returncode != 0:
            return None
        staged = jar.with_name(f"{jar.stem}.{os.getpid()}.tmp")
        try:
            with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(classes.rglob("*.class")):
                    archive.write(path, path.relative_to(classes).as_posix())
            os.replace(staged, jar)  # whole or not at all: several processes may build at once
        finally:
            staged.unlink(missing_ok=True)
    return jar


def _hadoop_api_jar() -> Path | None:
    import pyspark

    found = sorted(Path(pyspark.__file__).resolve().parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def _cache_dir() -> Path:
    from streamsql.runtime.spark_home import _cache_dir as spark_homes

    return spark_homes().parent / "hadoop"
