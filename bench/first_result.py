"""The shell's first streaming query: seconds from Enter to its whole result, with the warm-up
the shell runs once Spark is ready (runtime.warm_up) and without it (`--no-warm-up`).

    python bench/first_result.py                 # 3 queries x both ways, 2 runs each
    python bench/first_result.py --runs 3 --think 10

Each run is a fresh shell (`streamsql`, through a pty) over a catalog of its own: it waits
for "Spark ready", then --think seconds (a person typing), then sends one streaming query
over a directory of CSV files read a file a micro-batch ('execution.bounded-input' =
'stream', results in tableau mode) and times it to its "rows in set". Prints one line per
query and way (the median and every run), and the JSON of them all.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

QUERIES = {
    "group_by": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k",
    "tumble": ("SELECT window_start, COUNT(*) AS n, MAX(v) AS top FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
               "INTERVAL '10' SECOND)) GROUP BY window_start, window_end"),
    "top_n": ("SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS r FROM t) "
              "WHERE r <= 2"),
}
FILES, ROWS = 4, 5_000


def write_rows(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for part in range(FILES):
        lines = []
        for i in range(part * ROWS, (part + 1) * ROWS):
            seconds = i // 100
            lines.append(f"{i % 97},{(i * 7919) % 100_003},2024-01-01 {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}\n")
        (directory / f"part-{part}.csv").write_text("".join(lines))


def ddl(directory: Path) -> str:
    return ("CREATE TABLE t (k INT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
            f"WITH ('connector' = 'filesystem', 'path' = '{directory}', 'format' = 'csv', "
            "'source.max-files-per-batch' = '1');\n")


def one_run(query: str, warm_up: bool, think: float, work: Path) -> float:
    import pexpect

    catalog = Path(tempfile.mkdtemp(prefix="catalog-", dir=work))
    init = catalog.parent / f"{catalog.name}.sql"
    init.write_text(ddl(work / "rows") + "SET 'execution.bounded-input' = 'stream';\n"
                    "SET 'sql-client.execution.result-mode' = 'tableau';\n")
    args = [str(ROOT / "cli.py"), "--catalog", str(catalog), "-i", str(init)] + ([] if warm_up else ["--no-warm-up"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    shell = pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=300, dimensions=(50, 200))
    try:
        shell.expect("Spark ready")
        time.sleep(think)
        started = time.perf_counter()
        shell.send(query + ";\n")
        shell.expect(r"rows? in set")
        seconds = time.perf_counter() - started
        shell.sendline("QUIT;")
        shell.expect(pexpect.EOF)
        return seconds
    finally:
        shell.close(force=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--think", type=float, default=8.0, help="seconds between 'Spark ready' and the query")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="streamsql-first-result-"))
    write_rows(work / "rows")
    results = {}
    for name in args.queries.split(","):
        for warm_up in (False, True):
            runs = [one_run(QUERIES[name], warm_up, args.think, work) for _ in range(args.runs)]
            results[f"{name} {'warm-up' if warm_up else 'no warm-up'}"] = runs
            print(f"{name:9} {'warm-up' if warm_up else 'no warm-up':11} median {statistics.median(runs):5.2f} s  "
                  f"runs {', '.join(f'{r:.2f}' for r in runs)}", flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
