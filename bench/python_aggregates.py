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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

from streamsql.plan.udfs import PythonFunction  # noqa: E402
from streamsql.pyflink import install  # noqa: E402
from streamsql.spark.stateful import accumulate  # noqa: E402
from streamsql.spark.stateful.group_aggregate import build_plan  # noqa: E402
from streamsql.spark.stateful.specs import AggSpec  # noqa: E402
from sink_materializer import best  # noqa: E402  (bench/, the script's folder)
from tests.udaf_module import SOURCE  # noqa: E402

install()
UDAFS: dict = {}
exec(SOURCE, UDAFS)  # PyFlink's WeightedAvg example, as the tests load it


def mean(v):
    return v.mean()


def plan_of(spec: AggSpec) -> dict:
    fields = [T.StructField("k", T.StringType()), T.StructField("v", T.LongType()), T.StructField("w", T.LongType())]
    plan, _ = build_plan(T.StructType(fields), ["k"], [spec])
    plan["columns"] = ["k", "v", "w"]
    return plan


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
    weighted = UDAFS["WeightedAvg"]()
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
