"""A bounded INSERT of 1 M rows into an Iceberg table (runtime.iceberg) and into a Parquet
filesystem table, for comparison: rows/s of each sink.

The rows come from a Parquet file table (id BIGINT, k STRING, amount DOUBLE, ts TIMESTAMP(3),
p STRING with 8 values), written once; each variant runs `INSERT INTO dst SELECT * FROM src`
in batch mode in one warm Spark session, after a small warm-up run of its own:

    parquet        'connector' = 'filesystem', 'format' = 'parquet' (staged, then published)
    iceberg        'connector' = 'iceberg', a SQLite catalog in the warehouse: Parquet files
                   written by pyiceberg's writer in the executors, one fast append on the driver
    iceberg-part   the same into a table partitioned by identity(p) (created by pyiceberg
                   first): pyiceberg splits each task's rows by partition

With ``--changes N --keys K`` it measures the upsert path instead (runtime.iceberg.upsert):
a changelog of N changes over K keys (id BIGINT key, v BIGINT, s STRING; +I, -U/+U pairs and
some -D, in order) handed to the sink as one micro-batch, ``write_iceberg_batch`` with a job
and batch id, against the same N rows appended to a table without a key:

    append         the N rows as +I into a keyless table (the append path)
    upsert-empty   the N changes into an empty keyed table (no file to rewrite)
    upsert-full    the N changes into the keyed table holding all K keys (every file rewritten)
    upsert-few     N/100 changes over K/100 keys into the full table (pruned by the keys' range)

Usage: bench/iceberg_sink.py [--rows N] [--variants parquet,iceberg,...] [--runs N]
       bench/iceberg_sink.py --changes 200000 --keys 20000 [--runs N]
Prints seconds and rows/s per variant and run.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = ("parquet", "iceberg", "iceberg-part")
COLUMNS = "id BIGINT, k STRING, amount DOUBLE, ts TIMESTAMP(3), p STRING"


def sink_ddl(variant: str, path: Path) -> str:
    if variant == "parquet":
        return f"CREATE OR REPLACE TEMPORARY TABLE dst ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')"
    return (f"CREATE OR REPLACE TEMPORARY TABLE dst ({COLUMNS}) WITH ('connector' = 'iceberg', 'catalog-name' = 'bench',"
            f" 'catalog-type' = 'jdbc', 'warehouse' = '{path}', 'catalog-database' = 'db', 'catalog-table' = 'dst')")


def partitioned_table(path: Path) -> None:
    """The iceberg-part variant's table, partitioned by identity(p), created with pyiceberg."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    path.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{path}/iceberg_catalog.db", warehouse=f"file://{path}")
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("amount", pa.float64()), ("ts", pa.timestamp("us")),
                        ("p", pa.string())])
    table = catalog.create_table(("db", "dst"), schema=schema)
    with table.update_spec() as spec:
        spec.add_identity("p")


def changelog(spark, changes: int, keys: int):
    """``changes`` rows of a changelog over ``keys`` keys, in batch order: each key's +I first,
    then -U/+U pairs; every 10th key's last change a -D."""
    from pyspark.sql import functions as F

    rounds = max(1, changes // keys)
    frame = spark.range(changes).select((F.col("id") % keys).alias("key"), (F.col("id") / keys).cast("long").alias("round"),
                                        F.col("id").alias("seq"))
    kind = (F.when(F.col("round") == 0, F.lit("+I"))
            .when((F.col("round") == rounds - 1) & (F.col("key") % 10 == 0), F.lit("-D"))
            .when(F.col("round") % 2 == 1, F.lit("-U")).otherwise(F.lit("+U")))
    return (frame.select(kind.alias("__rowkind"), F.col("key").alias("id"), F.col("round").alias("v"),
                         F.concat(F.lit("value-"), F.col("seq")).alias("s"), "seq")
            .repartition(4, "id").sortWithinPartitions("seq").drop("seq"))  # a key's changes in one task, in order


def upsert_main(args) -> None:
    from pyspark.sql import functions as F

    from streamsql.catalog import Catalog
    from streamsql.dialect.script import parse_script
    from streamsql.plan.define import define
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.iceberg.sink import resolve, write_iceberg_batch

    work = Path(tempfile.mkdtemp(prefix="iceberg-upsert-bench-"))
    engine = Engine(Catalog(work / "catalog"), base_dir=work, log=lambda _: None)
    spark = engine.spark
    print(f"{args.changes:,} changes over {args.keys:,} keys, one micro-batch, {spark.sparkContext.defaultParallelism} cores")

    def table(name: str, keyed: bool):
        key = ", PRIMARY KEY (id) NOT ENFORCED" if keyed else ""
        sql = (f"CREATE TABLE {name} (id BIGINT, v BIGINT, s STRING{key}) WITH ('connector' = 'iceberg', 'catalog-name' ="
               f" 'bench', 'catalog-type' = 'jdbc', 'warehouse' = '{work}', 'catalog-database' = 'db')")
        return define(parse_script(sql)[0].expression, "default_database")

    batches = iter(range(1_000_000))
    for run in range(args.runs):
        for variant in ("append", "upsert-empty", "upsert-full", "upsert-few"):
            name = f"{variant.replace('-', '_')}_{run}"
            changes, keys = (args.changes // 100, args.keys // 100) if variant == "upsert-few" else (args.changes, args.keys)
            frame = changelog(spark, changes, keys).cache()
            frame.count()
            if variant == "append":
                frame = frame.withColumn("__rowkind", F.lit("+I"))
            target = table(name, keyed=variant != "append")
            if variant in ("upsert-full", "upsert-few"):  # all K keys in the table first, a range of keys a file
                fill = changelog(spark, args.keys, args.keys).repartitionByRange(4, "id")
                write_iceberg_batch(fill, target, "bench-fill", next(batches))
            began = time.perf_counter()
            write_iceberg_batch(frame, target, "bench", next(batches))
            seconds = time.perf_counter() - began
            frame.unpersist()
            held = resolve(target)[0].scan().to_arrow().num_rows
            print(f"  {variant:13s} {changes:9,} rows {seconds:6.1f} s  {changes / seconds:10,.0f} rows/s"
                  f"  (the table then holds {held:,} rows)", flush=True)
    engine.stop()
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--changes", type=int, help="measure the upsert path: this many changes (see the docstring)")
    parser.add_argument("--keys", type=int, default=20_000)
    args = parser.parse_args()
    if args.changes:
        upsert_main(args)
        return
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter

    work = Path(tempfile.mkdtemp(prefix="iceberg-bench-"))
    engine = Engine(Catalog(work / "catalog"), base_dir=work, log=lambda _: None)
    spark = engine.spark
    for name, rows in (("src", args.rows), ("warm", 20_000)):
        spark.range(rows).selectExpr(
            "id", "concat('key-', id % 1000) AS k", "CAST(id AS DOUBLE) / 2 AS amount",
            "timestamp_seconds(1704067200 + id) AS ts", "concat('p', id % 8) AS p",
        ).repartition(4).write.parquet(str(work / name))
    print(f"{args.rows:,} rows, batch mode, {spark.sparkContext.defaultParallelism} cores")

    def run(variant: str, source: str) -> float:
        target = work / f"dst-{variant}"
        shutil.rmtree(target, ignore_errors=True)
        if variant == "iceberg-part":
            partitioned_table(target)
        script = (f"SET 'execution.runtime-mode' = 'batch';\n"
                  f"CREATE OR REPLACE TEMPORARY TABLE src ({COLUMNS}) WITH ('connector' = 'filesystem',"
                  f" 'path' = '{work / source}', 'format' = 'parquet');\n"
                  f"{sink_ddl(variant, target)};\nINSERT INTO dst SELECT * FROM src;\n")
        began = time.perf_counter()
        engine.run_script(script, ResultWriter("csv", io.StringIO()))
        return time.perf_counter() - began

    for variant in args.variants.split(","):
        run(variant, "warm")
        for _ in range(args.runs):
            seconds = run(variant, "src")
            print(f"  {variant:13s} {seconds:6.1f} s  {args.rows / seconds:10,.0f} rows/s", flush=True)
    engine.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
