"""Flink's ``'connector' = 'iceberg'`` on Spark, with the ``pyiceberg`` library.

No iceberg-spark-runtime exists for Spark 4.2/4.3, so the Iceberg protocol is pyiceberg's:
the driver opens the table through its catalog (``catalog``: Flink's catalog options mapped
to pyiceberg's SQL catalog, the layout of Iceberg's Java JdbcCatalog, on SQLite or
PostgreSQL), checks the declared columns against the Iceberg schema (``schema``), Spark
reads the snapshot's Parquet data files itself (``source``), and writes are Parquet files
written from the executors and committed once on the driver by a fast append whose snapshot
summary carries the job and the micro-batch, so a replayed micro-batch is skipped (``sink``);
into a table with a PRIMARY KEY an updating query's changes are applied by key, copy-on-write,
in one snapshot with the same summary (``upsert``).
"""
