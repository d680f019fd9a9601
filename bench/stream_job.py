"""One measured streaming job in a fresh process: a Nexmark query through streamsql's
streaming operators on unbounded input, stopped after a fixed event count.

Two sources (bench/streaming.py writes the catalogs): `--source nexmark`, the catalog's
`events` table is Flink Nexmark's without 'events.num', read `source.max-rows-per-batch`
events a micro-batch; `--source files`, person/auction/bid are watched directories of the
benchmark's CSV files ('source.monitor-interval'), a file a micro-batch. Either way the query
runs as a stream (Spark Structured Streaming, streamsql's stateful operators where Spark has
none), one micro-batch right after another. A listener on Spark's streaming progress records
every micro-batch: the job is stopped when every query has read --events events (nexmark:
the source's offset) or has read every file (files: the query goes idle; the time is the
end of its last micro-batch). Prints one JSON line: seconds (Spark already up), events read, micro-batches, peak
state (the largest sum over the query's state operators of `memoryUsedBytes` and
`numRowsTotal` in any progress report), the checkpoint's state files at the end, and what
streamsql logged. A query streamsql refuses or fails on is reported as {"error": "..."}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
# This checkout's streamsql, in this process and in Spark's Python workers (the source, the
# stateful operators), not whichever one the virtualenv has installed.
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

INTERVAL = "10 ms"  # the trigger: the next micro-batch starts as soon as the last one ends


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--query", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--source", choices=["nexmark", "files"], default="nexmark")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900, help="stop and report after this many seconds")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting key=value over streamsql's defaults")
    args = parser.parse_args()

    from streamsql.runtime.session import default_conf, start_session

    conf = default_conf(f"local[{args.cores}]")
    conf.update(setting.split("=", 1) for setting in args.conf)
    conf["spark.sql.streaming.noDataProgressEventInterval"] = "50ms"  # tells at once that the files are read
    spark = start_session(conf)
    spark.range(1).count()
    watch = Watch(spark, args.events, until_idle=args.source == "files")
    spark.streams.addListener(watch.listener())
    checkpoint = Path(tempfile.mkdtemp(prefix="streamsql-stream-bench-"))
    notes: list[str] = []
    stopper = threading.Thread(target=watch.stop_when_done, args=(args.timeout,), daemon=True)
    stopper.start()
    watch.started = time.perf_counter()
    error = None
    try:
        run_streamsql(spark, args.query, args.catalog, str(checkpoint), notes.append)
    except Exception as failure:  # a refusal (StreamsqlError) or a failure translated by streamsql
        error = _one_line(str(failure)) or type(failure).__name__
    watch.ended.set()
    stopper.join()
    report = watch.report()
    report["notes"] = [_one_line(note) for note in notes]
    report["state_dir_bytes"] = _state_files(checkpoint)
    if error is not None and not watch.stopped:
        report["error"] = error
    elif not report["batches"]:
        report["error"] = "did not stream: " + (report["notes"][0] if notes else "ran as one bounded computation")
    elif watch.timed_out:
        report["error"] = f"timed out after {args.timeout:.0f} s at {report['events']:,} events"
    print(json.dumps(report))
    spark.stop()
    shutil.rmtree(checkpoint, ignore_errors=True)  # (10 M events leave gigabytes of state files)


def run_streamsql(spark, query: str, catalog: str, checkpoint: str, log) -> None:
    from streamsql.catalog import Catalog
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter

    from job import query_file

    script = query_file(query)
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(Catalog(catalog), spark=spark, base_dir=script.parent, log=log)
    for key, value in {"execution.runtime-mode": "streaming", "execution.bounded-input": "stream",
                       "execution.checkpointing.dir": checkpoint,
                       "execution.checkpointing.interval": INTERVAL}.items():
        engine.settings.set(key, value)
    engine.run_script(script.read_text(), ResultWriter("csv"))


class Watch:
    """Every micro-batch's progress; stops the queries once each has read ``events`` events."""

    def __init__(self, spark, events: int, until_idle: bool):
        self.spark, self.events, self.until_idle = spark, events, until_idle
        self.started = self.finished = self.last = None
        self.read: dict[str, int] = {}  # query id -> events read (the nexmark source's offset)
        self.reading: set[str] = set()  # query ids that read files and have not had a batch without input since
        self.batches = self.input_rows = 0
        self.peak_bytes = self.peak_rows = 0
        self.operators: list[str] = []
        self.durations: dict[str, int] = {}  # milliseconds per phase of a micro-batch, summed
        self.first: dict[str, int] = {}  # the same for the first micro-batch (cold: planning, workers)
        self.each: list[tuple] = []  # per micro-batch with input: (rows, ms, state bytes): how cost grows with state
        self.done, self.ended = threading.Event(), threading.Event()  # every query read enough; run_script returned
        self.stopped = self.timed_out = False
        self.lock = threading.Lock()

    def listener(self):
        from pyspark.sql.streaming import StreamingQueryListener

        watch = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event):
                pass

            def onQueryProgress(self, event):
                watch.progress(event.progress)

            def onQueryIdle(self, event):
                watch.idle()

            def onQueryTerminated(self, event):
                pass

        return Listener()

    def progress(self, progress) -> None:
        now = time.perf_counter()
        offsets = [_row_offset(source.endOffset) for source in progress.sources]
        offsets = [offset for offset in offsets if offset is not None]
        with self.lock:
            self.last = now
            if progress.numInputRows or offsets:
                self.batches += 1
                self.first = self.first or dict(progress.durationMs or {})
            self.input_rows += progress.numInputRows
            for phase, millis in (progress.durationMs or {}).items():
                self.durations[phase] = self.durations.get(phase, 0) + millis
            operators = progress.stateOperators
            self.peak_bytes = max(self.peak_bytes, sum(op.memoryUsedBytes for op in operators))
            self.peak_rows = max(self.peak_rows, sum(op.numRowsTotal for op in operators))
            if progress.numInputRows:
                self.each.append((progress.numInputRows, (progress.durationMs or {}).get("triggerExecution"),
                                  sum(op.memoryUsedBytes for op in operators)))
            self.operators = self.operators or [op.operatorName for op in operators]
            if offsets:
                self.read[str(progress.id)] = min(offsets)
            if self.read and all(read >= self.events for read in self.read.values()) and not self.done.is_set():
                self.finished = now
                self.done.set()
            query = str(progress.id)
            if progress.numInputRows:
                self.reading.add(query)
            elif self.until_idle and query in self.reading and not offsets:
                # a micro-batch without input once files were read: the files are all read, and
                # this one fired what the end of the data let fire (a processing-time window's
                # timers run such micro-batches without end: the query is never idle)
                self.reading.discard(query)
                if not self.reading:  # (each query that read files has had one)
                    self._all_read(now)

    def idle(self) -> None:
        """No new input (a single query: the benchmark's files are all read)."""
        with self.lock:
            self._all_read(self.last)

    def _all_read(self, when) -> None:
        if self.until_idle and self.batches and not self.done.is_set():
            self.finished = when
            self.read["files"] = self.events
            self.done.set()

    def stop_when_done(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.done.wait(0.05):
            if self.ended.is_set():  # run_script returned by itself (a refusal, a failure, a bounded run)
                return
            if time.monotonic() > deadline:
                self.timed_out = True
                self.finished = time.perf_counter()
                break
        self.stopped = True
        for query in self.spark.streams.active:
            query.stop()

    def report(self) -> dict:
        with self.lock:
            finished = self.finished or time.perf_counter()
            return {"seconds": finished - self.started, "events": min(self.read.values(), default=0),
                    "batches": self.batches, "input_rows": self.input_rows, "state_operators": self.operators,
                    "peak_state_bytes": self.peak_bytes, "peak_state_rows": self.peak_rows,
                    "durations_ms": self.durations, "first_batch_ms": self.first, "each_batch": self.each}


def _row_offset(offset) -> int | None:
    """A generated source's offset ({"row": n}); None for another source (q13's file)."""
    try:
        value = json.loads(offset) if isinstance(offset, str) else offset
    except (TypeError, ValueError):
        return None
    return value.get("row") if isinstance(value, dict) else None


def _state_files(checkpoint: Path) -> int:
    """Bytes of the state store's files under the checkpoint (every query's `state/`)."""
    return sum(path.stat().st_size for state in checkpoint.rglob("state") if state.is_dir()
               for path in state.rglob("*") if path.is_file())


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


if __name__ == "__main__":
    main()
