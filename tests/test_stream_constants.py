"""A stream joined with VALUES or a constant subquery (spark.stateful.constants): the bounded
side is read as a stream of one micro-batch, so Spark's "Union between streaming and batch
DataFrames/Datasets is not supported" no longer stops the join operator; every join type
ends with the batch result (Flink's)."""

from __future__ import annotations

import pytest

from tests.conftest import write
from tests.streamed import streamed_and_batch

VALUES = "(VALUES (1, 'one'), (2, 'two'), (9, 'nine')) AS v(id, name)"
QUERIES = {
    "left": (f"SELECT s.k, v.name FROM s LEFT JOIN {VALUES} ON s.k = v.id",
             [("1", "one"), ("1", "one"), ("2", "two"), ("3", "")]),
    "right": (f"SELECT s.k, v.name FROM s RIGHT JOIN {VALUES} ON s.k = v.id",
              [("", "nine"), ("1", "one"), ("1", "one"), ("2", "two")]),
    "full": (f"SELECT s.k, v.name FROM s FULL JOIN {VALUES} ON s.k = v.id",
             [("", "nine"), ("1", "one"), ("1", "one"), ("2", "two"), ("3", "")]),
    "values_left": ("SELECT s.k, v.name FROM (VALUES (1, 'one'), (9, 'nine')) AS v(id, name) LEFT JOIN s ON s.k = v.id",
                    [("", "nine"), ("1", "one"), ("1", "one")]),
    "inner": (f"SELECT s.k, v.name FROM s JOIN {VALUES} ON s.k = v.id", [("1", "one"), ("1", "one"), ("2", "two")]),
    "constant_subquery": ("SELECT s.k, c.name FROM s LEFT JOIN (SELECT 1 AS id, 'one' AS name) AS c ON s.k = c.id",
                          [("1", "one"), ("1", "one"), ("2", ""), ("3", "")]),
    "in_values": ("SELECT s.k, s.c FROM s WHERE s.k IN (SELECT id FROM (VALUES (1), (3)) AS v(id))",
                  [("1", "a"), ("1", "c"), ("3", "a")]),
}


@pytest.mark.spark
def test_streamed_joins_with_constants_end_with_flink_s_result(run, tmp_path):
    write(tmp_path / "in" / "p.csv", "1,a\n2,b\n3,a\n1,c\n")
    run.output(f"CREATE TEMPORARY TABLE s (k INT, c STRING) WITH ('connector' = 'filesystem',"
               f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv');")
    for name, (query, rows) in QUERIES.items():
        final, _, expected = streamed_and_batch(run, query)
        assert final == expected == rows, name
