"""Nexmark into lake tables across crashes: a continuous INSERT killed with `kill -9` again and
again, resumed each time, then read back by the lake table's own library and compared with
the query's bounded result computed apart from streamsql.

    python bench/lake_restarts.py                          # Delta and Iceberg, q1 and the upsert query, 3 kills
    python bench/lake_restarts.py --sinks delta --queries upsert --events 400000 --kills 5

The events (`--events`, Nexmark's generator, bench/data.py) are written once as CSV files of
`--file-rows` rows; while the job runs they arrive in its watched directories, a file every
`--pace` seconds, and are read a file a micro-batch. Two queries:

    q1      Nexmark q1 (every bid, its price in euros) into a table without a key: a
            micro-batch written twice would show as duplicate rows
    upsert  SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction into a table keyed
            by auction (an updating query: each micro-batch's changes merged by key)

Each job runs `streamsql run job.sql`; once the sink has a commit past the last one seen, it
is killed within 0-3 s (mid micro-batch or between two) with SIGKILL to its process group
(driver, JVM and Python workers), and started again with the same command, `--kills` times.
The last run goes to the end of the input and is stopped. The table is then read with
deltalake (delta-rs) or pyiceberg and compared, as a multiset, with the result pyarrow
computes from the CSV files. Prints one line per job: rows, commits, kills, equal or not.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import data  # noqa: E402
from resume import kill, start  # noqa: E402

QUERIES = {
    "q1": ("auction BIGINT, bidder BIGINT, price DOUBLE, `dateTime` TIMESTAMP(3), extra STRING",
           "SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra FROM bid"),
    "upsert": ("auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction) NOT ENFORCED",
               "SELECT auction, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY auction"),
}


def sink_ddl(sink: str, query: str, place: Path) -> str:
    options = (f"'connector' = 'delta', 'table-path' = '{place}'" if sink == "delta" else
               f"'connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'jdbc', 'warehouse' = '{place}'")
    return f"CREATE TABLE out ({QUERIES[query][0]}) WITH ({options});\n"


def read_back(sink: str, place: Path):
    """The table's rows (a pyarrow Table) as its own library reads them; None before its first commit."""
    if sink == "delta":
        from deltalake import DeltaTable

        return DeltaTable(str(place)).to_pyarrow_table() if DeltaTable.is_deltatable(str(place)) else None
    table = iceberg_table(place)
    return table.scan().to_arrow() if table is not None else None


def commits(sink: str, place: Path) -> int:
    if sink == "delta":
        return len(list((place / "_delta_log").glob("*.json"))) if (place / "_delta_log").is_dir() else 0
    table = iceberg_table(place)
    return len(table.snapshots()) if table is not None else 0


def iceberg_table(place: Path):
    """The job's Iceberg table (`nexmark`.`out`: the Flink table's own database and name), or None."""
    from pyiceberg.catalog.sql import SqlCatalog

    if not (place / "iceberg_catalog.db").exists():
        return None
    catalog = SqlCatalog("lake", uri=f"sqlite:///{place}/iceberg_catalog.db", warehouse=f"file://{place}")
    try:
        return catalog.load_table(("nexmark", "out"))
    except Exception:  # not created yet
        return None


def expected(query: str, files: Path) -> list[tuple]:
    """The bounded result, from the CSV files with pyarrow (no streamsql, no Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv

    names = ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"]
    options = csv.ConvertOptions(column_types={"dateTime": pa.timestamp("ms")}, strings_can_be_null=False)
    bids = pa.concat_tables(csv.read_csv(p, read_options=csv.ReadOptions(column_names=names), convert_options=options)
                            for p in sorted((files / "bid").glob("*.csv")))
    if query == "q1":
        return _rows(pa.table({"auction": bids["auction"], "bidder": bids["bidder"],
                               "price": pc.multiply(bids["price"].cast(pa.float64()), 0.908),
                               "dateTime": bids["dateTime"], "extra": bids["extra"]}))
    grouped = bids.group_by("auction").aggregate([("price", "count"), ("price", "max")])
    return _rows(grouped.select(["auction", "price_count", "price_max"]))


def _rows(table) -> list[tuple]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted(tuple(round(v, 6) if isinstance(v, float) else (v.replace(tzinfo=None) if hasattr(v, "tzinfo") else v)
                        for v in row) for row in zip(*columns))


def feed(files: Path, into: Path, pace: float) -> threading.Thread:
    """Copy the bid files into the job's watched directory, one every ``pace`` seconds (a file
    appears whole: written aside, then renamed in)."""
    def run() -> None:
        for path in sorted((files / "bid").glob("*.csv")):
            aside = into / f".{path.name}"
            shutil.copyfile(path, aside)
            os.replace(aside, into / path.name)
            time.sleep(pace)

    (into).mkdir(parents=True, exist_ok=True)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def one_job(sink: str, query: str, files: Path, kills: int, rng: random.Random, pace: float) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"streamsql-lake-{sink}-") as scratch:
        work = Path(scratch)
        place = work / "lake"
        catalog = work / "catalog" / "nexmark"
        catalog.mkdir(parents=True)
        for kind in data.KINDS:
            (work / "in" / kind).mkdir(parents=True, exist_ok=True)
            (catalog / f"{kind}.sql").write_text(data.table_ddl(
                kind, work / "in" / kind, "'source.max-files-per-batch' = '1'", "'source.monitor-interval' = '1 s'"))
        feeder = feed(files, work / "in" / "bid", pace)
        job_file = work / "job.sql"
        job_file.write_text("USE nexmark;\n" + sink_ddl(sink, query, place) + f"INSERT INTO out {QUERIES[query][1]};\n")
        began, killed = time.monotonic(), 0
        for _ in range(kills):
            job, seen = start(work, job_file), commits(sink, place)
            try:
                _wait(lambda: commits(sink, place) > seen, 600, job)
                time.sleep(rng.uniform(0, 3))
            finally:
                kill(job)
            killed += 1
        files_count = len(list((files / "bid").glob("*.csv")))
        feeder.join()
        job = start(work, job_file)
        try:
            checkpoints = work / "catalog" / "_checkpoints"
            _wait(lambda: len(list(checkpoints.glob("*/checkpoint/commits/[0-9]*"))) >= files_count, 900, job)
            time.sleep(3)  # a micro-batch more would show as rows past the result
        finally:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(60)
            except Exception:
                kill(job)
        table = read_back(sink, place)
        got = _rows(table.select([c.split(" ")[0].strip("`") for c in QUERIES[query][0].split(", ")
                                  if not c.startswith("PRIMARY")])) if table is not None else []
        want = expected(query, files)
        return {"sink": sink, "query": query, "rows": len(got), "expected": len(want), "equal": got == want,
                "duplicates": len(got) - len(set(got)), "kills": killed, "commits": commits(sink, place),
                "seconds": round(time.monotonic() - began, 1)}


def _wait(condition, timeout: float, job) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if job.poll() is not None:
            raise SystemExit(f"the job ended: {job.stderr.read()[-3000:]}")
        time.sleep(0.2)
    raise SystemExit(f"nothing within {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--file-rows", type=int, default=15_000, help="rows per CSV file: one micro-batch each")
    parser.add_argument("--sinks", default="delta,iceberg")
    parser.add_argument("--queries", default="q1,upsert")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--pace", type=float, default=2.0, help="seconds between two input files")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("STREAMSQL_TEST_SEED", "7")))
    args = parser.parse_args()
    data.FILE_ROWS = args.file_rows
    files = Path(tempfile.gettempdir()) / f"streamsql-lake-data-{args.events}-{args.file_rows}"
    data.generate_files(files, args.events)
    rng = random.Random(args.seed)
    failed = False
    for sink in args.sinks.split(","):
        for query in args.queries.split(","):
            result = one_job(sink, query, files, args.kills, rng, args.pace)
            failed |= not result["equal"]
            print("  ".join(f"{k}={v}" for k, v in result.items()), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
