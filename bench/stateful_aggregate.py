"""Benchmark: the stateful GroupAggregate (transformWithStateInPandas, many keys per call)
against Spark's native streaming aggregate (update mode) on the same input and cores.

    python bench/stateful_aggregate.py [--rows 1500000] [--keys 50000] [--files 10] [--buckets 8,32]
                                       [--layouts blob,rows]

The input is generated once as parquet files (``--files`` of them; one per micro-batch);
both queries run ``SELECT k, COUNT(*), MAX(v) FROM t GROUP BY k`` into Spark's noop sink
with ``trigger(availableNow=True)`` on fresh checkpoints. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def generate(directory: Path, rows: int, keys: int, files: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = directory / f"_done_{rows}_{keys}_{files}"
    if done.exists():
        return
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = np.random.default_rng(42)
    per_file = rows // files
    for n in range(files):
        table = pa.table({"k": rng.integers(0, keys, per_file, dtype="int64"),
                          "v": rng.integers(0, 1_000_000, per_file, dtype="int64")})
        pq.write_table(table, directory / f"part-{n:04d}.parquet")
    done.touch()


def run(spark, source: Path, checkpoint: Path, stateful: bool, buckets: int, layout: str = "blob",
        rowkind: bool = False) -> dict:
    from pyspark.sql import functions as F

    from streamsql.spark.stateful import AggSpec
    from streamsql.spark.stateful.group_aggregate import group_aggregate

    frame = spark.readStream.schema("k BIGINT, v BIGINT").option("maxFilesPerTrigger", 1).parquet(str(source))
    if rowkind:  # a changelog input (all +I): MAX then keeps its retractable value -> count multiset
        frame = frame.select(F.lit("+I").alias("__rowkind"), "k", "v")
    if stateful:
        out = group_aggregate(frame, ["k"], [AggSpec("COUNT", output_name="n"), AggSpec("MAX", "v", output_name="mx")],
                              buckets=buckets, layout=layout)
        writer = out.writeStream.outputMode("append")
    else:
        out = frame.groupBy("k").agg(F.count(F.lit(1)).alias("n"), F.max("v").alias("mx"))
        writer = out.writeStream.outputMode("update")
    start = time.perf_counter()
    query = writer.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - start
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    batch_ms = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    state_rows = progress[-1]["stateOperators"][0]["numRowsTotal"] if progress and progress[-1]["stateOperators"] else 0
    emitted = sum(p["sink"].get("numOutputRows", 0) for p in progress)
    steady = batch_ms[1:] or batch_ms
    return {"rows": rows, "wall": wall, "batches": len(progress), "batch_ms": batch_ms, "state_rows": state_rows,
            "emitted": emitted, "steady_rps": sum(p["numInputRows"] for p in progress[1:]) / (sum(steady) / 1000)
            if len(progress) > 1 else rows / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_500_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--buckets", default="8", help="comma-separated bucket counts to try")
    parser.add_argument("--layouts", default="blob", help="comma-separated state layouts to try (blob, rows)")
    parser.add_argument("--rowkind", action="store_true",
                        help="feed a __rowkind column (a changelog input): MIN/MAX keep value multisets")
    parser.add_argument("--repeat", type=int, default=1, help="run the whole sequence this many times (medians)")
    parser.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "streamsql-bench-stateful"))
    args = parser.parse_args()

    from streamsql.runtime.session import default_conf, start_session

    base = Path(args.dir)
    source = base / "input"
    generate(source, args.rows, args.keys, args.files)
    conf = default_conf("local[2]")
    conf.update({"spark.sql.shuffle.partitions": str(args.partitions), "spark.driver.memory": "2g"})
    spark = start_session(conf)
    try:
        print(f"{args.rows:,} rows, {args.keys:,} keys, {args.files} micro-batches, local[2], "
              f"{args.partitions} shuffle partitions; SELECT k, COUNT(*), MAX(v) GROUP BY k"
              + (" over a changelog input (+I rows with __rowkind)" if args.rowkind else ""))
        runs = [("native update mode", False, 0, "")] + [
            (f"stateful B={b} {layout}", True, int(b), layout)
            for layout in args.layouts.split(",") for b in args.buckets.split(",")]
        results: dict = {}
        for attempt in range(args.repeat):  # interleaved: the machine's load moves under every run
            for label, stateful, buckets, layout in runs:
                checkpoint = base / f"ck-{label.replace(' ', '_').replace('=', '')}"
                shutil.rmtree(checkpoint, ignore_errors=True)
                r = run(spark, source, checkpoint, stateful, buckets, layout, args.rowkind)
                results.setdefault(label, []).append(r)
                print(f"[{attempt + 1}] {label:24s} wall {r['wall']:6.1f} s  {r['rows'] / r['wall']:>10,.0f} rows/s  "
                      f"steady {r['steady_rps']:>10,.0f} rows/s  batches {r['batches']}  "
                      f"batch ms {r['batch_ms']}  emitted {r['emitted']:,}  state rows {r['state_rows']:,}", flush=True)
        medians = {label: (statistics.median(r["wall"] for r in rs), statistics.median(r["steady_rps"] for r in rs))
                   for label, rs in results.items()}
        native_wall, native_rps = medians["native update mode"]
        print(f"medians over {args.repeat} run(s):")
        for label, (wall, rps) in medians.items():
            print(f"  {label:24s} wall {wall:6.1f} s = {args.rows / wall:>9,.0f} rows/s, steady {rps:>9,.0f} rows/s"
                  f"  -> {native_wall / wall:.2f}x native (wall), {rps / native_rps:.2f}x native (steady)")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
