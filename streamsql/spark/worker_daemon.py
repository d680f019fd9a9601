"""Spark's Python daemon (``pyspark.daemon``) with what streamsql's workers import loaded
before it forks them (``spark.python.daemon.module``, for a local master: runtime.session).

Spark starts one daemon per executor at its first Python task; the daemon forks a worker
per task slot, and each worker imported pandas, pyarrow, PySpark's Arrow and state-server
clients and streamsql's operators itself, on a 2-core machine 1-2 s of CPU each, paid in
every micro-batch that first needs a new worker (a resumed job's first batch, a stage of
another kind). Imported once here, every fork starts with them.

``pyspark.daemon`` imports the worker module only after the fork because a module that
starts threads on import leaves the child without them. Of these, numpy starts OpenBLAS's
threads and pyarrow jemalloc's background thread; both libraries re-create them in a
forked child (their ``pthread_atfork`` handlers). Anything that fails to import here is
left to the worker, as before.
"""

from __future__ import annotations

import importlib

PRELOAD = (
    "pandas", "pyarrow", "pyarrow.compute", "pyspark.worker", "pyspark.sql.pandas.serializers",
    "pyspark.sql.pandas.types", "pyspark.sql.streaming.stateful_processor_api_client",
    "pyspark.sql.streaming.stateful_processor",
    "streamsql.spark.stateful.group_aggregate", "streamsql.spark.stateful.window_aggregate",
    "streamsql.spark.stateful.rank", "streamsql.spark.stateful.over", "streamsql.spark.stateful.join",
    "streamsql.spark.stateful.temporal_join", "streamsql.spark.stateful.window_join",
    "streamsql.spark.stateful.normalize", "streamsql.runtime.jdbc",
)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the worker imports it again and reports what fails
            pass


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
