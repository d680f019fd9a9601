"""`streamsql serve --gateway`: Flink's SQL Gateway REST API (runtime.gateway), over plain
HTTP as Flink's clients speak it. One gateway (on the test session's SparkSession) serves
the module's Spark tests."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest

from streamsql import cli
from streamsql.runtime.gateway import Gateway
from streamsql.runtime.gateway_results import GatewayWriter, ResultBuffer, json_value, logical_type
from tests.conftest import write

TOKEN = "a-gateway-token-of-32-characters"


# -- without Spark ----------------------------------------------------------------------------


def test_logical_types_are_flinks():
    from sqlglot import exp

    def of(text):
        return logical_type(exp.DataType.build(text))

    assert of("INT") == {"type": "INTEGER", "nullable": True}
    assert of("TEXT") == {"type": "VARCHAR", "nullable": True, "length": 2147483647}
    assert of("DECIMAL(10, 2)") == {"type": "DECIMAL", "nullable": True, "precision": 10, "scale": 2}
    assert of("TIMESTAMP(3)")["type"] == "TIMESTAMP_WITHOUT_TIME_ZONE" and of("TIMESTAMP(3)")["precision"] == 3
    assert of("ARRAY<BIGINT>") == {"type": "ARRAY", "nullable": True, "elementType": {"type": "BIGINT", "nullable": True}}
    assert of("STRUCT<x INT>")["fields"] == [{"name": "x", "fieldType": {"type": "INTEGER", "nullable": True}}]
    assert logical_type(exp.DataType.build("BIGINT"), nullable=False)["nullable"] is False


def test_json_values_as_flinks_converters_write_them():
    import datetime
    import decimal

    stamp = datetime.datetime(2024, 1, 2, 3, 4, 5, 120000)
    assert json_value(stamp, {"type": "TIMESTAMP_WITHOUT_TIME_ZONE"}) == "2024-01-02T03:04:05.12"
    assert json_value(stamp, {"type": "TIMESTAMP_WITH_LOCAL_TIME_ZONE"}) == "2024-01-02T03:04:05.12Z"
    assert json_value(datetime.date(2024, 1, 2), {"type": "DATE"}) == "2024-01-02"
    assert json_value(decimal.Decimal("1.50"), {"type": "DECIMAL", "scale": 2}) == 1.5
    assert json_value(float("nan"), {"type": "DOUBLE"}) == "NaN"
    assert json_value(b"\x01", {"type": "VARBINARY"}) == "AQ=="


def test_results_page_by_token_until_eos():
    import threading

    buffer = ResultBuffer()
    assert buffer.fetch(0, 2) == ("NOT_READY", [])
    writer = GatewayWriter(buffer, None, threading.Event())
    writer.table(["k"], [("a",), ("b",), ("c",)])
    assert buffer.fetch(0, 2) == ("PAYLOAD", [("INSERT", ["a"]), ("INSERT", ["b"])])
    assert buffer.fetch(0, 2)[1] == [("INSERT", ["a"]), ("INSERT", ["b"])]  # the same token again
    assert buffer.fetch(1, 2) == ("PAYLOAD", [("INSERT", ["c"])])
    assert buffer.fetch(2, 2) == ("WAIT", [])  # still running: an empty page, then the same token again
    buffer.finish()
    assert buffer.fetch(2, 2) == ("EOS", [])
    with pytest.raises(Exception, match="not expected"):
        buffer.fetch(7, 2)


def test_serve_gateway_beyond_loopback_needs_a_token(monkeypatch, capsys):
    monkeypatch.delenv("STREAMSQL_CONNECT_TOKEN", raising=False)
    assert cli.main(["serve", "--gateway", "--bind", "0.0.0.0"]) == 1
    assert "Refusing to serve the SQL Gateway on 0.0.0.0 without authentication" in capsys.readouterr().err
    assert cli.build_parser().parse_args(["serve", "--gateway"]).gateway == 8083
    assert cli.build_parser().parse_args(["serve", "--gateway", "9090"]).gateway == 9090


# -- a gateway ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("gateway")
    write(base / "bids.csv", "".join(f"{i},{i * 1.5},bidder{i % 3},2024-01-01 10:00:0{i}\n" for i in range(7)))
    folder = base / "parts"
    for i, text in enumerate(["a,1\nb,5\n", "a,7\nc,2\n", "a,3\nb,1\n"]):
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    served = Gateway(base / "catalog", spark=spark, token=TOKEN, base_dir=base, page_size=3)
    server = served.listen("127.0.0.1", 0)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    served.folder = folder
    yield served
    served.close()


def call(gateway, method, path, body=None, token=TOKEN):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(gateway.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def open_session(gateway, **properties):
    status, body = call(gateway, "POST", "/v1/sessions", {"sessionName": "test", "properties": properties})
    assert status == 200, body
    return body["sessionHandle"]


def results(gateway, session, statement, row_format="JSON", seconds=120):
    """Execute, then fetch every page: (the first page's body, [(kind, fields)], pages with rows
    and the EOS one)."""
    status, body = call(gateway, "POST", f"/v2/sessions/{session}/statements", {"statement": statement})
    assert status == 200, body
    return fetch_all(gateway, f"/v2/sessions/{session}/operations/{body['operationHandle']}/result/0?rowFormat={row_format}",
                     seconds)


def fetch_all(gateway, uri, seconds=120):
    first, rows, pages, deadline = None, [], 0, time.time() + seconds
    while uri:
        status, page = call(gateway, "GET", uri)
        assert status == 200, page
        if page["resultType"] == "NOT_READY":
            assert time.time() < deadline, "no result in time"
            time.sleep(0.2)
        else:
            first = first or page
            rows += [(r["kind"], r["fields"]) for r in page["results"]["data"]]
            pages += 1 if page["results"]["data"] or page["resultType"] == "EOS" else 0
        uri = page.get("nextResultUri")
    return first, rows, pages


@pytest.mark.spark
def test_api_versions_and_info(gateway):
    assert call(gateway, "GET", "/api_versions") == (200, {"versions": ["V1", "V2"]})
    status, info = call(gateway, "GET", "/v1/info")
    assert status == 200 and info["productName"].startswith("streamsql") and "version" in info
    assert call(gateway, "GET", "/v3/info")[0] == 404


@pytest.mark.spark
def test_unauthorized_without_or_with_a_wrong_token(gateway, capsys):
    assert call(gateway, "GET", "/v1/info", token=None)[0] == 401
    status, body = call(gateway, "POST", "/v1/sessions", {}, token="wrong-token-wrong-token-wrong")
    assert status == 401 and "Bearer" in body["errors"][0]
    logged = capsys.readouterr().err
    assert "refused gateway request from 127.0.0.1 (no token)" in logged and "(wrong token)" in logged


@pytest.mark.spark
def test_session_configure_and_heartbeat(gateway):
    session = open_session(gateway, **{"table.local-time-zone": "UTC"})
    assert call(gateway, "POST", f"/v1/sessions/{session}/configure-session",
                {"statement": "SET 'pipeline.name' = 'gw'"}) == (200, {})
    status, config = call(gateway, "GET", f"/v1/sessions/{session}")
    assert status == 200 and config["properties"]["pipeline.name"] == "gw"
    assert config["properties"]["table.local-time-zone"] == "UTC"
    assert call(gateway, "POST", f"/v1/sessions/{session}/heartbeat") == (200, {})
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/configure-session", {"statement": "SELECT 1"})
    assert status == 500 and "configuring session" in body["errors"][0]
    assert call(gateway, "DELETE", f"/v1/sessions/{session}") == (200, {"status": "CLOSED"})
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/heartbeat")
    assert status == 500 and "does not exist" in body["errors"][0]


@pytest.mark.spark
def test_ddl_and_a_bounded_select_paged(gateway):
    session = open_session(gateway)
    first, rows, _ = results(gateway, session, "CREATE TABLE bids (auction BIGINT, price DOUBLE, bidder STRING,"
                             " ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = 'bids.csv', 'format' = 'csv')")
    assert first["resultKind"] == "SUCCESS" and first["isQueryResult"] is False and rows == [("INSERT", ["OK"])]
    assert first["results"]["columns"][0]["name"] == "result"
    first, rows, pages = results(gateway, session, "SELECT auction, price, bidder, ts FROM bids WHERE auction < 5")
    assert first["isQueryResult"] is True and first["resultKind"] == "SUCCESS_WITH_CONTENT" and "jobID" in first
    columns = first["results"]["columns"]
    assert [c["name"] for c in columns] == ["auction", "price", "bidder", "ts"]
    assert [c["logicalType"]["type"] for c in columns] == ["BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP_WITHOUT_TIME_ZONE"]
    assert first["results"]["rowFormat"] == "JSON"
    assert pages == 3  # 3 + 2 rows, then the end (EOS)
    assert sorted(rows) == [("INSERT", [i, i * 1.5, f"bidder{i % 3}", f"2024-01-01T10:00:0{i}"]) for i in range(5)]
    _, rows, _ = results(gateway, session, "SELECT auction, ts FROM bids WHERE auction = 1", row_format="PLAIN_TEXT")
    assert rows == [("INSERT", ["1", "2024-01-01 10:00:01.000"])]
    _, rows, _ = results(gateway, session, "SHOW TABLES")
    assert ("INSERT", ["bids"]) in rows


@pytest.mark.spark
def test_a_streaming_group_by_pages_out_its_changelog(gateway):
    session = open_session(gateway)
    results(gateway, session, f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
            f" 'path' = '{gateway.folder}', 'format' = 'csv', 'source.max-files-per-batch' = '1')")
    results(gateway, session, "SET 'execution.bounded-input' = 'stream'")
    first, rows, _ = results(gateway, session, "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k")
    assert [c["name"] for c in first["results"]["columns"]] == ["k", "n", "total"]
    kinds = {kind for kind, _ in rows}
    assert {"INSERT", "UPDATE_BEFORE", "UPDATE_AFTER"} <= kinds
    assert ("UPDATE_BEFORE", ["a", 1, 1]) in rows and ("UPDATE_AFTER", ["a", 2, 8]) in rows
    table = Counter()
    for kind, fields in rows:
        table[tuple(fields)] += 1 if kind in ("INSERT", "UPDATE_AFTER") else -1
    assert sorted(row for row, count in table.items() if count) == [("a", 3, 11), ("b", 2, 6), ("c", 1, 2)]


@pytest.mark.spark
def test_bad_sql_is_one_paragraph_with_its_position(gateway):
    session = open_session(gateway)
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/statements", {"statement": "SELECT 1 FROM\n WHERE"})
    assert status == 200
    operation = body["operationHandle"]
    deadline = time.time() + 60
    while True:  # NOT_READY while the statement is being planned
        status, body = call(gateway, "GET", f"/v1/sessions/{session}/operations/{operation}/result/0")
        if status != 200 or body["resultType"] != "NOT_READY" or time.time() > deadline:
            break
        time.sleep(0.1)
    assert status == 500, body
    message = body["errors"][-1]
    assert "line 2, column" in message and "Traceback" not in message
    assert call(gateway, "GET", f"/v1/sessions/{session}/operations/{operation}/status") == (200, {"status": "ERROR"})


@pytest.mark.spark
def test_cancel_and_close_an_unbounded_query(gateway):
    session = open_session(gateway)
    results(gateway, session, "CREATE TEMPORARY TABLE gen (id BIGINT) WITH ('connector' = 'datagen',"
            " 'rows-per-second' = '5')")
    status, body = call(gateway, "POST", f"/v2/sessions/{session}/statements", {"statement": "SELECT id FROM gen"})
    operation = body["operationHandle"]
    path = f"/v2/sessions/{session}/operations/{operation}"
    deadline, rows, uri = time.time() + 120, 0, f"{path}/result/0?rowFormat=JSON"
    while rows == 0 and time.time() < deadline:  # the query streams: rows come while it runs
        status, page = call(gateway, "GET", uri)
        assert status == 200 and page["resultType"] in ("NOT_READY", "PAYLOAD"), page
        rows += len(page.get("results", {}).get("data", []))
        uri = page["nextResultUri"]
        time.sleep(0.2)
    assert rows > 0
    assert call(gateway, "GET", f"{path}/status") == (200, {"status": "RUNNING"})
    assert call(gateway, "POST", f"{path}/cancel") == (200, {"status": "CANCELED"})
    assert call(gateway, "GET", f"{path}/status") == (200, {"status": "CANCELED"})
    assert call(gateway, "DELETE", f"{path}/close") == (200, {"status": "CLOSED"})
    status, body = call(gateway, "GET", f"{path}/status")
    assert status == 500 and "Can not find" in body["errors"][0]
    spark_sessions = [op for op in gateway.sessions[session].operations.values() if op.status == "RUNNING"]
    assert spark_sessions == []


@pytest.mark.spark
def test_complete_statement(gateway):
    session = open_session(gateway)
    results(gateway, session, "CREATE TEMPORARY TABLE completions (k STRING) WITH ('connector' = 'datagen')")
    statement = "SELECT * FROM compl"
    status, body = call(gateway, "GET", f"/v2/sessions/{session}/complete-statement",
                        {"statement": statement, "position": len(statement)})
    assert status == 200 and "completions" in body["candidates"]
    assert call(gateway, "GET", f"/v1/sessions/{session}/complete-statement", {"statement": "S", "position": 1})[0] == 404


@pytest.mark.spark
def test_idle_sessions_close(gateway):
    session = open_session(gateway)
    timeout, gateway.idle_timeout = gateway.idle_timeout, 0.2
    try:
        time.sleep(0.5)
        gateway.expire_idle()  # (or the gateway's own check did, meanwhile)
        assert session not in gateway.sessions
    finally:
        gateway.idle_timeout = timeout
    assert call(gateway, "GET", f"/v1/sessions/{session}")[0] == 500


@pytest.mark.spark
def test_an_insert_answers_with_its_job_id(gateway):
    session = open_session(gateway)
    results(gateway, session, "CREATE TEMPORARY TABLE src (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
            f" 'path' = '{gateway.folder}', 'format' = 'csv')")
    results(gateway, session, "CREATE TEMPORARY TABLE sink (k STRING, v BIGINT) WITH ('connector' = 'blackhole')")
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/statements",
                        {"statement": "INSERT INTO sink SELECT k, v FROM src", "executionConfig": {"table.dml-sync": "true"}})
    operation = body["operationHandle"]
    first, rows, _ = fetch_all(gateway, f"/v1/sessions/{session}/operations/{operation}/result/0")
    assert first["resultKind"] == "SUCCESS_WITH_CONTENT" and first["isQueryResult"] is False
    assert first["results"]["columns"][0]["name"] == "job id" and rows == [("INSERT", [first["jobID"]])]
    assert call(gateway, "GET", f"/v1/sessions/{session}/operations/{operation}/status") == (200, {"status": "FINISHED"})

