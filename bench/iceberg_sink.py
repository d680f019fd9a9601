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

Usage: bench/iceberg_sink.py [--rows N] [--variants parquet,iceberg,...] [--runs N]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
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
