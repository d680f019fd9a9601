"""Running statements through an Engine without Spark, their results as CSV rows."""

from __future__ import annotations

import csv
import io

from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter


def run(engine: Engine, sql: str) -> list[list[str]]:
    """The rows (header first) ``sql``'s last result printed as CSV."""
    out = io.StringIO()
    engine.run_script(sql, ResultWriter("csv", out))
    return list(csv.reader(io.StringIO(out.getvalue())))


def last_step(script: str, base_dir=None):
    """Plan ``script`` statement by statement in a fresh catalog, without Spark; the last
    statement's step. A planning error carries the whole script (its position shown in it)."""
    from streamsql.catalog import Catalog
    from streamsql.dialect.script import parse_script
    from streamsql.errors import StreamsqlError
    from streamsql.plan.planner import Planner

    planner = Planner(Catalog(None), base_dir) if base_dir is not None else Planner(Catalog(None))
    try:
        return [planner.plan(s) for s in parse_script(script)][-1]
    except StreamsqlError as error:
        raise error.with_source(script)
