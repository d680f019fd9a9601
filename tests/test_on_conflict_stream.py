"""INSERT ... ON CONFLICT on Spark: a streamed GROUP BY user_id, category into a Delta table
keyed by user_id, through the sink upsert materializer (spark.stateful.sink_materializer).
Real Spark, real Delta tables read back with delta-rs; the expected tables computed with
pandas from the same files."""

from __future__ import annotations

import os
import random
import time

import pandas as pd
import pytest
from deltalake import DeltaTable

from tests.conftest import write

pytestmark = pytest.mark.spark

LIMIT = 40  # a (user, category) is written while its total is below this


def _ddl(source, sink) -> str:
    return f"""
CREATE TABLE orders (id BIGINT, user_id BIGINT, category STRING, amount BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv');
CREATE TABLE totals (user_id BIGINT, category STRING, total BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)
  WITH ('connector' = 'delta', 'table-path' = '{sink}');
SET 'execution.bounded-input' = 'stream';
"""


def _insert(strategy: str) -> str:
    return (f"INSERT INTO totals SELECT user_id, category, total FROM (SELECT user_id, category, SUM(amount) AS total"
            f" FROM orders GROUP BY user_id, category) WHERE total < {LIMIT} ON CONFLICT DO {strategy};")


def _files(source, parts: list[list[tuple]]) -> None:
    """One CSV file per part, older first (a micro-batch each), rows (user, category, amount)
    a second apart."""
    n = 0
    for f, rows in enumerate(parts):
        lines = []
        for user, category, amount in rows:
            lines.append(f"{n},{user},{category},{amount},2026-01-01 00:{n // 60 % 60:02d}:{n % 60:02d}\n")
            n += 1
        path = write(source / f"part-{f:03d}.csv", "".join(lines))
        os.utime(path, (time.time() - 100 + f, time.time() - 100 + f))


def _table(path) -> dict:
    if not DeltaTable.is_deltatable(str(path)):
        return {}
    return {int(r.user_id): (r.category, int(r.total)) for r in DeltaTable(str(path)).to_pandas().itertuples()}


def _one_live_row_each(rng: random.Random, users: int) -> list[list[tuple]]:
    """Each user's categories all pass the limit but one, over three files: every key ends
    with one live row (or none), so every strategy ends with it — but only a materializer
    keeps it when another category's row is retracted under the same key."""
    rows = []
    for user in range(users):
        keep = rng.randrange(4)
        for category in "ABCD"[: rng.randint(1, 4)]:
            amounts = [rng.randint(1, 9) for _ in range(rng.randint(1, 3))]
            if category != "ABCD"[keep]:
                amounts.append(LIMIT)  # retracted once this arrives
            rows += [(user, category, a) for a in amounts]
    rng.shuffle(rows)
    third = len(rows) // 3
    return [rows[:third], rows[third:2 * third], rows[2 * third:]]


def _first_written_wins(rng: random.Random, users: int) -> list[list[tuple]]:
    """Each user's kept category is all in the first file, the others come only after the
    watermark has passed it, and they are all retracted in the last file: DO NOTHING keeps
    the row written first against them, drops theirs (their retractions then find nothing
    to delete), and the kept row is the key's at the end. (A kept row updated while a
    conflicting one is live stays as written, as in Flink: it is left out here.)"""
    parts: list[list[tuple]] = [[], [], []]
    for user in range(users):
        categories = "ABCD"[: rng.randint(1, 4)]
        kept = rng.choice(categories)
        parts[0].append((user, kept, rng.randint(1, 9)))
        parts[0] += [(user, kept, rng.randint(1, 9)) for _ in range(rng.randint(0, 2))]
        for category in categories.replace(kept, ""):
            parts[1] += [(user, category, rng.randint(1, 9)) for _ in range(rng.randint(1, 2))]
            parts[2].append((user, category, LIMIT))
    for part in parts:
        rng.shuffle(part)
    return parts


def _expected(source) -> dict:
    frame = pd.concat([pd.read_csv(f, header=None, names=["id", "user_id", "category", "amount", "ts"])
                       for f in sorted(source.glob("*.csv"))])
    totals = frame.groupby(["user_id", "category"])["amount"].sum().reset_index()
    live = totals[totals.amount < LIMIT]
    assert not live.user_id.duplicated().any()
    return {int(r.user_id): (r.category, int(r.amount)) for r in live.itertuples()}


@pytest.mark.parametrize("strategy, data", [("DEDUPLICATE", _one_live_row_each), ("NOTHING", _first_written_wins)])
def test_each_key_keeps_its_live_row_when_another_upsert_key_is_retracted(run, tmp_path, strategy, data):
    source, sink = tmp_path / "in", tmp_path / "totals"
    _files(source, data(random.Random(7), 60))
    explained = "\n".join(row[0] for row in run.rows(_ddl(source, sink) + "EXPLAIN " + _insert(strategy)))
    assert f"upsertMaterialize=[true], conflictStrategy=[{strategy}]" in explained
    run.rows(_ddl(source, sink) + _insert(strategy))
    expected = _expected(source)
    assert _table(sink) == expected and len(expected) > 20


@pytest.mark.parametrize("strategy, kept", [("DEDUPLICATE", ("B", 3)), ("NOTHING", ("A", 5))])
def test_deduplicate_writes_the_latest_row_and_nothing_the_first(run, tmp_path, strategy, kept):
    source, sink = tmp_path / "in", tmp_path / "totals"
    _files(source, [[(1, "A", 5), (2, "A", 1)], [(1, "B", 3)]])  # B arrives after the watermark passed A
    run.rows(_ddl(source, sink) + _insert(strategy))
    assert _table(sink) == {1: kept, 2: ("A", 1)}


def test_error_fails_the_job_on_two_live_rows_under_one_key(run, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "totals"
    _files(source, [[(1, "A", 5)], [(1, "B", 3)]])
    with pytest.raises(Exception, match="Primary key constraint violation: multiple distinct records with the same"
                       " primary key detected") as failure:
        run.rows(_ddl(source, sink) + _insert("ERROR"))
    assert "Traceback" not in str(failure.value)


def test_deduplicate_resumes_its_rows_from_the_checkpoint(run, tmp_path):
    """The materializer's live rows are in the job's checkpoint: a rerun over a new file
    goes back to a key's earlier row when the new file retracts its latest."""
    source, sink = tmp_path / "in", tmp_path / "totals"
    parts = _one_live_row_each(random.Random(11), 40)
    _files(source, parts[:2])
    run.rows(_ddl(source, sink) + _insert("DEDUPLICATE"))
    later = tmp_path / "later"
    _files(later, parts)  # the same rows numbered as one sequence: its last file is the new one
    (later / "part-002.csv").rename(source / "part-002.csv")
    run.rows(_ddl(source, sink) + _insert("DEDUPLICATE"))
    assert _table(sink) == _expected(source)
