"""One Nexmark query on Apache Flink (PyFlink's local mini-cluster), on the benchmark's files.

Runs in its own virtualenv (bench/run.py --with-flink makes it). The query text is the
same file streamsql runs (queries/nexmark/qN.sql); the tables are Flink filesystem CSV
tables over the same files. Prints one JSON line: the job's seconds.
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "queries" / "nexmark"))  # q14's Python UDF, imported when planning

from data import KINDS, side_input_ddl, table_ddl  # noqa: E402  (pure Python: no streamsql import)
from job import query_file  # noqa: E402


def streaming_environment(cores: int):
    """PyFlink's TableEnvironment in streaming mode, parallelism ``cores``, as both Flink
    benchmarks run it (files here, Kafka in flink_kafka_job.py)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", str(cores))
    config.set("taskmanager.numberOfTaskSlots", str(cores))
    config.set("pipeline.object-reuse", "true")
    config.set("table.exec.source.idle-timeout", "1 s")
    config.set("python.executable", sys.executable)
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--query", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    env = streaming_environment(args.cores)
    config = env.get_config()
    config.set("python.files", str(ROOT / "queries" / "nexmark" / "nexmark_udfs.py"))
    env.execute_sql("CREATE DATABASE nexmark")
    env.execute_sql("USE nexmark")
    for kind in KINDS:
        env.execute_sql(table_ddl(kind, Path(args.data) / kind).rstrip().rstrip(";"))
    env.execute_sql(side_input_ddl().rstrip().rstrip(";"))
    env.execute_sql("SELECT 1").wait()  # start the mini-cluster before timing
    statements = [s.strip() for s in _strip_comments(query_file(args.query).read_text()).split(";")]
    print(json.dumps({"seconds": timed_statements(env, filter(None, statements))}))


def timed_statements(env, statements) -> float:
    """Seconds to run a query file's statements (its USE skipped, its UDFs registered as
    PyFlink wants them, its INSERTs waited for)."""
    started = time.perf_counter()
    for statement in statements:
        if statement.upper().startswith("USE "):
            continue
        if statement.upper().startswith("CREATE TEMPORARY FUNCTION"):
            _register_udf(env, statement)
            continue
        result = env.execute_sql(statement)
        if statement.upper().startswith("INSERT"):
            result.wait()
    return time.perf_counter() - started


def _register_udf(env, statement: str) -> None:
    """PyFlink wants its own @udf wrapper around a plain Python function."""
    import importlib

    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    name, target = re.match(r"CREATE TEMPORARY FUNCTION (\w+) AS '([\w.]+)'", statement, re.IGNORECASE).groups()
    module, function = target.rsplit(".", 1)
    env.create_temporary_function(name, udf(getattr(importlib.import_module(module), function), result_type=DataTypes.BIGINT()))


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


if __name__ == "__main__":
    main()
