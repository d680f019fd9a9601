"""One measured job in a fresh process: a Nexmark query through streamsql or hand-written PySpark.

Both start Spark with streamsql's defaults on the same cores and run one tiny job first,
so the figure is the query's own time, not the JVM's start. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["streamsql", "pyspark"], required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--driver-memory", default=None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a streamsql SET before the query")
    args = parser.parse_args()

    from streamsql.runtime.session import default_conf, start_session

    conf = default_conf(f"local[{args.cores}]")
    if args.driver_memory:
        conf["spark.driver.memory"] = args.driver_memory
    spark = start_session(conf)
    spark.range(1).count()
    checkpoint = tempfile.mkdtemp(prefix="streamsql-bench-")
    started = time.perf_counter()
    if args.engine == "streamsql":
        run_streamsql(spark, args.query, args.catalog, checkpoint, dict(item.split("=", 1) for item in args.set))
    else:
        import handwritten

        handwritten.run(spark, args.query, args.data, checkpoint)
    print(json.dumps({"seconds": time.perf_counter() - started}))
    spark.stop()
    shutil.rmtree(checkpoint, ignore_errors=True)


def query_file(query: str) -> Path:
    """queries/nexmark/qN.sql, or one of the benchmark's own queries in bench/queries/."""
    nexmark = ROOT / "queries" / "nexmark" / f"{query}.sql"
    return nexmark if nexmark.exists() else ROOT / "bench" / "queries" / f"{query}.sql"


def run_streamsql(spark, query: str, catalog: str, checkpoint: str, settings: dict) -> None:
    from streamsql.catalog import Catalog
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter

    script = query_file(query)
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(Catalog(catalog), spark=spark, base_dir=script.parent, log=lambda message: None)
    engine.settings.set("execution.checkpointing.dir", checkpoint)
    for key, value in settings.items():
        engine.settings.set(key, value)
    engine.run_script(script.read_text(), ResultWriter("csv"))


if __name__ == "__main__":
    main()
