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
