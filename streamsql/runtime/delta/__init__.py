"""Flink's ``'connector' = 'delta'`` on Spark, with the ``deltalake`` library (delta-rs).

Spark's own Delta connector (delta-spark) does not run on PySpark 4.3, so the Delta
protocol is delta-rs's: the driver opens a table's log with it (``table``: the snapshot,
time travel, the protocol and schema checks, creating a missing table), Spark reads the
snapshot's Parquet files itself (``source``), and writes go through delta-rs commits
(``sink``, with ``files``: Parquet data files written from the executors, committed once on
the driver), each carrying the job's app transaction so a replayed micro-batch is skipped.
"""
