"""`streamsql ui` without Spark: what a job records of a micro-batch, the views and Prometheus
text made from registry records, the plan's layout, routing, and who may use the server
(loopback, token, Host and Origin), against the real HTTP server on a free port."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

from prometheus_client.parser import text_string_to_metric_families

from streamsql.cli import main
from streamsql.runtime.dashboard import pages
from streamsql.runtime.dashboard.access import Access
from streamsql.runtime.dashboard.metrics import render
from streamsql.runtime.dashboard.plan_graph import layout, node_rows
from streamsql.runtime.dashboard.samples import HISTORY, batch_sample, record_batch, record_rows_out
from streamsql.runtime.dashboard.server import Server, route
from streamsql.runtime.dashboard.snapshot import History, Snapshot, duration, job_detail, job_view
from streamsql.runtime.jobs import CANCELED, RUNNING, JobRecord, JobRegistry
from tests.ports import free_port

TOKEN = "a-token-of-sixteen-chars-or-more"
PLAN = {"query": "insert-into-dst", "nodes": [
    {"id": 0, "kind": "TableSourceScan", "text": "TableSourceScan(table=[[default_catalog, default_database, src]])",
     "explain": "TableSourceScan(..., changelogMode=[I], bounded=[false])", "mode": "I", "state": "none",
     "runs": "Spark", "inputs": [], "table": "default_catalog.default_database.src", "source": "/data/in"},
    {"id": 1, "kind": "WindowAggregate", "text": "WindowAggregate(groupBy=[k])", "explain": "WindowAggregate(...)",
     "mode": "I", "state": "watermark", "runs": "Spark", "inputs": [0]},
    {"id": 2, "kind": "GroupAggregate", "text": "GroupAggregate(groupBy=[k])", "explain": "GroupAggregate(...)",
     "mode": "I,UB,UA", "state": "unbounded", "runs": "streamsql", "inputs": [1]},
    {"id": 3, "kind": "Sink", "text": "Sink(table=[dst])", "explain": "Sink(...)", "mode": "I,UB,UA", "state": "none",
     "runs": "Spark", "inputs": [2]},
]}


def progress(batch: int, rows: int = 100, at: str = "2026-01-01T00:00:10.000Z", watermark="2026-01-01T00:00:07.500Z"):
    """A micro-batch's progress as Spark reports it (the fields the monitor reads)."""
    return {"batchId": batch, "timestamp": at, "numInputRows": rows, "inputRowsPerSecond": 50.0,
            "processedRowsPerSecond": 400.25, "durationMs": {"triggerExecution": 250},
            "eventTime": {"watermark": watermark},
            "sources": [{"description": "FileStreamSource[file:/data/in/[!._]*]", "numInputRows": rows},
                        {"description": "FileStreamSource[file:/tmp/streamsql-drain-1]", "numInputRows": 0}],
            "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 6, "memoryUsedBytes": 2048,
                                "numRowsUpdated": 3, "numRowsDroppedByWatermark": 2}]}


def record(status=RUNNING, batches=3, **fields) -> JobRecord:
    job = JobRecord(id=fields.pop("id", "abc123"), name=fields.pop("name", "insert-into-dst"), pid=fields.pop("pid", 1),
                    status=status, started=1_000.0, rows_in=300, rows_out=42, watermark="2026-01-01T00:00:07.500Z",
                    state_bytes=2048, late_rows=6, last_commit=1_050.0, plans=[PLAN], **fields)
    for batch in range(batches):
        record_batch(job, "insert-into-dst", progress(batch))
    record_rows_out(job, "insert-into-dst", 42)
    return job


# -- what is recorded, and the views made of it ---------------------------------------------------------------------


def test_a_micro_batch_sample_and_the_query_totals():
    sample = batch_sample("q", progress(7))
    assert sample == {"query": "q", "batch": 7, "t": 1767225610.0, "rows": 100, "input_rate": 50.0,
                      "processed_rate": 400.2, "duration_ms": 250, "watermark": 1767225607.5, "lag_s": 2.5,
                      "state_rows": 6, "state_bytes": 2048, "late": 2}
    assert batch_sample("q", progress(0, watermark="1970-01-01T00:00:00.000Z"))["lag_s"] is None  # no watermark yet
    job = record(batches=HISTORY + 5)
    assert len(job.batches) == HISTORY and job.batches[-1]["batch"] == HISTORY + 4  # the last ones kept
    totals = job.queries["insert-into-dst"]
    assert totals["rows_in"] == 100 * (HISTORY + 5) and totals["rows_out"] == 42
    assert totals["sources"] == {"FileStreamSource[file:/data/in/[!._]*]": 100 * (HISTORY + 5)}  # not the drain's
    assert totals["operators"] == [{"name": "stateStoreSave", "late": 2 * (HISTORY + 5), "state_rows": 6,
                                    "state_bytes": 2048, "rows_updated": 3}]


def test_job_view_and_its_display():
    view = job_view(record(), restarts=2, now=1_000.0 + 3725)
    assert view["input_rate"] == 50.0 and view["processed_rate"] == 400.2 and view["batch_ms"] == 250
    shown = view["display"]
    assert shown["uptime"] == "1 h 2 min" and shown["rows_in"] == "300" and shown["input_rate"] == "50.0 rows/s"
    assert shown["watermark"] == "2026-01-01 00:00:07.500" and shown["state"] == "2.0 KB (6 rows)"
    assert shown["restarts"] == "2" and shown["late_rows"] == "6"
    stopped = job_view(record(status=CANCELED, ended=1_100.0), now=5_000.0)
    assert stopped["uptime_s"] == 100.0 and stopped["input_rate"] is None and stopped["display"]["input_rate"] == "—"
    assert job_view(record(status=CANCELED))["display"]["uptime"] == "—"  # ended, not saying when
    assert [duration(s) for s in (5, 65, 90_000)] == ["5 s", "1 min 5 s", "1 d 1 h"]


def test_the_job_page_links_to_spark_s_ui_while_the_job_runs():
    def link(job) -> str | None:
        found = [part for part in pages.job_page(job_detail(job, 0, History())).split("<") if 'id="spark-ui"' in part]
        return found[0] if found else None

    assert 'href="http://localhost:4041"' in link(record(spark_ui="http://localhost:4041"))
    assert "hidden" not in link(record(spark_ui="http://localhost:4041"))
    assert "hidden" in link(record(status=CANCELED, spark_ui="http://localhost:4041"))  # gone with the job
    assert link(record()) is None and link(record(spark_ui="javascript:alert(1)")) is None
    assert job_view(record(spark_ui="http://localhost:4041"))["spark_ui"] == "http://localhost:4041"


def test_a_detached_job_without_a_streaming_query_says_when_it_ended(tmp_path, monkeypatch):
    """(cli._record_outcome): the dashboard's uptime of a script of batch statements."""
    import os
    from types import SimpleNamespace

    from streamsql.cli import _record_outcome

    registry = JobRegistry(tmp_path / "_jobs")
    registry.save(JobRecord(id="batchjob", name="batch.sql", pid=os.getpid(), started=1_000.0))
    monkeypatch.setenv("STREAMSQL_JOB_ID", "batchjob")
    _record_outcome(SimpleNamespace(jobs_registry=registry), None)
    done = registry.get("batchjob")
    assert done.status == "FINISHED" and done.ended and job_view(done)["uptime_s"] == done.ended - 1_000.0


def test_history_outlives_the_records_window():
    history, job = History(kept=5), record(batches=3)
    history.merge(job)
    job.batches = [batch_sample("insert-into-dst", progress(b, at=f"2026-01-01T00:00:{10 + b}.000Z")) for b in (3, 4, 5)]
    merged = history.merge(job)
    assert [s["batch"] for s in merged] == [1, 2, 3, 4, 5]  # six seen, five kept: the oldest went


def test_the_graph_of_a_planned_insert(tmp_path):
    from streamsql.catalog import Catalog
    from streamsql.dialect.script import parse_script
    from streamsql.plan.planner import Planner
    from streamsql.runtime.dashboard.plan_graph import graph
    from streamsql.runtime.settings import Settings

    (tmp_path / "in").mkdir()
    planner = Planner(Catalog(None), base_dir=tmp_path)
    *_, step = [planner.plan(s) for s in parse_script(f"""
CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "in"}', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TABLE dst (k STRING, c BIGINT, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "out"}', 'format' = 'csv');
INSERT INTO dst SELECT k, COUNT(*) FROM src WHERE v > 0 GROUP BY k;""")]
    drawn = graph(step, Settings(), "insert-into-dst")
    assert [(n["kind"], n["runs"], n["mode"], n["state"]) for n in drawn["nodes"]] == [
        ("TableSourceScan", "Spark", "I", "none"), ("Calc", "Spark", "I", "none"),
        ("GroupAggregate", "streamsql", "I,UB,UA", "unbounded"), ("Sink", "Spark", "I,UB,UA", "none")]
    assert drawn["nodes"][0]["source"] == str(tmp_path / "in") and drawn["nodes"][2]["inputs"] == [1]
    assert drawn["nodes"][2]["explain"].startswith("GroupAggregate(groupBy=[k]")


def test_the_plan_graph_layout_and_rows_per_node():
    assert layout(PLAN) == {0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (3, 0)}
    joined = {"query": "j", "nodes": [{"id": 0, "inputs": []}, {"id": 1, "inputs": []}, {"id": 2, "inputs": [0, 1]}]}
    assert layout(joined) == {0: (0, 0), 1: (0, 1), 2: (1, 0)}
    totals = {"sources": {"FileStreamSource[file:/data/in/[!._]*]": 300, "FileStreamSource[file:/data/input]": 7},
              "rows_out": 42}
    assert node_rows(PLAN, totals) == {0: {"out": 300}, 3: {"out": 42}}  # /data/in is not /data/input
    svg = pages.plan_svg({**PLAN, "rows": {"0": {"out": 300}}})
    assert svg.count('<g class="node') == 4 and svg.count('class="edge"') == 3
    assert 'data-kind="GroupAggregate"' in svg and "streamsql operator" in svg and "native (Spark)" in svg
    assert "changelog [I,UB,UA]" in svg and "300 rows" in svg and "state: unbounded" in svg


def test_metrics_of_a_registry_snapshot():
    jobs = [(record(), 1), (record(id="old", name="other", status=CANCELED, ended=1_010.0), 0)]
    samples = [s for f in text_string_to_metric_families(render(jobs, now=1_100.0).decode()) for s in f.samples]

    def value(name: str, **labels):
        return next(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))

    assert value("streamsql_job_info", job_id="abc123", status="RUNNING") == 1
    assert value("streamsql_job_rows_in_total", job_id="abc123", job_name="insert-into-dst") == 300
    assert value("streamsql_job_rows_out_total", job_id="abc123") == 42
    assert value("streamsql_job_late_rows_total", job_id="abc123") == 6
    assert value("streamsql_job_restarts_total", job_id="abc123") == 1
    assert value("streamsql_job_input_rows_per_second", job_id="abc123") == 50.0
    assert value("streamsql_job_batch_duration_seconds", job_id="abc123") == 0.25
    assert value("streamsql_job_state_bytes", job_id="abc123") == 2048
    assert value("streamsql_job_running", job_id="old") == 0 and value("streamsql_job_uptime_seconds", job_id="old") == 10
    assert not any(s.labels["job_id"] == "old" for s in samples if s.name == "streamsql_job_input_rows_per_second")
    assert value("streamsql_query_watermark_lag_seconds", query="insert-into-dst") == 2.5
    assert value("streamsql_source_rows_in_total", source="FileStreamSource[file:/data/in/[!._]*]") == 300
    assert value("streamsql_operator_state_rows", operator="0:stateStoreSave") == 6
    assert value("streamsql_operator_late_rows_total", operator="0:stateStoreSave") == 6
    assert "job" not in {label for s in samples for label in s.labels}  # Prometheus' own


# -- routing and access ---------------------------------------------------------------------------------------------


def test_routes():
    assert route("GET", "/") == ("list_page", {})
    assert route("GET", "/jobs/abc123/") == ("job_page", {"job": "abc123"})
    assert route("POST", "/api/jobs/abc123/stop") == ("stop", {"job": "abc123"})
    assert route("GET", "/api/jobs/abc123/stop") == ("wrong_method", {})
    assert route("GET", "/metrics") == ("metrics", {})
    assert route("GET", "/assets/../server.py") is None and route("GET", "/jobs/a/b") is None


def test_access_rules():
    open_, closed = Access(), Access("0.0.0.0", TOKEN)
    assert open_.refusal({}) is None
    assert closed.refusal({}) == "no token"
    assert closed.refusal({"Authorization": "Bearer nope"}) == "wrong token"
    assert closed.refusal({"Authorization": f"Bearer {TOKEN}"}) is None
    assert closed.refusal({"Cookie": closed.cookie_header().split(";")[0]}) is None
    assert TOKEN not in closed.cookie_header()  # the cookie holds an HMAC of it
    assert closed.refusal({"Cookie": "streamsql_ui=forged"}) == "wrong token"
    assert open_.host_allowed("localhost:8081") and open_.host_allowed("127.0.0.1:8081") and open_.host_allowed("[::1]:8081")
    assert not open_.host_allowed("rebound.example:8081") and not open_.host_allowed(None)
    assert closed.host_allowed("dashboard.example:8081")
    assert open_.same_origin({"Host": "localhost:8081", "Origin": "http://localhost:8081"})
    assert not open_.same_origin({"Host": "localhost:8081", "Origin": "https://evil.example"})
    assert open_.same_origin({"Host": "localhost:8081"})  # no browser


def test_ui_beyond_loopback_without_a_token_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("STREAMSQL_CONNECT_TOKEN", raising=False)
    assert main(["ui", "--catalog", str(tmp_path / "catalog"), "--bind", "0.0.0.0", "--port", str(free_port())]) == 1
    err = capsys.readouterr().err
    assert "Refusing to serve the streamsql dashboard on 0.0.0.0 without authentication" in err
    assert "could read every job's log and stop any job" in err and "run any SQL" not in err


# -- the server -----------------------------------------------------------------------------------------------------


@contextmanager
def dashboard(tmp_path, access=Access()):
    registry = JobRegistry(tmp_path / "_jobs")
    logged: list[str] = []
    server = Server(("127.0.0.1", free_port()), registry, access, log=logged.append)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield registry, f"http://127.0.0.1:{server.server_address[1]}", logged
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, data=data, headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_pages_json_and_metrics_served(tmp_path):
    with dashboard(tmp_path) as (registry, base, _):
        registry.save(record(pid=0))  # pid 0: the check that it lives answers (this process group)
        status, headers, body = fetch(base + "/")
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert b'data-job="abc123"' in body and b"/assets/dashboard.js" in body
        status, _, body = fetch(base + "/jobs/abc123")
        assert status == 200 and body.count(b'<g class="node') == 4 and b'id="chart-input_rate"' in body
        assert b"STOP WITH DRAIN" in body
        jobs = json.loads(fetch(base + "/api/jobs")[2])["jobs"]
        assert [j["id"] for j in jobs] == ["abc123"] and jobs[0]["display"]["rows_out"] == "42"
        detail = json.loads(fetch(base + "/api/jobs/abc123")[2])
        assert detail["plans"][0]["rows"] == {"0": {"out": 300}, "3": {"out": 42}} and len(detail["history"]) == 3
        status, headers, body = fetch(base + "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b'streamsql_job_rows_in_total{job_id="abc123",job_name="insert-into-dst"} 300.0' in body
        assert fetch(base + "/assets/dashboard.js")[0] == 200 and fetch(base + "/jobs/nope")[0] == 404
        assert fetch(base + "/", headers={"Host": "rebound.example"})[0] == 421


def test_stop_and_drain_signal_the_job_process(tmp_path):
    with dashboard(tmp_path) as (registry, base, logged):
        for job_id, drain, signum in (("stopme", False, signal.SIGTERM), ("drainme", True, signal.SIGUSR1)):
            process = subprocess.Popen(["sleep", "60"])
            try:
                registry.save(record(id=job_id, pid=process.pid))
                url = f"{base}/api/jobs/{job_id}/stop"
                body = json.dumps({"drain": drain}).encode()
                assert fetch(url, body, {"Content-Type": "text/plain"})[0] == 415  # a form could send that
                assert fetch(url, body, {"Content-Type": "application/json", "Origin": "http://evil.example"})[0] == 403
                assert process.poll() is None
                status, _, answer = fetch(url, body, {"Content-Type": "application/json"})
                assert status == 200 and json.loads(answer)["drain"] is drain
                assert process.wait(10) == -signum
            finally:
                process.kill()
                process.wait()
        status, _, answer = fetch(f"{base}/api/jobs/stopme/stop", b"{}", {"Content-Type": "application/json"})
        assert status == 409 and "is not running" in json.loads(answer)["error"]
        assert any("stopping job stopme" in line for line in logged)


def test_a_token_guards_every_page_but_the_login(tmp_path):
    with dashboard(tmp_path, Access("127.0.0.1", TOKEN)) as (registry, base, logged):
        registry.save(record(pid=0))
        assert fetch(base + "/metrics")[0] == 401 and fetch(base + "/api/jobs")[0] == 401
        status, headers, _ = fetch(base + "/")
        assert status == 303 and headers["Location"] == "/login"
        assert any("refused dashboard request from 127.0.0.1 (no token)" in line for line in logged)
        assert fetch(base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert fetch(base + "/login", b"token=wrong")[0] == 401
        status, headers, _ = fetch(base + "/login", f"token={TOKEN}".encode())
        assert status == 303 and "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";")[0]
        assert fetch(base + "/api/jobs/abc123", headers={"Cookie": cookie})[0] == 200
        assert fetch(base + "/api/jobs", headers={"Cookie": "streamsql_ui=forged"})[0] == 401


def test_snapshot_lists_each_jobs_latest_run_newest_first(tmp_path):
    registry = JobRegistry(tmp_path / "_jobs")
    registry.save(record(id="first", name="a", status=CANCELED, ended=1_001.0))
    second = record(id="second", name="a", status=CANCELED, ended=1_002.0)
    second.started = 1_001.0
    registry.save(second)
    third = record(id="third", name="b", status=CANCELED, ended=1_003.0)
    third.started = 1_002.0
    registry.save(third)
    snapshot = Snapshot(registry, History())
    assert [(j["id"], j["restarts"]) for j in snapshot.jobs()] == [("third", 0), ("second", 1)]
    assert snapshot.detail("first")["id"] == "first" and snapshot.detail("none") is None
