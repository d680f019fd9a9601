"""Jobs: streaming INSERT pipelines as processes that other sessions can see and stop.

Every `streamsql run` that starts streaming queries records itself in the job registry,
``<catalog>/_jobs/<id>.json`` (written atomically): name, pid, status, and progress that
a thread refreshes every few seconds (rows read and written, watermark, state size).
`SHOW JOBS` reads the registry from any process; `STOP JOB 'id'` sends the job process
SIGTERM, on which it stops its queries cleanly. Checkpoints are kept, so running the same
script again resumes where the job stopped.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamsql.errors import StreamsqlError
from streamsql.runtime.commits import write_atomically
from streamsql.runtime.drain import is_sentinel_source

RUNNING, FINISHED, FAILED, CANCELED = "RUNNING", "FINISHED", "FAILED", "CANCELED"


class StopRequested(Exception):
    """Raised in a job process when STOP JOB (SIGTERM) asks it to stop."""


@dataclass
class JobRecord:
    id: str
    name: str
    pid: int
    status: str = RUNNING
    started: float = field(default_factory=time.time)
    rows_in: int = 0
    rows_out: int = 0
    watermark: str | None = None
    state_bytes: int = 0
    late_rows: int = 0
    log: str | None = None
    error: str | None = None
    last_commit: float | None = None  # when its sinks last committed a micro-batch (epoch seconds)
    ended: float | None = None  # when it finished, failed or was stopped (epoch seconds)
    spark_ui: str | None = None  # the URL of Spark's UI of the job's application (runtime.spark_ui), if on
    # For `streamsql ui` (runtime.dashboard): each INSERT's operator plan as a graph, the last
    # micro-batches, and per query its rows and Spark state operators (dashboard.samples).
    plans: list = field(default_factory=list)
    batches: list = field(default_factory=list)
    queries: dict = field(default_factory=dict)

    def row(self, restarts: int = 0) -> tuple:
        committed = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.last_commit)) if self.last_commit else None
        return (self.id, self.name, self.status, self.rows_in, self.rows_out, self.watermark, self.state_bytes,
                self.late_rows, restarts, committed)


COLUMNS = ["job id", "name", "status", "rows in", "rows out", "watermark", "state bytes", "late rows dropped",
           "restarts", "last commit"]
# A watermark Spark reports before any row set it: no watermark at all, to a person.
NO_WATERMARK = ("1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00Z")


class JobRegistry:
    def __init__(self, directory: Path):
        self.directory = directory

    def new_id(self) -> str:
        return os.environ.get("STREAMSQL_JOB_ID") or uuid.uuid4().hex[:12]

    def save(self, record: JobRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(self.directory / f"{record.id}.json", json.dumps(asdict(record)))

    def get(self, job_id: str) -> JobRecord | None:
        path = self.directory / f"{job_id}.json"
        if not path.exists():
            return None
        record = JobRecord(**json.loads(path.read_text()))
        if record.status == RUNNING and not _alive(record.pid):
            record.status = FAILED
            record.error = record.error or "the job process died"
        return record

    def all(self) -> list[JobRecord]:
        if not self.directory.exists():
            return []
        records = [self.get(p.stem) for p in sorted(self.directory.glob("*.json"))]
        return sorted((r for r in records if r), key=lambda r: r.started)

    def latest(self) -> list[tuple[JobRecord, int]]:
        """Each job's latest run, with how many runs came before it (its restarts): SHOW JOBS.
        A job is its name; SHOW JOBS ALL lists every run (``all``)."""
        runs: dict[str, list[JobRecord]] = {}
        for record in self.all():
            runs.setdefault(record.name, []).append(record)
        return sorted(((r[-1], len(r) - 1) for r in runs.values()), key=lambda pair: pair[0].started)

    def stop(self, job_id: str, drain: bool = False) -> JobRecord:
        record = self.get(job_id)
        if record is None:
            known = ", ".join(r.id for r in self.all()) or "none"
            raise StreamsqlError(f"No job '{job_id}' (jobs: {known})")
        if record.status != RUNNING:
            raise StreamsqlError(f"Job '{job_id}' is not running (status {record.status})")
        os.kill(record.pid, signal.SIGUSR1 if drain else signal.SIGTERM)
        return record


class JobMonitor:
    """Keeps this process's job record current while its streaming queries run."""

    def __init__(self, registry: JobRegistry, name: str, spark, log: str | None = None):
        self.registry = registry
        self.spark = spark
        from streamsql.runtime.spark_ui import ui_url

        self.record = JobRecord(id=registry.new_id(), name=name, pid=os.getpid(), log=log, spark_ui=ui_url(spark))
        self._done = threading.Event()
        self._counted: dict[str, int] = {}  # each query run's last micro-batch counted
        self._rows_in = self._late = self._spark_rows_out = 0
        self._queries: dict = {}  # the job's streaming queries seen running, by id
        self._thread = threading.Thread(target=self._refresh_until_done, daemon=True)

    def start(self) -> JobRecord:
        self.registry.save(self.record)
        self._thread.start()
        return self.record

    def finish(self, status: str, error: str | None = None) -> None:
        from streamsql.runtime.lifetime import driver_jvm_exit

        self._done.set()
        self._thread.join(5)
        if driver_jvm_exit(wait=0) is None:
            self._refresh()
        self.record.status, self.record.error, self.record.ended = status, error, time.time()
        self.registry.save(self.record)

    def _refresh_until_done(self) -> None:
        from streamsql.runtime.lifetime import driver_jvm_exit

        while not self._done.wait(2):
            try:
                self._refresh()
            except Exception:  # Spark is stopping or its JVM died: the query's own error says so
                if driver_jvm_exit(wait=0) is not None:
                    return
                continue
            self.registry.save(self.record)

    def _refresh(self) -> None:
        from streamsql.runtime import sink_counts
        from streamsql.runtime.dashboard.samples import record_batch, record_rows_out

        rows_out = state = 0
        watermark = last_commit = None
        for query in self.spark.streams.active:
            self._queries[query.id] = query
        for query in self._queries.values():  # stopped ones too: finish() counts after they end
            counted = sink_counts.rows_out(query.name)
            for progress in query.recentProgress:  # Spark keeps the last 100: count each batch once
                if progress.batchId <= self._counted.get(progress.runId, -1):
                    continue
                self._counted[progress.runId] = progress.batchId
                self._rows_in += input_rows(progress)
                self._late += late_rows_dropped(progress)
                record_batch(self.record, query.name or str(query.id), progress)
                if counted is None:  # a sink Spark counts (blackhole)
                    sink = progress.sink if isinstance(progress.sink, dict) else {}
                    self._spark_rows_out += max(0, sink.get("numOutputRows", 0) or 0)
            last = query.lastProgress
            if last:
                seen = (last.get("eventTime") or {}).get("watermark")
                watermark = seen if seen and seen not in NO_WATERMARK else watermark
                state += sum(op.get("memoryUsedBytes", 0) for op in last.get("stateOperators") or [])
            rows_out += counted or 0
            record_rows_out(self.record, query.name or str(query.id), counted)
            last_commit = max(filter(None, (last_commit, sink_counts.last_commit(query.name))), default=None)
        rows_out += self._spark_rows_out
        if self._rows_in or rows_out or watermark:
            self.record.rows_in, self.record.rows_out = self._rows_in, rows_out
            self.record.watermark, self.record.state_bytes = watermark, state
            self.record.late_rows = self._late
        self.record.last_commit = last_commit or self.record.last_commit


def input_rows(progress) -> int:
    """A micro-batch's rows from the job's own sources: not the drain's or end of input's
    sentinel (runtime.drain), read from a private directory of its own."""
    sources = progress.get("sources") or []
    if not sources:
        return progress.numInputRows
    return sum(s.get("numInputRows", 0) or 0 for s in sources if not is_sentinel_source(s))


def late_rows_dropped(progress) -> int:
    """Rows a micro-batch's stateful operators dropped as late (behind the watermark)."""
    return sum(op.get("numRowsDroppedByWatermark", 0) or 0 for op in progress.get("stateOperators") or [])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child still answers kill(0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return True


STOP = threading.Event()
DRAIN = threading.Event()


def install_stop_handler() -> None:
    """SIGTERM (STOP JOB) sets STOP, SIGUSR1 (STOP JOB ... WITH DRAIN) sets DRAIN; the engine
    acts on them between waits on its queries. Raising inside the handler could land
    mid-py4j-call and break it."""
    def stop(signum, frame) -> None:
        STOP.set()
        threading.Thread(target=_cancel_batch_jobs, name="streamsql-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, lambda signum, frame: DRAIN.set())


def _cancel_batch_jobs() -> None:
    """A batch query never waits in short steps: cancel its Spark jobs so that SIGTERM ends
    it now (a streaming query is left to stop itself cleanly between micro-batches)."""
    from pyspark.sql import SparkSession

    session = SparkSession._instantiatedSession
    if session is None:
        return
    try:
        if not session.streams.active:
            session.sparkContext.cancelAllJobs()
    except Exception:  # Spark is stopping or gone: nothing left to cancel
        pass


def stop_requested() -> bool:
    return STOP.is_set()


def check_stop() -> None:
    if STOP.is_set():
        raise StopRequested()
