"""The job registry read into what the dashboard shows: one view per job, as JSON.

Each view has the job's numbers raw (for /metrics and the plots) and ``display``, the
same numbers formatted for a person, so the page's script only puts text in place. The
registry holds a job's last 100 micro-batches; ``History`` keeps more of them while the
dashboard runs (every read merges what the record has).
"""

from __future__ import annotations

import time
from datetime import datetime

from streamsql.runtime.dashboard.plan_graph import node_rows
from streamsql.runtime.dashboard.samples import epoch
from streamsql.runtime.jobs import NO_WATERMARK, RUNNING, JobRecord, JobRegistry

KEPT = 1000  # micro-batches a job's history keeps in the dashboard
LOG_LINES, LOG_BYTES = 200, 64 * 1024


class History:
    """Each job's micro-batches seen so far, by (query, batch id), oldest first."""

    def __init__(self, kept: int = KEPT):
        self.kept = kept
        self._jobs: dict[str, dict[tuple, dict]] = {}

    def merge(self, record: JobRecord) -> list[dict]:
        seen = self._jobs.setdefault(record.id, {})
        for sample in record.batches:
            seen[(sample.get("query"), sample.get("batch"))] = sample
        if len(seen) > self.kept:
            for key in sorted(seen, key=lambda k: seen[k].get("t") or 0)[:len(seen) - self.kept]:
                del seen[key]
        return sorted(seen.values(), key=lambda s: (s.get("t") or 0, s.get("batch") or 0))


def latest_per_query(batches: list[dict]) -> list[dict]:
    latest: dict[str, dict] = {}
    for sample in batches:
        latest[sample.get("query")] = sample
    return list(latest.values())


def job_view(record: JobRecord, restarts: int = 0, now: float | None = None) -> dict:
    """What the job list shows of a job (and /metrics exports)."""
    now = time.time() if now is None else now
    running = record.status == RUNNING
    latest = latest_per_query(record.batches)
    watermark = epoch(record.watermark) if record.watermark not in NO_WATERMARK else None
    lag = max(0.0, (now if running else record.ended or now) - watermark) if watermark is not None else None
    view = {
        "id": record.id, "name": record.name, "status": record.status, "pid": record.pid,
        "started": record.started, "ended": record.ended,
        # (a job that ended without saying when, recorded by an older streamsql: unknown)
        "uptime_s": max(0.0, (now if running else record.ended) - record.started) if running or record.ended else None,
        "rows_in": record.rows_in, "rows_out": record.rows_out,
        "input_rate": sum(s.get("input_rate") or 0 for s in latest) if running else None,
        "processed_rate": sum(s.get("processed_rate") or 0 for s in latest) if running else None,
        "batch_ms": max((s.get("duration_ms") or 0 for s in latest), default=None),
        "watermark": record.watermark if watermark is not None else None, "watermark_lag_s": lag,
        "late_rows": record.late_rows, "state_bytes": record.state_bytes,
        "state_rows": sum(s.get("state_rows") or 0 for s in latest),
        "last_commit": record.last_commit, "error": record.error, "restarts": restarts, "spark_ui": record.spark_ui,
        "batches": sum(1 for _ in record.batches),
    }
    view["display"] = display(view)
    return view


def display(view: dict) -> dict:
    return {
        "status": view["status"], "uptime": "—" if view["uptime_s"] is None else duration(view["uptime_s"]),
        "rows_in": count(view["rows_in"]), "rows_out": count(view["rows_out"]),
        "input_rate": rate(view["input_rate"]), "processed_rate": rate(view["processed_rate"]),
        "batch_ms": "—" if view["batch_ms"] is None else f"{view['batch_ms']:,} ms",
        "watermark": view["watermark"].replace("T", " ").rstrip("Z") if view["watermark"] else "—",
        "watermark_lag": "—" if view["watermark_lag_s"] is None else duration(view["watermark_lag_s"]),
        "late_rows": count(view["late_rows"]), "state": size(view["state_bytes"]) + f" ({count(view['state_rows'])} rows)",
        "last_commit": moment(view["last_commit"]), "error": view["error"] or "", "restarts": str(view["restarts"]),
        "started": moment(view["started"]),
    }


def job_detail(record: JobRecord, restarts: int, history: History, now: float | None = None) -> dict:
    """The job page's data: its view, its plans with rows per node, its state operators, its
    micro-batches over time and its log's last lines."""
    view = job_view(record, restarts, now)
    plans = []
    for plan in record.plans:
        rows = node_rows(plan, record.queries.get(plan.get("query")))
        plans.append({**plan, "rows": {str(k): v for k, v in rows.items()}})
    view.update(plans=plans, queries=record.queries, history=history.merge(record), log=log_tail(record.log),
                log_path=record.log)
    return view


def log_tail(path: str | None) -> str | None:
    """The last lines of the job's log (a detached job's output), or None without one."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - LOG_BYTES))
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-LOG_LINES:])


class Snapshot:
    """The registry as the dashboard sees it at one moment."""

    def __init__(self, registry: JobRegistry, history: History):
        self.registry = registry
        self.history = history
        self.runs = registry.latest()  # each job's latest run, with its restarts
        for record, _ in self.runs:
            history.merge(record)

    def jobs(self) -> list[dict]:
        return [job_view(record, restarts) for record, restarts in reversed(self.runs)]  # newest first

    def records(self) -> list[tuple[JobRecord, int]]:
        return self.runs

    def detail(self, job_id: str) -> dict | None:
        for record, restarts in self.runs:
            if record.id == job_id:
                return job_detail(record, restarts, self.history)
        record = self.registry.get(job_id)  # an earlier run of a job (SHOW JOBS ALL)
        return job_detail(record, 0, self.history) if record is not None else None


# -- formatting for a person ------------------------------------------------------------


def count(value) -> str:
    return "—" if value is None else f"{value:,}"


def rate(value) -> str:
    return "—" if value is None else f"{value:,.1f} rows/s"


def size(value) -> str:
    value = value or 0
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:,} B"


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def moment(when: float | None) -> str:
    return "—" if not when else datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S")

