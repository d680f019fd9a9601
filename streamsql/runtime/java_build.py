"""streamsql's own few Java classes, compiled where they run: one jar per set of sources.

A handful of things only a class on Spark's JVM can do (runtime.local_files' Hadoop file
system, runtime.server_auth's HiveServer2 password check). Their sources ship in the
package and are compiled once per machine and per the jars they compile against
(``javac``, about a second) into streamsql's cache folder; the jar's name carries a digest
of all that, so a changed source or a new Spark builds a new one. Without a ``javac`` (a
JRE), or when the build fails, there is no jar: each caller says what it does then.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

JAVAC_TIMEOUT_S = 120


def built_jar(name: str, sources: list[Path], classpath: list[Path]) -> Path | None:
    """``<cache>/<name>-<digest>.jar`` of ``sources`` compiled against ``classpath``, built
    when there is none yet; None when it cannot be (no javac, a failed build, nowhere to
    write)."""
    try:
        return _built_jar(name, sources, classpath)
    except (OSError, subprocess.SubprocessError):
        return None


def _built_jar(name: str, sources: list[Path], classpath: list[Path]) -> Path | None:
    from streamsql.runtime.spark_home import jdk_command

    javac = jdk_command("javac")
    if javac is None or not sources:
        return None
    digest = hashlib.sha1()
    for path in sorted(sources):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for jar in classpath:
        stat = jar.stat()
        digest.update(f"{jar.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    digest.update(str(javac).encode())
    jar = cache_dir() / f"{name}-{digest.hexdigest()[:16]}.jar"
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as scratch:
        classes = Path(scratch, "classes")
        result = subprocess.run([str(javac), "--release", "17", "-nowarn", "-cp", os.pathsep.join(map(str, classpath)),
                                 "-d", str(classes), *map(str, sorted(sources))], capture_output=True,
                                timeout=JAVAC_TIMEOUT_S)
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


def on_driver_class_path(conf: dict[str, str], jar: Path) -> dict[str, str]:
    """``conf`` with ``jar`` last on ``spark.driver.extraClassPath`` (a new dict)."""
    paths = [p for p in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if p]
    return {**conf, "spark.driver.extraClassPath": os.pathsep.join([*paths, str(jar)])}


def spark_jar(pattern: str) -> Path | None:
    """The newest of PySpark's own jars matching ``pattern`` (e.g. 'hadoop-client-api-*.jar')."""
    import pyspark

    found = sorted(Path(pyspark.__file__).resolve().parent.joinpath("jars").glob(pattern))
    return found[-1] if found else None


def cache_dir() -> Path:
    """Where the jars are kept (beside the compiled Spark homes: runtime.spark_home)."""
    from streamsql.runtime.spark_home import _cache_dir as spark_homes

    return spark_homes().parent / "hadoop"
