"""A class-data-sharing archive of the classes Spark's driver loads, so it starts faster.

A driver JVM spends most of its start reading, parsing and verifying thousands of classes
from Spark's jars, and so does the first query it plans. Java's dynamic CDS archive (JDK 13
and later) holds the classes one JVM loaded, already parsed, and a later JVM maps them:
measured on 2 cores, ``streamsql run`` of ``SELECT 1`` took 6.0 s with it against 9.8 s
without (the median of 5, whole process, CPU 9.5 against 15.1 s).

An archive is only good for the Java and the class path it was made with, jar by jar: it is
named by a hash of the java binary and of every jar of the Spark home (names, sizes, times),
in streamsql's cache folder beside the Spark home's links (runtime.spark_home). CDS takes no
directory on the class path unless it is empty, and Spark's launcher puts SPARK_CONF_DIR
there: a JVM using the archive starts with an empty one, and finds streamsql's
log4j2.properties by a system property instead. The options go in SPARK_SUBMIT_OPTS, so a
user's ``spark.driver.extraJavaOptions`` keeps its own meaning. A JVM started otherwise
(a Spark home or SPARK_CONF_DIR of the user's, another class path) starts as before, and a
stale archive is ignored in silence (``-Xlog:cds*=off``). Each start with an archive marks
it used, and removes those beside it that no JVM has started with for 30 days.

``python -m streamsql.runtime.class_archive`` makes it when there is none (``--force``:
anew); the test session does before its first Spark test. A JVM runs a batch query and a
streaming one through streamsql and, as it exits, writes the classes it loaded (180 MB;
about a minute, once per Spark and Java).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

LOG_CONFIG = Path(__file__).with_name("conf") / "log4j2.properties"
UNUSED_DAYS = 30  # an archive no JVM has started with for this long is removed
# while making the archive: the file the JVM writes its classes to, then the one a second
# JVM tries before it is put in place
_dump_to: Path | None = None
_trying: Path | None = None


def launch_env(home: str, conf_dir: str | None, class_path: str | None = None) -> dict[str, str]:
    """What the driver JVM launched from ``home`` (with ``class_path``, the driver's extra
    class path, before the home's jars) gets in its environment to use the archive (or,
    while it is being made, to write it); nothing when there is none or ``conf_dir`` is not
    streamsql's own."""
    if conf_dir is None or Path(conf_dir) != LOG_CONFIG.parent:
        return {}
    try:
        return _launch_env(home, class_path)
    except OSError:  # a cache folder that cannot be read or written: Spark starts as before
        return {}


def _launch_env(home: str, class_path: str | None) -> dict[str, str]:
    path = archive_path(home, class_path)
    if _dump_to is not None:
        option = f"-XX:ArchiveClassesAtExit={_dump_to} -Xlog:cds*=off"
    elif _trying is not None:
        option = f"-XX:SharedArchiveFile={_trying} -Xshare:on"  # fails unless it maps
    elif path is not None and path.is_file():
        option = f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"
        forget_unused(path)
    else:
        return {}
    empty = path.parent / "empty-conf"
    empty.mkdir(parents=True, exist_ok=True)
    opts = " ".join(o for o in (os.environ.get("SPARK_SUBMIT_OPTS"), option,
                                f"-Dlog4j2.configurationFile={LOG_CONFIG}") if o)
    return {"SPARK_CONF_DIR": str(empty), "SPARK_SUBMIT_OPTS": opts}


def forget_unused(used: Path) -> list[Path]:
    """Mark ``used`` as used now (its time), and remove the archives beside it no JVM has
    started with for ``UNUSED_DAYS``: another Java, PySpark or class path left them stale
    (180 MB each). The ones removed; never a failed start (a cache shared read-only)."""
    removed = []
    try:
        os.utime(used)
        cutoff = time.time() - UNUSED_DAYS * 86400
        for old in used.parent.glob("classes-*.jsa"):
            if old != used and old.stat().st_mtime < cutoff:
                old.unlink()
                removed.append(old)
    except OSError:
        pass
    return removed


def archive_path(home: str, class_path: str | None = None) -> Path | None:
    """Where the archive for ``home``'s jars, ``class_path``'s and this Java lives (None: no
    java found)."""
    from streamsql.runtime.spark_home import jdk_command

    java = jdk_command("java")
    if java is None:
        return None
    digest = hashlib.sha1()
    extra = [Path(p) for p in (class_path or "").split(os.pathsep) if p]
    for path in [java, *extra, *sorted(Path(home, "jars").iterdir())]:
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    digest.update(str(java).encode())  # (resolved by jdk_command)
    return Path(home).parent / f"classes-{digest.hexdigest()[:16]}.jsa"


def make(force: bool = False) -> int:
    """Write the archive for this PySpark and Java, unless there is one (``force``: anew).
    It is put in place only once a JVM has started with it: a JVM maps the file, and one
    cut short (a full disk) would crash the JVMs that map it."""
    global _dump_to, _trying
    from streamsql.runtime.spark_home import compiled_spark_home

    home = compiled_spark_home()
    path = archive_path(home, _class_path()) if home else None
    if path is None:
        print("No class archive: Spark runs from a Spark home of your own, or no java was found.", file=sys.stderr)
        return 1
    if path.is_file() and not force:
        print(f"{path} is there already.")
        return 0
    written = _dump_to = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    try:
        if _exercise() != 0 or not written.is_file():
            print("The JVM did not write its classes; Spark starts without an archive.", file=sys.stderr)
            return 1
        _dump_to, _trying = None, written
        if _try() != 0:
            print("A JVM could not start with the classes written; Spark starts without an archive.",
                  file=sys.stderr)
            return 1
        os.replace(written, path)
        print(f"Wrote {path} ({path.stat().st_size // (1 << 20)} MB).")
        return 0
    finally:
        written.unlink(missing_ok=True)
        _dump_to = _trying = None


def _class_path() -> str | None:
    """The driver's extra class path the archive is made with (what a local session gets)."""
    from streamsql.runtime.local_files import CLASS_PATH_KEY, with_local_files
    from streamsql.runtime.session import default_conf

    return with_local_files(default_conf("local[2]")).get(CLASS_PATH_KEY)


def _try() -> int:
    """Start a driver JVM (with ``_trying``) and run a query; its exit code, or 1."""
    from pyspark.core.context import SparkContext

    from streamsql.runtime.lifetime import stop_driver_gateway
    from streamsql.runtime.session import default_conf, start_session

    try:
        spark = start_session(default_conf("local[1]"))
        proc = SparkContext._gateway.proc
        spark.sql("SELECT 1").collect()
        spark.stop()
    except Exception:
        stop_driver_gateway()
        return 1
    stop_driver_gateway()
    return proc.returncode


def _exercise() -> int:
    """A driver JVM that runs what streamsql's queries run (a batch aggregate, a stateful
    streaming one, a file sink), then exits and writes the archive; its exit code."""
    import io

    from pyspark.core.context import SparkContext

    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.lifetime import stop_driver_gateway
    from streamsql.runtime.results import ResultWriter
    from streamsql.runtime.session import default_conf, start_session

    with tempfile.TemporaryDirectory(prefix="streamsql-archive-") as scratch:
        data = Path(scratch, "in")
        data.mkdir()
        (data / "part-0.csv").write_text("".join(f"k{i % 7},{i},2026-01-01 00:00:{i % 60:02d}\n" for i in range(200)))
        spark = start_session(default_conf("local[2]"))
        proc = SparkContext._gateway.proc
        engine = Engine(Catalog(Path(scratch, "catalog")), spark=spark, base_dir=Path(scratch),
                        log=lambda message: None)
        table = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)"
                 f" WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');"
                 f"CREATE TEMPORARY TABLE o (k STRING, n BIGINT) WITH ('connector' = 'filesystem',"
                 f" 'path' = '{Path(scratch, 'out')}', 'format' = 'json');")
        window = "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
        engine.run_script(
            table + f"SELECT k, COUNT(*), MAX(v) FROM {window} GROUP BY k, window_start, window_end;"
            "SET 'execution.bounded-input' = 'stream';"
            "SELECT k, SUM(v) FROM t GROUP BY k;"
            f"INSERT INTO o SELECT k, COUNT(*) FROM {window} GROUP BY k, window_start, window_end;",
            ResultWriter("csv", io.StringIO()))
        engine.stop()
        spark.stop()
        stop_driver_gateway(seconds=600)  # writing the archive takes a while
        return proc.returncode


if __name__ == "__main__":  # run the imported module's make: launch_env reads that module's _dump_to
    from streamsql.runtime.class_archive import make as make_archive

    sys.exit(make_archive(force="--force" in sys.argv[1:]))
