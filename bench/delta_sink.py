"""A bounded INSERT of 1 M rows into a Delta table (runtime.delta) and into a Parquet
filesystem table, for comparison: rows/s of each sink.

The rows come from a Parquet file table (id BIGINT, k STRING, amount DOUBLE, ts TIMESTAMP(3),
p STRING with 8 values), written once; each variant runs `INSERT INTO dst SELECT * FROM src`
in batch mode in one warm Spark session, after a small warm-up run of its own:

    parquet        'connector' = 'filesystem', 'format' = 'parquet' (staged, then published)
    delta          'connector' = 'delta': Parquet files from the executors, one delta-rs commit
    delta-part     the same, PARTITIONED BY (p): a file per task and partition value
    delta-upsert   PRIMARY KEY (id) NOT ENFORCED: the rows reduced by key, one delta-rs MERGE
                   (into an empty table: every row an insert; the rows go through the driver)

Usage: bench/delta_sink.py [--rows N] [--variants parquet,delta,...] [--runs N]
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

VARIANTS = ("parquet", "delta", "delta-part", "delta-upsert")
COLUMNS = "id BIGINT, k STRING, amount DOUBLE, ts TIMESTAMP(3), p STRING"


def sink_ddl(variant: str, path: Path) -> str:
    if variant == "parquet":
        return f"CREATE OR REPLACE TEMPORARY TABLE dst ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')"
    key = ", PRIMARY KEY (id) NOT ENFORCED" if variant == "delta-upsert" else ""
    partitioned = " PARTITIONED BY (p)" if variant == "delta-part" else ""
    return f"CREATE OR REPLACE TEMPORARY TABLE dst ({COLUMNS}{key}){partitioned} WITH ('connector' = 'delta', 'table-path' = '{path}')"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter

    work = Path(tempfile.mkdtemp(prefix="delta-bench-"))
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
