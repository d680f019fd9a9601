"""Planning without Spark for the tests: a Nexmark-like catalog (``DDL``), each statement's
step (``steps``), a query's operator plan (``build``) and its stages (``stages``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.plan import aggregate_operators, join_operators, operators
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.planner import Planner
from streamsql.runtime.sources import is_bounded
from streamsql.spark.stateful.chain import compile_query

ops = SimpleNamespace(**{**vars(operators), **vars(aggregate_operators), **vars(join_operators)})

DDL = """
CREATE TEMPORARY TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
CREATE TEMPORARY TABLE auction (id BIGINT, seller BIGINT, category BIGINT, ts TIMESTAMP(3), expires TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH ('connector' = 'filesystem', 'path' = 'auction.csv', 'format' = 'csv');
CREATE TEMPORARY TABLE clicks (user_id BIGINT, url STRING, p AS PROCTIME())
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE users (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'filesystem', 'path' = 'users.csv', 'format' = 'csv');
CREATE TEMPORARY TABLE files_out (a BIGINT, b BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'csv');
CREATE TEMPORARY TABLE print_out (a BIGINT, b BIGINT) WITH ('connector' = 'print');
"""


def _source_files() -> Path:
    """A folder holding the (empty) files the DDL's sources read: they must exist to plan."""
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="streamsql-opplan-"))
    atexit.register(shutil.rmtree, folder, True)
    for name in ("bid.csv", "auction.csv", "users.csv"):
        (folder / name).touch()
    for name in ("clicks", "auction"):
        (folder / name).mkdir()
    return folder


SOURCES = _source_files()


def steps(sql: str, ddl: str = DDL, base_dir=None):
    planner = Planner(Catalog(None), base_dir=base_dir or SOURCES)
    return [planner.plan(s) for s in parse_script(ddl + sql)]


def build(sql: str, ttl: str | None = None) -> ops.Operator:
    return build_operator_plan(steps(sql)[-1].plan, is_bounded, ttl)


def kinds(node: ops.Operator) -> str:
    return ops.short_mode(node.mode)


def below(node: ops.Operator, kind: type) -> ops.Operator:
    return next(n for n in ops.walk(node) if isinstance(n, kind))


def stages(sql: str):
    plan = steps(sql)[-1].plan
    return compile_query(plan, is_bounded)
