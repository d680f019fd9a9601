"""A stream's lookup join into PostgreSQL: events/s with and without the lookup cache.

1 M order rows (CSV files in a directory, one file a micro-batch: 'execution.bounded-input'
= 'stream') joined `FOR SYSTEM_TIME AS OF o.pt` with a 100,000-row customer table in a
throwaway PostgreSQL server (tests/postgres.py), into a blackhole. Customer keys are drawn
from a Zipf-like distribution (a few customers order most), as enrichment streams are. One
warm Spark session runs each variant in turn after a small warm-up run:

    none       'lookup.cache' unset (Flink's NONE): each task asks for its micro-batch's keys
    partial    'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '100000'
    scan       the same join with a LEFT JOIN condition beyond the key, which keeps Spark's
               stream-static join: the whole table read every micro-batch (what every jdbc
               lookup did before keyed lookups)
    parquet    the customer table as a Parquet file table (stream-static join, for reference)

Usage: bench/lookup_join.py [--rows N] [--dimension N] [--files N] [--variants none,partial,...]
Prints seconds and events/s per variant.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script: the tests' PostgreSQL helper)

from tests.postgres import postgres_server, require_postgres  # noqa: E402

VARIANTS = ("none", "partial", "scan", "parquet")


def orders(directory: Path, rows: int, files: int, dimension: int) -> None:
    import numpy as np

    directory.mkdir(parents=True)
    rng = np.random.default_rng(7)
    keys = np.minimum(rng.zipf(1.3, rows), dimension)  # 1..dimension, skewed
    per_file = rows // files
    for f in range(files):
        ids = np.arange(f * per_file, (f + 1) * per_file)
        lines = "\n".join(f"{i},{k},{i % 1000}" for i, k in zip(ids, keys[f * per_file:(f + 1) * per_file]))
        (directory / f"part-{f:03d}.csv").write_text(lines + "\n")


def script(variant: str, url: str, source: Path, parquet: Path) -> str:
    options = {
        "none": "", "scan": "",
        "partial": ", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '100000'",
    }
    if variant == "parquet":
        dimension = (f"CREATE OR REPLACE TEMPORARY TABLE customers (id INT, name STRING, segment STRING) WITH ("
                     f"'connector' = 'filesystem', 'path' = '{parquet}', 'format' = 'parquet');\n")
    else:
        dimension = (f"CREATE OR REPLACE TEMPORARY TABLE customers (id INT, name STRING, segment STRING) WITH ("
                     f"'connector' = 'jdbc', 'url' = '{url}', 'table-name' = 'customers', 'username' = 'postgres'"
                     f"{options[variant]});\n")
    join = ("LEFT JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id AND c.segment <> 'none'"
            if variant == "scan" else "JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id")
    return (
        "SET 'execution.runtime-mode' = 'streaming';\nSET 'execution.bounded-input' = 'stream';\n"
        f"CREATE OR REPLACE TEMPORARY TABLE orders (oid BIGINT, cid INT, amount INT, pt AS PROCTIME()) WITH ("
        f"'connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv');\n" + dimension +
        "CREATE OR REPLACE TEMPORARY TABLE out (oid BIGINT, name STRING, segment STRING, amount INT)"
        " WITH ('connector' = 'blackhole');\n"
        f"INSERT INTO out SELECT o.oid, c.name, c.segment, o.amount FROM orders AS o {join};\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dimension", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter

    work = Path(tempfile.mkdtemp(prefix="lookup-bench-"))
    orders(work / "orders", args.rows, args.files, args.dimension)
    orders(work / "warm", 20_000, 2, args.dimension)
    with postgres_server(require_postgres()) as server:
        server.create_database("bench")
        url = server.url("bench")
        with server.connect("bench") as connection:
            connection.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, segment text)")
            connection.execute(f"INSERT INTO customers SELECT g, 'customer ' || g, 's' || (g % 7)"
                               f" FROM generate_series(1, {args.dimension}) g")
            connection.execute("ANALYZE customers")
        first = Engine(Catalog(work / "catalog-0"), base_dir=work, log=lambda _: None)
        spark = first.spark
        parquet = work / "customers.parquet"
        spark.createDataFrame([(i, f"customer {i}", f"s{i % 7}") for i in range(1, args.dimension + 1)],
                              "id INT, name STRING, segment STRING").coalesce(1).write.parquet(str(parquet))
        print(f"{args.rows:,} order rows in {args.files} micro-batches, {args.dimension:,} customers in PostgreSQL")
        runs = 0

        def run(variant: str, source: Path) -> float:
            nonlocal runs
            runs += 1  # each run a fresh catalog (its own job and checkpoint), one Spark session
            engine = Engine(Catalog(work / f"catalog-{runs}"), base_dir=work, log=lambda _: None, spark=spark)
            began = time.perf_counter()
            engine.run_script(script(variant, url, source, parquet), ResultWriter("csv", io.StringIO()))
            return time.perf_counter() - began

        for variant in args.variants.split(","):
            run(variant, work / "warm")
            seconds = run(variant, work / "orders")
            print(f"  {variant:8s} {seconds:7.1f} s  {args.rows / seconds:10,.0f} events/s", flush=True)
        first.stop()

if __name__ == "__main__":
    main()
