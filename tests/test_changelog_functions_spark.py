"""TO_CHANGELOG and FROM_CHANGELOG run for real, on changelogs generated here: bounded (the
final table), streamed file by file ('execution.bounded-input' = 'stream': every change),
a code the mapping lacks, and a continuous job that survives kill -9."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import time
from collections import Counter

import pytest

from streamsql.errors import DataError
from tests.conftest import write
from tests.streamed import STREAMED

pytestmark = pytest.mark.spark

CODES = {"+I": "c", "-U": "ub", "+U": "ua", "-D": "d"}  # a CDC tool's own codes ('r': a snapshot read, INSERT)
MAPPING = "MAP['c, r', 'INSERT', 'ub', 'UPDATE_BEFORE', 'ua', 'UPDATE_AFTER', 'd', 'DELETE']"


def changelog(rng: random.Random, n: int, live: dict, first: int = 0) -> list[tuple[str, int, str, int]]:
    """n changes of rows (id, name, amount): inserts, updates (before and after), deletes,
    each consistent with ``live`` (the table so far, updated here)."""
    changes = []
    for i in range(first, first + n):
        roll = rng.random()
        if not live or roll < 0.45:
            row = (i, rng.choice("pqrs"), rng.randint(1, 50))
            live[i] = row
            changes.append(("r" if rng.random() < 0.2 else "c", *row))
        elif roll < 0.8:
            key = rng.choice(sorted(live))
            old = live[key]
            new = (key, rng.choice("pqrs") if rng.random() < 0.3 else old[1], rng.randint(1, 50))
            live[key] = new
            changes += [("ub", *old), ("ua", *new)]
        else:
            old = live.pop(rng.choice(sorted(live)))
            changes.append(("d", *old))
    return changes


def _csv(changes) -> str:
    return "".join(",".join(str(v) for v in change) + "\n" for change in changes)


def _table(path, options: str = "", create: str = "CREATE OR REPLACE TEMPORARY TABLE") -> str:
    return (f"{create} cdc (kind STRING, id BIGINT, name STRING, amount BIGINT) WITH ('connector' = 'filesystem',"
            f" 'path' = '{path}', 'format' = 'csv'{options});")


def _from(mapping: str = MAPPING) -> str:
    return f"FROM_CHANGELOG(input => TABLE cdc, op => DESCRIPTOR(kind), op_mapping => {mapping})"


def _parts(tmp_path, count: int, seed: int) -> tuple[object, dict, list]:
    rng, live, every = random.Random(seed), {}, []
    folder = tmp_path / "cdc"
    for n in range(count):
        changes = changelog(rng, 25, live, first=n * 100)
        every += changes
        write(folder / f"part-{n}.csv", _csv(changes))
        os.utime(folder / f"part-{n}.csv", (time.time() - 100 + n,) * 2)  # read in this order
    return folder, live, every


def _sums(rows) -> list[tuple[str, str, str]]:
    """(name, SUM(amount), COUNT(*)) of rows (id, name, amount), as the CSV output prints them."""
    totals: dict = {}
    for _, name, amount in rows:
        s, c = totals.get(name, (0, 0))
        totals[name] = (s + amount, c + 1)
    return sorted((name, str(s), str(c)) for name, (s, c) in totals.items())


def _changes(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][0] == "op"
    return rows[1:]


def _applied(changes, op_index: int = 0, adds=("+I", "+U"), retracts=("-U", "-D")) -> list[tuple]:
    """The table a changelog leaves (each change by its op at ``op_index``), its rows
    sorted: what was added less what was taken back, none taken back more than added."""
    added, taken = Counter(), Counter()
    for change in changes:
        op, row = change[op_index], tuple(change[:op_index] + change[op_index + 1:])
        assert op in adds + retracts, op
        (added if op in adds else taken)[row] += 1
    assert not taken - added, f"retracted, never added: {taken - added}"
    return sorted((added - taken).elements())


def test_bounded_from_changelog_is_the_table_its_changes_leave(run, tmp_path):
    folder, live, _ = _parts(tmp_path, 3, seed=5)
    ddl = _table(folder)
    rows = run.rows(ddl + f"SELECT * FROM {_from()};")
    assert sorted(tuple(r) for r in rows) == sorted((str(i), n, str(a)) for i, n, a in live.values()) and rows
    grouped = run.rows(ddl + f"SELECT name, SUM(amount), COUNT(*) FROM {_from()} GROUP BY name;")
    assert sorted(tuple(r) for r in grouped) == _sums(live.values())
    # the same row added twice is there twice; taken back once, once
    write(tmp_path / "dup" / "a.csv", "c,1,x,5\nc,1,x,5\nc,2,y,1\nub,1,x,5\nua,1,x,6\nd,2,y,1\n")
    assert sorted(run.rows(_table(tmp_path / "dup") + f"SELECT * FROM {_from()};")) == [["1", "x", "5"], ["1", "x", "6"]]


def test_streamed_from_changelog_emits_each_change_with_its_kind(run, tmp_path):
    folder, live, every = _parts(tmp_path, 3, seed=7)
    out = run.output(_table(folder) + STREAMED + f"SELECT * FROM {_from()};")
    kinds = {code: kind for kind, code in CODES.items()} | {"r": "+I"}
    assert Counter(tuple(r) for r in _changes(out)) == Counter(
        (kinds[k], str(i), n, str(a)) for k, i, n, a in every)
    assert _applied(_changes(out)) == sorted((str(i), n, str(a)) for i, n, a in live.values())
    # an aggregate over it retracts as the changes say, to the bounded result
    out = run.output(f"SELECT name, SUM(amount), COUNT(*) FROM {_from()} GROUP BY name;")
    assert _applied(_changes(out)) == _sums(live.values())


def test_streamed_to_changelog_writes_an_aggregate_s_changes_as_data(run, tmp_path):
    folder, live, _ = _parts(tmp_path, 4, seed=11)
    totals = f"CREATE TEMPORARY VIEW totals AS SELECT name, SUM(amount) AS s, COUNT(*) AS n FROM {_from()} GROUP BY name;"
    out = run.output(_table(folder) + totals + STREAMED + "SELECT * FROM TO_CHANGELOG(input => TABLE totals);")
    changes = _changes(out)
    assert {c[0] for c in changes} == {"+I"}  # appends only: the kind is data now
    ops = Counter(c[1] for c in changes)
    assert ops["UPDATE_BEFORE"] == ops["UPDATE_AFTER"] > 0 and ops["INSERT"] >= 4
    data = [c[1:] for c in changes]
    assert _applied(data, adds=("INSERT", "UPDATE_AFTER"), retracts=("UPDATE_BEFORE", "DELETE")) == _sums(live.values())
    # codes of one's own, the kinds left out dropped: only the new values
    out = run.output("SELECT * FROM TO_CHANGELOG(input => TABLE totals, op => DESCRIPTOR(change), op_mapping =>"
                     " MAP['INSERT, UPDATE_AFTER', 'upsert']);")
    upserts = _changes(out)
    assert {c[1] for c in upserts} == {"upsert"} and len(upserts) == ops["INSERT"] + ops["UPDATE_AFTER"]
    latest = {}
    for _, _, name, s, n in upserts:
        latest[name] = (name, s, n)
    assert sorted(latest.values()) == _sums(live.values())
    # and back: FROM_CHANGELOG of TO_CHANGELOG is the aggregate again
    out = run.output("CREATE TEMPORARY VIEW written AS SELECT * FROM TO_CHANGELOG(input => TABLE totals);"
                     " SELECT * FROM FROM_CHANGELOG(input => TABLE written);")
    assert _applied(_changes(out)) == _sums(live.values())
    # bounded, in one computation: its final rows, each an INSERT
    bounded = run.rows("RESET 'execution.bounded-input'; RESET 'sql-client.execution.result-mode';"
                       " SELECT * FROM TO_CHANGELOG(input => TABLE totals);")
    assert sorted(tuple(r) for r in bounded) == [("INSERT", *row) for row in _sums(live.values())]


def test_a_code_the_mapping_lacks_fails_the_query_naming_it(run, tmp_path):
    write(tmp_path / "bad" / "a.csv", "c,1,x,5\nzz,2,y,1\n")
    ddl = _table(tmp_path / "bad")
    mapping = "MAP['c', 'INSERT', 'ub', 'UPDATE_BEFORE']"
    for settings in ("", STREAMED):
        with pytest.raises(DataError, match=r"FROM_CHANGELOG received op code 'zz', which its op_mapping does"
                                                 r" not map \(codes: c, ub\)") as raised:
            run.rows(ddl + settings + f"SELECT * FROM {_from(mapping)};")
        assert "Traceback" not in str(raised.value) and "raise_error" not in str(raised.value)


def test_a_continuous_job_writes_its_changes_as_data_exactly_once_across_kill_9(tmp_path):
    from tests.jobs import killed_resumed_drained, lines

    source, out = tmp_path / "in", tmp_path / "out"
    rng, live, parts = random.Random(3), {}, []
    for n in range(3):
        parts.append(changelog(rng, 30, live, first=n * 100))

    def part(n: int) -> None:
        os.utime(write(source / f"part-{n}.csv", _csv(parts[n])), (time.time() - 100 + n,) * 2)

    ddl = (_table(source, ", 'source.monitor-interval' = '1s'", create="CREATE TABLE")
           + f"CREATE VIEW totals AS SELECT name, SUM(amount) AS s, COUNT(*) AS n FROM {_from()} GROUP BY name;"
           + f"CREATE TABLE out (op STRING, name STRING, s BIGINT, n BIGINT) WITH ('connector' = 'filesystem',"
             f" 'path' = '{out}', 'format' = 'json');")
    script = write(tmp_path / "job.sql", ddl + "INSERT INTO out SELECT * FROM TO_CHANGELOG(input => TABLE totals);")
    killed_resumed_drained(tmp_path, script, part, [lambda: lines(out), lambda: len(lines(out)) > 8,
                                                    lambda: len(lines(out)) > 14])
    written = [json.loads(line) for line in lines(out)]
    changes = [[r["op"], r["name"], str(r["s"]), str(r["n"])] for r in written]
    assert {"INSERT", "UPDATE_BEFORE", "UPDATE_AFTER"} <= {c[0] for c in changes}
    assert _applied(changes, adds=("INSERT", "UPDATE_AFTER"), retracts=("UPDATE_BEFORE", "DELETE")) == _sums(
        live.values())


def test_a_window_over_to_changelog_keeps_the_rowtime_and_streams_as_bounded(run, tmp_path):
    """As Flink 2.3: TO_CHANGELOG's rows keep their time attribute, so a window TVF reads them."""
    rng = random.Random(13)
    for n in range(3):
        rows = "".join(f"{i},{rng.choice('ab')},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 40, n * 40 + 40))
        os.utime(write(tmp_path / "w" / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)
    ddl = (f"CREATE OR REPLACE TEMPORARY TABLE w (id INT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)"
           f" WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'w'}', 'format' = 'csv');"
           "CREATE OR REPLACE TEMPORARY VIEW tc AS SELECT * FROM TO_CHANGELOG(input => TABLE w);")
    query = ("SELECT window_start, op, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE tc, DESCRIPTOR(ts), INTERVAL '30'"
             " SECOND)) GROUP BY window_start, window_end, op, k;")
    bounded = sorted(tuple(r) for r in run.rows(ddl + query))
    assert len(bounded) >= 8 and {r[1] for r in bounded} == {"INSERT"}
    assert sum(int(r[3]) for r in bounded) == 120
    streamed = _changes(run.output(ddl + STREAMED + query))
    assert {c[0] for c in streamed} == {"+I"} and sorted(tuple(c[1:]) for c in streamed) == bounded
