"""Flink's VARIANT on Spark: PARSE_JSON and access over generated JSON, a VARIANT column read
from JSON files and written to JSON and Parquet, bad JSON named, and a continuous job (a
window aggregate and a deduplication carrying VARIANT values through the pandas operators)
killed with kill -9, restarted and drained to the batch result. Expected values are computed
in plain Python from the generated documents."""

from __future__ import annotations

import json
import os
import random
import time
from datetime import datetime, timedelta

import pytest

from streamsql.errors import DataError
from tests.conftest import write

pytestmark = pytest.mark.spark

START = datetime(2026, 3, 1)


def _document(rng: random.Random, i: int):
    """A JSON value of any kind: an object (keys in random order), an array, a scalar, null."""
    kind = rng.randrange(5)
    if kind == 0:
        fields = {"n": i, "tag": rng.choice(["x", "y", "it's"]), "list": [rng.randrange(9) for _ in range(rng.randrange(4))]}
        return dict(rng.sample(list(fields.items()), len(fields)))
    if kind == 1:
        return [i, {"deep": rng.choice([True, False])}]
    if kind == 2:
        return rng.choice(["text", 7, 2.5])
    if kind == 3:
        return None
    return {"n": -i}


def _rows(n: int, seed: int, first: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(first, first + n):
        row = {"id": i, "k": "abc"[rng.randrange(3)], "ts": f"{START + timedelta(seconds=i):%Y-%m-%d %H:%M:%S}"}
        if rng.random() > 0.1:  # else v is absent: SQL NULL, where a JSON null is a VARIANT null
            row["v"] = _document(rng, i)
        rows.append(row)
    return rows


def _text(value) -> str:
    """JSON_STRING's text: no spaces, object keys sorted."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _table(path, name: str = "src", options: str = "", create: str = "CREATE TEMPORARY TABLE") -> str:
    return (f"{create} {name} (id BIGINT, k STRING, ts TIMESTAMP(3), v VARIANT,"
            f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{path}',"
            f" 'format' = 'json'{options});")


def test_values_read_written_and_read_back(run, tmp_path):
    rows = _rows(60, 1)
    write(tmp_path / "in" / "a.json", _jsonl(rows))
    got = run.rows(_table(tmp_path / "in") + """
        SELECT id, v, JSON_STRING(v), v IS NULL, JSON_STRING(v['n']), JSON_STRING(v['list'][2]), JSON_STRING(v[2]['deep']),
               JSON_VALUE(v, '$.tag'), v = PARSE_JSON(JSON_STRING(v)), TYPEOF(v['n']) FROM src;""")
    for (id_, shown, text, null, n, second, deep, tag, same, kind), row in zip(sorted(got, key=lambda r: int(r[0])), rows):
        value = row.get("v")
        present = "v" in row
        assert (null == "true") == (not present), id_
        assert shown == text == ("" if not present else _text(value)), id_
        obj = value if isinstance(value, dict) else {}
        assert n == (_text(obj["n"]) if "n" in obj else ""), id_
        assert second == (_text(obj["list"][1]) if len(obj.get("list", [])) > 1 else ""), id_
        assert deep == (_text(value[1]["deep"]) if isinstance(value, list) else ""), id_
        assert tag == (obj.get("tag") or ""), id_
        assert same == ("" if not present else "true") and kind == "VARIANT", id_

    out = run.rows(_table(tmp_path / "in") + "".join(
        f"CREATE TEMPORARY TABLE {f}_out (id BIGINT, v VARIANT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{tmp_path / f}', 'format' = '{f}'); INSERT INTO {f}_out SELECT id, v FROM src;"
        f"CREATE TEMPORARY TABLE {f}_back (id BIGINT, v VARIANT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{tmp_path / f}', 'format' = '{f}');" for f in ("json", "parquet"))
        + "SELECT j.id, JSON_STRING(j.v), JSON_STRING(p.v) FROM json_back j JOIN parquet_back p ON j.id = p.id;")
    # Parquet keeps a SQL NULL apart from a JSON null; a JSON file writes both as null, which
    # reads back as a JSON null (as a JSON null inside an object or array does)
    expected = {r["id"]: ("null" if r.get("v") is None else _text(r["v"]),
                          "" if "v" not in r else _text(r["v"])) for r in rows}
    assert {int(i): (a, b) for i, a, b in out} == expected


def test_parse_json_over_generated_strings(run, tmp_path):
    rng = random.Random(5)
    docs = [_document(rng, i) for i in range(40)]
    strings = [json.dumps(d, indent=rng.choice([None, 2])) for d in docs] + ['{"a":1,"a":2}', "{bad", "[1,", ""]
    write(tmp_path / "s" / "a.json", "".join(json.dumps({"i": i, "s": s}) + "\n" for i, s in enumerate(strings)))
    ddl = ("CREATE TEMPORARY TABLE s (i INT, s STRING) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 's'}', 'format' = 'json');")
    got = run.rows(ddl + "SELECT i, JSON_STRING(TRY_PARSE_JSON(s)), TRY_PARSE_JSON(s) IS NULL FROM s;")
    for i, text, null in got:
        i = int(i)
        expected = _text(docs[i]) if i < len(docs) else ""
        assert text == expected and (null == "true") == (i >= len(docs)), strings[i]
    with pytest.raises(DataError, match=r"PARSE_JSON failed on '\{bad': it is not valid JSON"):
        run.rows(ddl + "SELECT PARSE_JSON(s) FROM s WHERE s = '{bad';")
    with pytest.raises(DataError, match="its key 'a' is repeated"):
        run.rows(ddl + "SELECT PARSE_JSON(s) FROM s WHERE s LIKE '%\"a\":2%';")


def test_a_continuous_job_survives_kill_9_and_drains_to_the_batch_result(run, tmp_path):
    from tests.jobs import killed_resumed_drained, lines

    source, wout, dout = tmp_path / "in", tmp_path / "wout", tmp_path / "dout"
    parts = [_rows(40, 30 + n, n * 40) for n in range(3)]

    def part(n: int) -> None:
        os.utime(write(source / f"part-{n}.json", _jsonl(parts[n])), (time.time() - 100 + n,) * 2)

    def sinks(w, d, create: str = "CREATE TABLE") -> str:
        return (f"{create} wout (ws TIMESTAMP(3), k STRING, lv VARIANT, fv VARIANT, n BIGINT) WITH ("
                f"'connector' = 'filesystem', 'path' = '{w}', 'format' = 'json');"
                f"{create} dout (id BIGINT, k STRING, v VARIANT) WITH ('connector' = 'filesystem', 'path' = '{d}',"
                " 'format' = 'json');")

    inserts = ["INSERT INTO wout SELECT window_start, k, LAST_VALUE(v), FIRST_VALUE(v['n']), COUNT(*) FROM TABLE("
               "TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k",
               "INSERT INTO dout SELECT id, k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start,"
               " window_end, k ORDER BY ts) AS rn FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)))"
               " WHERE rn <= 2"]
    ddl = _table(source, options=", 'source.monitor-interval' = '1s'", create="CREATE TABLE") + sinks(wout, dout)
    script = write(tmp_path / "job.sql", ddl + "EXECUTE STATEMENT SET BEGIN " + "; ".join(inserts) + "; END;")
    killed_resumed_drained(tmp_path, script, part, [lambda: lines(wout) and lines(dout), lambda: len(lines(dout)) > 12,
                                                    lambda: len(lines(wout)) > 20])

    batch_w, batch_d = tmp_path / "batch-w", tmp_path / "batch-d"
    run.rows(_table(source) + sinks(batch_w, batch_d, "CREATE TEMPORARY TABLE")
             + "SET 'execution.runtime-mode' = 'batch';" + "; ".join(inserts) + ";")
    assert sorted(lines(wout)) == sorted(lines(batch_w)) and lines(wout)
    assert sorted(lines(dout)) == sorted(lines(batch_d))
    every = [r for p in parts for r in p]
    firsts = {}
    for r in every:
        firsts.setdefault((r["k"], r["id"] // 10), []).append(r["id"])
    assert len(lines(dout)) == sum(min(2, len(ids)) for ids in firsts.values())
    shown = {json.loads(line)["id"]: json.loads(line).get("v") for line in lines(dout)}
    assert all(_text(shown[r["id"]]) == _text(r.get("v")) for r in every if r["id"] in shown)
