"""Python aggregate functions (PyFlink's @udaf) on Spark: over bounded input (GROUP BY,
FILTER, DISTINCT, a global aggregate, window TVFs, OVER), streamed with retractions, and a
continuous job over a watched directory — a CUMULATE window (slices merged), an unbounded
OVER and a GROUP BY into a Delta table — killed with kill -9, restarted and drained. Data
generated here; expected results computed in plain Python from the same rows, or by a
batch run (Spark SQL over each group's collected rows: another code path than the
streaming operators' accumulators)."""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from datetime import datetime, timedelta

import pytest

from tests.conftest import write
from tests.udaf_module import SOURCE

pytestmark = pytest.mark.spark

FUNCTIONS = "".join(f"CREATE TEMPORARY FUNCTION {f} AS 'job_udafs.{m}' LANGUAGE PYTHON;"
                    for f, m in (("wavg", "weighted_avg"), ("words", "live_words"), ("spread", "spread")))
START = datetime(2026, 1, 1)


def _rows(n: int, seed: int, first: int = 0) -> list[tuple]:
    """(id, k, v, w, ts): a row a second, v NULL now and then."""
    rng = random.Random(seed)
    return [(i, "abc"[rng.randrange(3)], rng.choice([None, *range(30)]), rng.randrange(1, 4),
             START + timedelta(seconds=i)) for i in range(first, first + n)]


def _csv(rows) -> str:
    return "".join(f"{i},{k},{'' if v is None else v},{w},{ts:%Y-%m-%d %H:%M:%S}\n" for i, k, v, w, ts in rows)


def _weighted(rows) -> float | None:
    taken = [(v, w) for v, w in rows if v is not None]
    return sum(v * w for v, w in taken) / sum(w for _, w in taken) if taken else None


def _spread(values) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) - min(present) if present else None


def _close(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value), key


def _num(text: str):
    return None if text == "" else float(text)


@pytest.fixture
def udafs(python_module):
    python_module("job_udafs", SOURCE)


def _table(path, watermark: bool = True, options: str = "") -> str:
    mark = ", WATERMARK FOR ts AS ts - INTERVAL '1' SECOND" if watermark else ""
    return (f"CREATE TEMPORARY TABLE src (id BIGINT, k STRING, v BIGINT, w BIGINT, ts TIMESTAMP(3){mark}) WITH"
            f" ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'{options});")


def test_bounded_group_window_and_over_calls(run, tmp_path, udafs):
    rows = _rows(120, 1)
    write(tmp_path / "src.csv", _csv(rows))
    ddl = FUNCTIONS + _table(tmp_path / "src.csv")
    by_key = defaultdict(list)
    for row in rows:
        by_key[row[1]].append(row)

    got = run.rows(ddl + "SELECT k, wavg(v, w), words(DISTINCT CAST(w AS STRING)), spread(v) FILTER (WHERE w > 1),"
                         " COUNT(*) FROM src GROUP BY k")
    expected = {k: (_weighted([(r[2], r[3]) for r in rs]), "-".join(sorted({str(r[3]) for r in rs})),
                    _spread([r[2] for r in rs if r[3] > 1]), len(rs)) for k, rs in by_key.items()}
    assert {r[0] for r in got} == set(expected)
    for k, a, ws, d, n in got:
        assert (_num(a), ws, _num(d), int(n)) == pytest.approx(expected[k])

    assert run.rows(ddl + "SELECT wavg(v, w) FROM src WHERE id < 0") == [[""]]  # no rows: a fresh accumulator's value

    got = run.rows(ddl + "SELECT window_start, wavg(v, w), spread(v) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts),"
                         " INTERVAL '30' SECOND)) GROUP BY window_start, window_end")
    windows = defaultdict(list)
    for row in rows:
        windows[f"{START + timedelta(seconds=row[0] // 30 * 30):%Y-%m-%d %H:%M:%S}.000"].append(row)
    _close({w: (_num(a), _num(d)) for w, a, d in got},
           {w: (_weighted([(r[2], r[3]) for r in rs]), _spread([r[2] for r in rs])) for w, rs in windows.items()})

    got = run.rows(ddl + "SELECT id, wavg(v, w) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND"
                         " CURRENT ROW) FROM src")
    frames = {}
    for k, rs in by_key.items():
        for j, row in enumerate(rs):
            frames[row[0]] = _weighted([(r[2], r[3]) for r in rs[max(0, j - 3):j + 1]])
    assert {int(i): _num(a) for i, a in got} == pytest.approx(frames)


def test_streamed_with_retractions_ends_with_the_batch_result(run, tmp_path, udafs):
    """Each file a micro-batch: the outer GROUP BY takes back a key's row each time its count
    changes (retract), the inner one only adds; the last rows streamed are the batch's."""
    folder = tmp_path / "parts"
    for f in range(4):
        path = write(folder / f"part-{f}.csv", _csv(_rows(25, 10 + f, f * 25)))
        os.utime(path, (time.time() - 100 + f,) * 2)
    query = ("SELECT n, words(k) AS ks, wavg(n, n) AS a, spread(n) AS d, words(DISTINCT CAST(n % 2 AS STRING)) AS p"
             " FROM (SELECT k, COUNT(*) AS n FROM src GROUP BY k) GROUP BY n")
    ddl = FUNCTIONS + _table(folder, watermark=False)
    batch = sorted(map(tuple, run.rows(ddl + query)))
    streamed = run.rows(ddl + "SET 'execution.bounded-input' = 'stream'; SET 'sql-client.execution.result-mode' ="
                              " 'changelog';" + query)
    final: dict = {}
    for op, *row in streamed:
        if op in ("+I", "+U"):
            final[row[0]] = tuple(row)
        else:
            assert final.pop(row[0]) == tuple(row)
    assert any(op in ("-U", "-D") for op, *_ in streamed)
    assert sorted(final.values()) == batch


def test_a_continuous_job_survives_kill_9_and_drains_to_the_batch_result(run, tmp_path, udafs):
    from deltalake import DeltaTable

    from tests.jobs import killed_resumed_drained, lines

    source, wout, oout, gout = (tmp_path / name for name in ("in", "wout", "oout", "gout"))
    parts = [_rows(40, 20 + n, n * 40) for n in range(3)]

    def part(n: int) -> None:
        os.utime(write(source / f"part-{n}.csv", _csv(parts[n])), (time.time() - 100 + n,) * 2)

    def tables(w: str, o: str, g: str, create: str = "CREATE TABLE") -> str:
        return (f"{create} wout (ws TIMESTAMP(3), we TIMESTAMP(3), a DOUBLE, d BIGINT) WITH ('connector' ="
                f" 'filesystem', 'path' = '{w}', 'format' = 'csv');"
                f"{create} oout (id BIGINT, a DOUBLE, ks STRING) WITH ('connector' = 'filesystem', 'path' = '{o}',"
                f" 'format' = 'csv');"
                f"{create} gout (k STRING, a DOUBLE, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' ="
                f" 'delta', 'table-path' = '{g}');")

    inserts = ["INSERT INTO wout SELECT window_start, window_end, wavg(v, w), spread(v) FROM TABLE(CUMULATE("
               "TABLE src, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start,"
               " window_end",
               "INSERT INTO oout SELECT id, wavg(v, w) OVER o, words(CAST(v AS STRING)) OVER o FROM src WINDOW o AS"
               " (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
               "INSERT INTO gout SELECT k, wavg(v, w), COUNT(*) FROM src GROUP BY k"]
    ddl = (FUNCTIONS.replace("TEMPORARY ", "") + _table(source, options=", 'source.monitor-interval' = '1s'")
           .replace("TEMPORARY ", "") + tables(wout, oout, gout))
    script = write(tmp_path / "job.sql", ddl + "EXECUTE STATEMENT SET BEGIN " + "; ".join(inserts) + "; END;")
    killed_resumed_drained(tmp_path, script, part, [lambda: lines(wout) and lines(oout), lambda: len(lines(oout)) > 40,
                                                    lambda: len(lines(oout)) > 80])

    batch = {name: tmp_path / f"batch-{name}" for name in ("w", "o", "g")}
    run.rows(FUNCTIONS + _table(source) + tables(batch["w"], batch["o"], batch["g"], "CREATE TEMPORARY TABLE")
             + "SET 'execution.runtime-mode' = 'batch';" + "; ".join(inserts[:2]) + ";")
    assert sorted(lines(wout)) == sorted(lines(batch["w"]))
    assert len(lines(oout)) == 120 and sorted(lines(oout)) == sorted(lines(batch["o"]))
    by_key = defaultdict(list)
    for row in (r for p in parts for r in p):
        by_key[row[1]].append((row[2], row[3]))
    table = {r.k: (r.a, r.n) for r in DeltaTable(str(gout)).to_pandas().itertuples()}
    _close(table, {k: (_weighted(rs), len(rs)) for k, rs in by_key.items()})
