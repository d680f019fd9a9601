"""The sink upsert materializer's pandas cores (spark.stateful.sink_materializer), on one
bucket's micro-batch: changes per second, best of three, for keys with one upsert key (the
column-wise path) and keys with two (the loop over changes). No Spark.

    python bench/sink_materializer.py [--changes 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import pandas as pd

from streamsql.spark.stateful import sink_materializer as sm

COLUMNS = ["user_id", "category", "total"]
PLAN = {"columns": COLUMNS, "upsert_key": ["user_id", "category"], "buckets": 1}


def changes(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[sm.ROWKIND, *COLUMNS])
    frame[sm.PK] = [json.dumps({"user_id": u}) for u in frame.user_id]
    frame[sm.UK] = [json.dumps({"user_id": u, "category": c}) for u, c in zip(frame.user_id, frame.category)]
    frame[sm.ROW] = [json.dumps(dict(zip(COLUMNS, r))) for r in zip(frame.user_id, frame.category, frame.total)]
    frame[sm.SEQ] = range(len(frame))
    return frame


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
