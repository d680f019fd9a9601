"""How fast the MATCH_RECOGNIZE matcher (spark/matcher.py) goes, without Spark: rows per
second through one Python worker, for a V-shape and a rising-run pattern over a seeded
random walk of prices.

    .venv/bin/python bench/match_recognize.py [--rows 200000] [--keys 100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PATTERNS = {
    "v_shape": ("MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, COUNT(B.*) AS downs"
                " AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C)"
                " DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)"),
    "rising_run": ("MEASURES S.price AS low, LAST(U.price) AS high, AVG(U.price) AS mean"
                   " AFTER MATCH SKIP TO NEXT ROW PATTERN (S U{3,} E)"
                   " DEFINE U AS U.price > PREV(U.price), E AS E.price <= PREV(E.price)"),
}


def partitions(rows: int, keys: int, seed: int = 7) -> list[list[dict]]:
    """``keys`` partitions of a random walk each, ``rows`` rows in all, in time order."""
    rng = random.Random(seed)
    start = datetime.datetime(2026, 1, 1)
    out = []
    for key in range(keys):
        price, part = 100, []
        for i in range(rows // keys):
            price = max(1, price + rng.choice((-2, -1, 1, 2)))
            part.append({"symbol": f"S{key}", "price": price, "ts": start + datetime.timedelta(seconds=i)})
        out.append(part)
    return out


def measure(name: str, data: list[list[dict]]) -> dict:
    import sqlglot
    from sqlglot import exp

    from streamsql.dialect.flink import Flink
    from streamsql.plan.match_recognize import match_relation
    from streamsql.plan.objects import Column
    from streamsql.spark.matcher import Matcher

    columns = [Column("symbol", exp.DataType.build("TEXT")), Column("price", exp.DataType.build("INT")),
               Column("ts", exp.DataType.build("TIMESTAMP(3)"), time_attribute="rowtime")]
    sql = f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts {PATTERNS[name]})"
    matcher = Matcher(match_relation(sqlglot.parse_one(sql, read=Flink).args["match"], "m", "t", columns).spec)
    began = time.perf_counter()
    matches = sum(len(matcher.run(part)) for part in data)
    seconds = time.perf_counter() - began
    rows = sum(len(p) for p in data)
    return {"pattern": name, "rows": rows, "matches": matches, "seconds": round(seconds, 3),
            "rows_per_second": round(rows / seconds)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args(argv)
    data = partitions(args.rows, args.keys)
    results = [measure(name, data) for name in PATTERNS]
    print(f"{'pattern':<12} {'rows':>9} {'matches':>8} {'seconds':>8} {'rows/s':>9}")
    for r in results:
        print(f"{r['pattern']:<12} {r['rows']:>9} {r['matches']:>8} {r['seconds']:>8} {r['rows_per_second']:>9}")
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
