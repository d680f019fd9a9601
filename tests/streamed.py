"""A query streamed (bounded input run micro-batch by micro-batch, its changelog printed and
applied) beside the same query in batch mode, for the tests: ``streamed_and_batch``."""

from __future__ import annotations

import csv
import io
from collections import Counter

from streamsql.changelog import ADDS


def applied(text: str) -> list[tuple]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][0] == "op"
    table: Counter = Counter()
    for op, *row in rows[1:]:
        if op in ADDS:
            table[tuple(row)] += 1
        else:
            assert table[tuple(row)] > 0, f"{op} retracts {row}, which is not in the result"
            table[tuple(row)] -= 1
    return sorted(table.elements()), Counter(r[0] for r in rows[1:])


STREAMED = "SET 'execution.bounded-input' = 'stream'; SET 'sql-client.execution.result-mode' = 'changelog';"
BATCH = ("RESET 'execution.bounded-input'; RESET 'sql-client.execution.result-mode';"
         " SET 'execution.runtime-mode' = 'batch';")


def streamed_and_batch(run, query: str):
    """(the streamed changelog applied, its row kinds counted, batch mode's result), sorted."""
    final, ops = applied(run.output(STREAMED + query))
    expected = sorted(tuple(r) for r in list(csv.reader(io.StringIO(run.output(BATCH + query))))[1:])
    run.output("RESET 'execution.runtime-mode';")
    return final, ops, expected
