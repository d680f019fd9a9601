"""One Nexmark query on Apache Flink (PyFlink's local mini-cluster) over Kafka tables.

bench/kafka_nexmark.py runs it in Flink's virtualenv, a fresh process per query. `--ddl` is a
file of the CREATE TABLE statements of person/auction/bid as bounded Kafka tables (from the
earliest offset to the latest when the job starts), `--script` the query file run unchanged
(its INSERT into its blackhole table); the settings are bench/flink_job.py's (streaming mode,
parallelism --cores). The mini-cluster is started with a `SELECT 1` before the clock starts.
Prints one JSON line: the seconds from the query file's first statement to the INSERT's end.
"""

import argparse
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "queries" / "nexmark"))  # a query's Python UDF, imported when planning

from flink_job import _strip_comments, streaming_environment, timed_statements  # noqa: E402  (pure Python: no streamsql import)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True, help="the query file")
    parser.add_argument("--ddl", required=True, help="the Kafka tables' CREATE TABLE statements")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    env = streaming_environment(args.cores)
    env.execute_sql("CREATE DATABASE nexmark")
    env.execute_sql("USE nexmark")
    for statement in _statements(Path(args.ddl).read_text()):
        env.execute_sql(statement)
    env.execute_sql("SELECT 1").wait()  # start the mini-cluster before timing
    print(json.dumps({"seconds": timed_statements(env, _statements(Path(args.script).read_text()))}))


def _statements(text: str) -> list[str]:
    return [s.strip() for s in _strip_comments(text).split(";") if s.strip()]


if __name__ == "__main__":
    main()
