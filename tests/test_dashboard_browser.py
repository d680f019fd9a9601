"""`streamsql ui` in headless Chromium (Debian's, driven by Playwright): a job started by the
test shows up on the job list, its rates and watermark move, its page draws its operators,
and STOP stops it. Screenshots of each page go to $STREAMSQL_TEST_ARTEFACTS (default: the
temporary directory's streamsql-test-artefacts/), under dashboard/."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.conftest import streamsql, unavailable, wait_for, write
from tests.ports import free_port
from tests.processes import alive, gone_within

pytestmark = pytest.mark.spark

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def artefacts() -> Path:
    base = Path(os.environ.get("STREAMSQL_TEST_ARTEFACTS") or Path(tempfile.gettempdir()) / "streamsql-test-artefacts")
    folder = base / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser(tmp_path):
    """A page of a fresh headless Chromium (its own user-data-dir)."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is missing: apt-get install -y --no-install-recommends chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            page.errors = []
            page.on("pageerror", lambda error: page.errors.append(str(error)))
            yield page
        finally:
            context.close()


def feed(folder: Path, stop: threading.Event) -> None:
    """A CSV file a second into the watched directory, its event times now (so the watermark
    follows the clock), each file a different size (so the rates differ batch by batch)."""
    index = 0
    while not stop.is_set():
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        rows = "".join(f"k{r % 3},{r},{(now - timedelta(milliseconds=5 * r)).strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}\n"
                       for r in range(50 + 40 * (index % 4)))
        staged = folder / f".{index}.tmp"
        staged.write_text(rows)
        staged.rename(folder / f"{index:04d}.csv")
        index += 1
        stop.wait(1)


def cell(page, job_id: str, key: str) -> str:
    return page.locator(f'tr[data-job="{job_id}"] td[data-key="{key}"]').inner_text()


def changes(read, seconds: float) -> bool:
    """Whether ``read()`` shows a value, then another, within ``seconds``."""
    first = None
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = read()
        if value not in ("", "—"):
            if first is None:
                first = value
            elif value != first:
                return True
        time.sleep(0.5)
    return False


def test_dashboard_shows_a_running_job_and_stops_it(browser, tmp_path, capsys):
    source = tmp_path / "in"
    source.mkdir()
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');
CREATE TABLE dst (k STRING, window_start TIMESTAMP(3), c BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}', 'format' = 'csv');
INSERT INTO dst SELECT k, window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY k, window_start, window_end;
""")
    catalog, port = tmp_path / "catalog", free_port()
    ui = streamsql(catalog, "ui", "--port", str(port))
    base = f"http://localhost:{port}"
    stop_feeding, job_pid, shots = threading.Event(), None, []
    feeder = threading.Thread(target=feed, args=(source, stop_feeding), daemon=True)
    try:
        assert wait_for(lambda: _answers(base + "/api/jobs"), 60), "the dashboard did not start"
        browser.goto(base + "/")
        assert browser.locator("#jobs").is_visible()
        feeder.start()
        submitted = streamsql(catalog, "run", "--detach", str(script), cwd=tmp_path, stdout=-1, stderr=-1, text=True)
        out, err = submitted.communicate(60)
        assert submitted.returncode == 0, err
        job_id, job_pid = out.split()[1], int(out.split("pid ")[1].split(")")[0])
        started = time.time()
        browser.locator(f'tr[data-job="{job_id}"]').wait_for(timeout=5_000)  # polled in, no reload
        assert time.time() - started < 5
        assert wait_for(lambda: cell(browser, job_id, "status") == "RUNNING" and
                        cell(browser, job_id, "rows_in") not in ("0", ""), 120), cell(browser, job_id, "status")
        assert changes(lambda: cell(browser, job_id, "watermark"), 30), "the watermark did not move"
        assert changes(lambda: cell(browser, job_id, "input_rate"), 30), "the input rate did not move"
        shots.append(artefacts() / "jobs.png")
        browser.screenshot(path=str(shots[-1]), full_page=True)

        browser.locator(f'tr[data-job="{job_id}"] a').click()
        browser.wait_for_url(f"**/jobs/{job_id}")
        kinds = browser.locator("svg.plan g.node").evaluate_all("nodes => nodes.map(n => n.dataset.kind)")
        assert kinds == ["TableSourceScan", "WindowTableFunction", "WindowAggregate", "Sink"], kinds
        assert browser.locator('svg.plan g.node[data-kind="WindowAggregate"].stateful').count() == 1
        assert "changelog [I]" in browser.locator("svg.plan").text_content()
        assert wait_for(lambda: "rows" in browser.locator('svg.plan [data-rows="0"]').text_content(), 30)
        for metric in ("input_rate", "processed_rate", "duration_ms", "lag_s", "state_bytes"):
            assert wait_for(lambda: int(browser.locator(f"#chart-{metric}").get_attribute("data-points") or 0) >= 2, 30), metric
        assert wait_for(lambda: "stateStoreSave" in browser.locator("#operators").inner_text(), 30)  # the window's
        watermark = browser.locator('dd[data-key="watermark"]').inner_text()
        assert changes(lambda: browser.locator('dd[data-key="watermark"]').inner_text(), 30), watermark
        spark_ui = browser.locator("#spark-ui")  # Spark's own UI of the job (runtime.spark_ui), on loopback
        assert spark_ui.is_visible(), "no link to Spark's UI"
        href = spark_ui.get_attribute("href")
        assert href.startswith(("http://localhost:", "http://127.0.0.1:")), href
        assert browser.request.get(href).status == 200
        shots.append(artefacts() / "job.png")
        browser.screenshot(path=str(shots[-1]), full_page=True)

        asked = []
        browser.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        browser.locator("#stop").click()
        assert wait_for(lambda: browser.locator("#status-badge").inner_text() == "CANCELED", 90)
        assert asked and "checkpoint is kept" in asked[0]
        assert "Stopping job" in browser.locator("#action-result").inner_text()
        assert browser.locator("#stop").is_disabled() and browser.locator("#drain").is_disabled()
        assert browser.locator("#spark-ui").is_hidden()  # gone with the job
        assert not gone_within([job_pid], 60), "the job process did not end"
        assert wait_for(lambda: "Job stopped." in browser.locator("#log").inner_text(), 30)
        shots.append(artefacts() / "job-stopped.png")
        browser.screenshot(path=str(shots[-1]), full_page=True)
        assert browser.errors == []
    finally:
        stop_feeding.set()
        if job_pid is not None and alive(job_pid):
            os.killpg(job_pid, signal.SIGKILL)  # (its own session: the job and its JVM)
        ui.terminate()
        ui.wait(30)
        with capsys.disabled():
            for shot in shots:
                print(f"\nscreenshot: {shot}")


def test_metrics_scrape_of_a_running_job(tmp_path):
    """/metrics over a real job's registry record, as Prometheus scrapes it."""
    from prometheus_client.parser import text_string_to_metric_families

    source = tmp_path / "in"
    source.mkdir()
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');
CREATE TABLE dst (k STRING, v BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}', 'format' = 'csv');
INSERT INTO dst SELECT k, v, ts FROM src;
""")
    catalog, port = tmp_path / "catalog", free_port()
    token = write(tmp_path / "token", "scrape-token-of-sixteen-chars\n")
    ui = streamsql(catalog, "ui", "--port", str(port), "--token-file", str(token))
    stop_feeding, job_pid = threading.Event(), None
    feeder = threading.Thread(target=feed, args=(source, stop_feeding), daemon=True)
    try:
        submitted = streamsql(catalog, "run", "--detach", str(script), cwd=tmp_path, stdout=-1, stderr=-1, text=True)
        out, err = submitted.communicate(60)
        assert submitted.returncode == 0, err
        job_id, job_pid = out.split()[1], int(out.split("pid ")[1].split(")")[0])
        feeder.start()

        def scrape() -> dict:
            request = urllib.request.Request(f"http://localhost:{port}/metrics",
                                             headers={"Authorization": "Bearer scrape-token-of-sixteen-chars"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read().decode()
            return {(s.name, s.labels.get("job_id")): s.value
                    for f in text_string_to_metric_families(text) for s in f.samples}

        assert wait_for(lambda: _answers(f"http://localhost:{port}/metrics", 401), 60)
        assert wait_for(lambda: scrape().get(("streamsql_job_rows_in_total", job_id), 0) > 0, 120)
        assert wait_for(lambda: ("streamsql_job_watermark_lag_seconds", job_id) in scrape(), 30)
        first = scrape()
        assert first[("streamsql_job_running", job_id)] == 1
        assert ("streamsql_job_processed_rows_per_second", job_id) in first
        assert ("streamsql_query_batch_duration_seconds", job_id) in first
        assert wait_for(lambda: scrape()[("streamsql_job_rows_in_total", job_id)]
                        > first[("streamsql_job_rows_in_total", job_id)], 30)
        assert wait_for(lambda: scrape().get(("streamsql_job_rows_out_total", job_id), 0) > 0, 30)
    finally:
        stop_feeding.set()
        if job_pid is not None and alive(job_pid):
            os.killpg(job_pid, signal.SIGTERM)
            if gone_within([job_pid], 60):
                os.killpg(job_pid, signal.SIGKILL)
        ui.terminate()
        ui.wait(30)


def _answers(url: str, status: int = 200) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            json.loads(answer.read()) if url.endswith("/api/jobs") else None
            return answer.status == status
    except urllib.error.HTTPError as error:
        return error.code == status
    except OSError:
        return False
