"""/metrics: the registry's jobs in Prometheus' text format, through ``prometheus_client``.

Each job's latest run (what SHOW JOBS lists), labelled ``job_id`` and ``job_name`` (not
``job``: Prometheus sets that label itself, to the scrape's job). Per job: status, uptime,
rows in and out, late rows dropped, restarts, the last micro-batch's input and processing
rates and duration, the watermark and its lag, state rows and bytes, the last commit. Per
query (each INSERT of the job) the same rows, rates, duration and lag; per source its rows
in; per Spark state operator its state rows and bytes and the late rows it dropped. A
counter starts again from 0 when a job is run again (Prometheus takes that as a reset).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from streamsql.runtime.dashboard.samples import epoch
from streamsql.runtime.dashboard.snapshot import job_view, latest_per_query
from streamsql.runtime.jobs import RUNNING, JobRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOB, QUERY = ["job_id", "job_name"], ["job_id", "job_name", "query"]


class JobsCollector:
    """Yields the metric families of a list of (job record, restarts) when collected."""

    def __init__(self, runs: list[tuple[JobRecord, int]], now: float | None = None):
        self.runs, self.now = runs, now

    def collect(self):
        now = time.time() if self.now is None else self.now
        families = _Families()
        for record, restarts in self.runs:
            view = job_view(record, restarts, now)
            job = [record.id, record.name]
            families.job(job, record, view)
            for sample in latest_per_query(record.batches):
                families.query_rates(job + [sample.get("query") or ""], sample, record.status == RUNNING)
            for query, totals in record.queries.items():
                families.query_totals(job + [query], totals)
        yield from families.all()


class _Families:
    """Every family /metrics has, filled job by job (a family with no sample is left out)."""

    def __init__(self):
        self._all: list = []
        gauge, counter = self._gauge, self._counter
        self.info = gauge("streamsql_job_info", "A job's latest run (value 1), with its status and pid",
                          JOB + ["status", "pid"])
        self.running = gauge("streamsql_job_running", "1 while the job runs, else 0")
        self.uptime = gauge("streamsql_job_uptime_seconds", "How long the job has run (until it ended)")
        self.rows_in = counter("streamsql_job_rows_in", "Rows the job read from its sources")
        self.rows_out = counter("streamsql_job_rows_out", "Rows the job's sinks committed")
        self.late = counter("streamsql_job_late_rows", "Rows dropped as late (behind the watermark)")
        self.restarts = counter("streamsql_job_restarts", "Earlier runs of the job (SHOW JOBS' restarts)")
        self.input_rate = gauge("streamsql_job_input_rows_per_second", "Input rate of the last micro-batch")
        self.processed_rate = gauge("streamsql_job_processed_rows_per_second", "Processing rate of the last micro-batch")
        self.batch = gauge("streamsql_job_batch_duration_seconds", "Duration of the last micro-batch")
        self.watermark = gauge("streamsql_job_watermark_seconds", "The watermark (epoch seconds)")
        self.lag = gauge("streamsql_job_watermark_lag_seconds", "How far the watermark is behind the clock")
        self.state_bytes = gauge("streamsql_job_state_bytes", "Memory of the state stores (last micro-batch)")
        self.state_rows = gauge("streamsql_job_state_rows", "Rows in the state stores (last micro-batch)")
        self.commit = gauge("streamsql_job_last_commit_seconds", "When the sinks last committed (epoch seconds)")
        self.q_rows_in = counter("streamsql_query_rows_in", "Rows a query (an INSERT of the job) read", QUERY)
        self.q_rows_out = counter("streamsql_query_rows_out", "Rows a query's sink committed", QUERY)
        self.q_input_rate = gauge("streamsql_query_input_rows_per_second", "A query's input rate (last micro-batch)", QUERY)
        self.q_processed_rate = gauge("streamsql_query_processed_rows_per_second",
                                      "A query's processing rate (last micro-batch)", QUERY)
        self.q_batch = gauge("streamsql_query_batch_duration_seconds", "A query's last micro-batch duration", QUERY)
        self.q_lag = gauge("streamsql_query_watermark_lag_seconds",
                           "A query's watermark behind its last micro-batch's time", QUERY)
        self.source_rows = counter("streamsql_source_rows_in", "Rows read from a source (Spark's description)",
                                   QUERY + ["source"])
        operator = QUERY + ["operator"]
        self.op_rows = gauge("streamsql_operator_state_rows", "Rows in a Spark state operator's store", operator)
        self.op_bytes = gauge("streamsql_operator_state_bytes", "Memory of a Spark state operator's store", operator)
        self.op_updated = gauge("streamsql_operator_rows_updated", "Rows a state operator updated (last micro-batch)",
                                operator)
        self.op_late = counter("streamsql_operator_late_rows", "Rows a state operator dropped as late", operator)

    def _gauge(self, name, documentation, labels=JOB):
        family = GaugeMetricFamily(name, documentation, labels=labels)
        self._all.append(family)
        return family

    def _counter(self, name, documentation, labels=JOB):
        family = CounterMetricFamily(name, documentation, labels=labels)
        self._all.append(family)
        return family

    def all(self):
        return self._all

    def job(self, job: list[str], record: JobRecord, view: dict) -> None:
        self.info.add_metric(job + [record.status, str(record.pid)], 1)
        self.running.add_metric(job, 1 if record.status == RUNNING else 0)
        if view["uptime_s"] is not None:
            self.uptime.add_metric(job, view["uptime_s"])
        self.rows_in.add_metric(job, record.rows_in)
        self.rows_out.add_metric(job, record.rows_out)
        self.late.add_metric(job, record.late_rows)
        self.restarts.add_metric(job, view["restarts"])
        for family, value in ((self.input_rate, view["input_rate"]), (self.processed_rate, view["processed_rate"]),
                              (self.lag, view["watermark_lag_s"]), (self.commit, record.last_commit)):
            if value is not None:
                family.add_metric(job, value)
        if view["batch_ms"] is not None:
            self.batch.add_metric(job, view["batch_ms"] / 1000)
        if view["watermark"]:
            self.watermark.add_metric(job, epoch(view["watermark"]))
        self.state_bytes.add_metric(job, record.state_bytes)
        self.state_rows.add_metric(job, view["state_rows"])

    def query_rates(self, labels: list[str], sample: dict, running: bool) -> None:
        if running:
            self.q_input_rate.add_metric(labels, sample.get("input_rate") or 0)
            self.q_processed_rate.add_metric(labels, sample.get("processed_rate") or 0)
        if sample.get("duration_ms") is not None:
            self.q_batch.add_metric(labels, sample["duration_ms"] / 1000)
        if sample.get("lag_s") is not None:
            self.q_lag.add_metric(labels, sample["lag_s"])

    def query_totals(self, labels: list[str], totals: dict) -> None:
        self.q_rows_in.add_metric(labels, totals.get("rows_in") or 0)
        if totals.get("rows_out") is not None:
            self.q_rows_out.add_metric(labels, totals["rows_out"])
        for source, rows in (totals.get("sources") or {}).items():
            self.source_rows.add_metric(labels + [source], rows)
        for index, op in enumerate(totals.get("operators") or []):
            operator = labels + [f"{index}:{op.get('name')}"]
            self.op_rows.add_metric(operator, op.get("state_rows") or 0)
            self.op_bytes.add_metric(operator, op.get("state_bytes") or 0)
            self.op_updated.add_metric(operator, op.get("rows_updated") or 0)
            self.op_late.add_metric(operator, op.get("late") or 0)


def render(runs: list[tuple[JobRecord, int]], now: float | None = None) -> bytes:
    """The Prometheus text of these jobs (each job's latest run, with its restarts)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(runs, now))
    return generate_latest(registry)
