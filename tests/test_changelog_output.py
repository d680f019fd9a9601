"""Row kinds in results: the changelog result mode prints an `op` column first."""

from __future__ import annotations

import csv
import io

import pytest

from tests.conftest import write

pytestmark = pytest.mark.spark


def test_changelog_mode_prints_op_first(run, tmp_path):
    data = write(tmp_path / "in" / "part-0.csv", "1,a\n2,b\n")
    table = (f"CREATE TEMPORARY TABLE t (id BIGINT, s STRING) WITH ('connector' = 'filesystem',"
             f" 'path' = '{data.parent}', 'format' = 'csv');")
    out = run.output(table + "SET 'sql-client.execution.result-mode' = 'changelog'; SELECT id, s FROM t")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["op", "id", "s"]
    assert sorted(rows[1:]) == [["+I", "1", "a"], ["+I", "2", "b"]]
    # The default (table) mode has no op column.
    out = run.output("RESET 'sql-client.execution.result-mode'; SELECT id FROM t")
    assert out.splitlines()[0] == "id"
