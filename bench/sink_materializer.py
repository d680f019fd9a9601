"""The sink upsert materializer's pandas cores (spark.stateful.sink_materializer), on one
bucket's micro-batch: changes per second, best of three, for keys with one upsert key (the
column-wise path) and keys with two (the loop over changes). No Spark.

    python bench/sink_materializer.py [--changes 100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (run as a script: the tests' change frames)

from streamsql.spark.stateful import sink_materializer as sm  # noqa: E402
from tests.test_on_conflict import PLAN, changes  # noqa: E402

def best(call, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=100_000)
    n = parser.parse_args().changes
    rng = random.Random(1)
    shapes = {"one upsert key per key": changes([("+I", rng.randrange(n // 2), "A", i) for i in range(n)]),
              "two upsert keys per key": changes([("+I", rng.randrange(n // 5), rng.choice("AB"), i) for i in range(n)])}
    for name, batch in shapes.items():
        waiting = batch.assign(**{sm.TAG: 0})
        dedup = best(lambda: sm.deduplicate(PLAN, None, batch))
        compact = best(lambda: sm.compact({**PLAN, "strategy": "NOTHING"}, None, waiting, 1))
        print(f"{name}: DEDUPLICATE {n / dedup:,.0f} changes/s, NOTHING/ERROR compaction {n / compact:,.0f} changes/s")


if __name__ == "__main__":
    main()
