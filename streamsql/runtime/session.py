"""Starting Spark with defaults that hold up on real work.

Spark's own local defaults (1 GB driver memory, in-memory state, chatty logs on the
terminal) fall over or get in the way; these are the ones streamsql starts with. Every
one can be overridden with ``SET 'spark.x' = '...'`` before the first query, or with
``--conf`` on the command line.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

SPARK_CONF_DIR = Path(__file__).with_name("conf")  # holds log4j2.properties
FILE_SYSTEM_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def default_conf(master: str | None = None, ui: bool = False) -> dict[str, str]:
    """Spark settings streamsql starts from (see the README's 'Defaults' section). ``ui``:
    Spark's UI on, on loopback (runtime.spark_ui): for `run` and `serve`, not the shell."""
    memory_gb = _memory_gb()
    conf = {
        "spark.master": master or "local[*]",
        "spark.app.name": "streamsql",
        "spark.driver.memory": f"{max(1, min(8, memory_gb // 3))}g",
        # Deeper thread stacks: stopping a query whose Python source task was cut off had
        # Spark match a regex over the worker's whole traceback, and 1 MB stacks overflowed
        # there, killing the stream thread so the query never reported that it ended.
        "spark.driver.extraJavaOptions": "-Xss16m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # One per core: each stateful operator runs a task per partition and micro-batch, and
        # each task pays its Python worker and state store (README, "Defaults that hold up").
        "spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 1)),
        "spark.sql.caseSensitive": "true",
        # Pinned: Flink's TIMESTAMP is wall-clock time, stored as a UTC instant (spark.dialect).
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Spark's default checkpoint files go through Hadoop's FileContext, whose local file
        # system runs a `readlink` process for every rename: several per micro-batch and
        # state store. Checkpoints here are on a POSIX file system (README, "On a
        # cluster"), where a FileSystem rename is atomic and replaces, as Spark requires.
        "spark.sql.streaming.checkpointFileManagerClass": FILE_SYSTEM_CHECKPOINTS,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Skipped-row counts are summed over a query's progress reports: keep them all.
        "spark.sql.streaming.numRecentProgressUpdates": "10000",
        # A malformed field must fail (or be counted) even when the query does not read it.
        "spark.sql.csv.parser.columnPruning.enabled": "false",
    }
    if ui:
        from streamsql.runtime.spark_ui import ui_conf

        conf.update(ui_conf(master))
    return conf


def start_session(conf: dict[str, str], remote: str | None = None):
    """A SparkSession with ``conf``; Python workers use this interpreter (it has pandas)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_CONF_DIR", str(SPARK_CONF_DIR))
    from pyspark.sql import SparkSession

    # PySpark logs every failed query with its Java stack trace; streamsql reports failures itself.
    from pyspark.logger import PySparkLogger

    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True

    if not remote:
        from streamsql.runtime.lifetime import launch_driver_gateway
        from streamsql.runtime.local_files import with_local_files

        conf = with_local_files(conf)  # Hadoop's local files without a chmod process each
        from streamsql.runtime.kafka.jars import with_kafka_jars

        conf = with_kafka_jars(conf)  # Spark's Kafka connector on spark.jars, when cached or wanted
        conf = with_preloading_workers(conf)
        from streamsql.runtime.spark_ui import with_ui_port

        conf = with_ui_port(conf)  # Spark's UI, when on, on a free port (its loopback: launch_driver_gateway)
        launch_driver_gateway(conf)  # a JVM that cannot outlive this process
    builder = SparkSession.builder
    if remote:
        builder = builder.remote(remote)
        conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.")}
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not remote:
        session.sparkContext.setLogLevel("ERROR")
        quiet_broken_updates(getattr(session.sparkContext, "_accumulatorServer", None))
        from streamsql.runtime.shipping import runs_in_driver, ship_package

        if not runs_in_driver(conf.get("spark.master")):  # a cluster: its executors import this streamsql
            ship_package(session.sparkContext)
    return session


def with_preloading_workers(conf: dict[str, str]) -> dict[str, str]:
    """For a local master, Spark's Python daemon is streamsql.spark.worker_daemon: its
    workers fork with pandas, pyarrow and streamsql's operators imported. The daemon and
    its workers import this streamsql (its folder goes first on the PYTHONPATH the JVM and
    its Python processes inherit). A SET 'spark.python.daemon.module' wins."""
    from streamsql.runtime.shipping import runs_in_driver

    if not runs_in_driver(conf.get("spark.master")):
        return conf
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return {"spark.python.daemon.module": "streamsql.spark.worker_daemon", **conf}


def quiet_broken_updates(server) -> None:
    """PySpark's accumulator server (a thread of the driver that the JVM sends task updates
    to) prints a connection's traceback on stderr when it breaks: as a job stops on a
    SIGTERM to its process group, a connection closed before its token came in printed "The
    value of the provided token to the AccumulatorServer is not correct" under the job's
    own last words. Such a broken connection (no token, a closed socket) is dropped quietly;
    any other failure is printed as before."""
    if server is None:
        return
    default = server.handle_error

    def handle_error(request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (ValueError, EOFError, ConnectionError)):
            return
        default(request, client_address)

    server.handle_error = handle_error


def stop_session(session) -> None:
    """Stop the session and, for a local one, its JVM too (PySpark keeps it until exit)."""
    session.stop()
    if not _is_remote(session):
        from streamsql.runtime.lifetime import stop_driver_gateway

        stop_driver_gateway()


def _is_remote(session) -> bool:
    return type(session).__module__.startswith("pyspark.sql.connect")


def _memory_gb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 30)
    except (ValueError, OSError, AttributeError):
        return 4


# Spark settings a streaming query starts with and nothing else needs.
STREAMING_CONF = {
    # Spark reuses an exchange that two identical branches of a plan share (Nexmark q5's two
    # HOP counts). Its watermark propagation does not pass a reused exchange: the stateful
    # operator above it never gets a watermark, so its windows fire only when the input
    # ends, out of step with the other branch. Batch queries keep the reuse.
    "spark.sql.exchange.reuse": "false",
}


_STARTING = threading.Lock()  # jobs start from several threads; each sees its own settings


def start_streaming(writer, spark):
    """``writer.start()`` with ``STREAMING_CONF`` (over a user's SET of the same keys). A
    streaming query runs in a copy of the session made as it starts (Spark's StreamExecution
    clones it when constructed, inside ``start()``), so the session's own settings are
    restored right after, for batch queries."""
    with _STARTING:
        before = {key: spark.conf.get(key, None) for key in STREAMING_CONF}
        for key, value in STREAMING_CONF.items():
            spark.conf.set(key, value)
        try:
            return writer.start()
        finally:
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
