"""A GroupAggregate's pandas core (spark.stateful.accumulate) on one bucket: rows per second,
best of three, folding micro-batches of inserts into 1,000 keys — AVG (vectorised), a Python
AggregateFunction (PyFlink's WeightedAvg example: accumulators pickled per key, accumulate
row by row) and a pandas one (its rows kept). No Spark.

    python bench/python_aggregates.py [--rows 100000] [--batch 10000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from streamsql.plan.udfs import PythonFunction  # noqa: E402
from streamsql.pyflink import install  # noqa: E402
from streamsql.spark.stateful import accumulate  # noqa: E402
from streamsql.spark.stateful.group_aggregate import build_plan  # noqa: E402
from streamsql.spark.stateful.specs import AggSpec  # noqa: E402

install()
from pyflink.common import Row  # noqa: E402
from pyflink.table import AggregateFunction  # noqa: E402


class WeightedAvg(AggregateFunction):
    def create_accumulator(self):
        return Row(0, 0)

    def get_value(self, accumulator):
        return None if accumulator[1] == 0 else accumulator[0] / accumulator[1]

    def accumulate(self, accumulator, value, weight):
        accumulator[0] += value * weight
        accumulator[1] += weight


def mean(v):
    return v.mean()


def plan_of(spec: AggSpec) -> dict:
    fields = [T.StructField("k", T.StringType()), T.StructField("v", T.LongType()), T.StructField("w", T.LongType())]
    plan, _ = build_plan(T.StructType(fields), ["k"], [spec])
    plan["columns"] = ["k", "v", "w"]
    return plan


def best(call, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args()
    rng = random.Random(1)
    frame = pd.DataFrame({"k": [f"k{rng.randrange(1000)}" for _ in range(args.rows)],
                          "v": pd.array([rng.randrange(100) for _ in range(args.rows)], dtype="Int64"),
                          "w": pd.array([rng.randrange(1, 4) for _ in range(args.rows)], dtype="Int64")})
    batches = [frame.iloc[i:i + args.batch] for i in range(0, args.rows, args.batch)]
    double = T.DoubleType()
    weighted = WeightedAvg()
    specs = {
        "AVG (built-in, vectorised)": AggSpec("AVG", "v", output_name="a"),
        "Python AggregateFunction": AggSpec("PYTHON", None, output_name="a", output_type=double, columns=("v", "w"),
                                            python=PythonFunction("wavg", weighted.accumulate, None, False,
                                                                  instance=weighted, aggregate=True)),
        "pandas aggregate function": AggSpec("PYTHON", None, output_name="a", output_type=double, columns=("v",),
                                             python=PythonFunction("mean", mean, None, True, aggregate=True)),
    }
    for name, spec in specs.items():
        plan = plan_of(spec)

        def run():
            state = None
            for batch in batches:
                state, _ = accumulate.fold(plan, state, batch)

        seconds = best(run)
        print(f"{name:28} {args.rows / seconds:>12,.0f} rows/s  ({seconds:.2f} s, {len(batches)} micro-batches)")


if __name__ == "__main__":
    main()
