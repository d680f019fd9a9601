"""Nexmark over Kafka: streamsql's streaming operators beside Flink 2.3, the same topics.

    python bench/kafka_nexmark.py                          # 1,000,000 events; read,q0,q1,q5,q7
    python bench/kafka_nexmark.py --events 200000 --queries q5 --engines streamsql

One local Apache Kafka 4.4 broker (tests/apache_kafka.py, KRaft, on loopback). N Nexmark
events from streamsql's generator (the rows bench/data.py writes as CSV) are produced once
into the topics `person`, `auction` and `bid` (`--partitions` each, record i of a kind into
partition i % partitions, so the partitions keep pace in event time) as JSON records of
Nexmark's flat columns (data.COLUMNS), timestamps as 'yyyy-MM-dd HH:mm:ss.SSS' text; the
produce rate is printed.

Each query then runs in a fresh process per engine, its query file unchanged (its INSERT
into its blackhole table), over person/auction/bid as Kafka tables read from the earliest
offset to the latest one ('scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' =
'latest-offset'), JSON, `WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND`:

- streamsql (this file's `--job` mode): Spark started (local[--cores]) and one tiny job run
  first, then the query file through streamsql's Engine in streaming mode with
  'execution.bounded-input' = 'stream' (as bench/stream_job.py runs a query): the bounded
  topics are streamed on Spark Structured Streaming, `--batch-rows` records a micro-batch
  ('source.max-rows-per-batch'), through Spark's streaming operators and streamsql's stateful
  ones, and the end of the input fires the last windows (runtime.end_of_input). The INSERT
  returns when the input is read. A listener on Spark's progress counts the micro-batches and
  the rows they read (the figure is not taken from it).
- Flink (bench/flink_kafka_job.py, in `--flink-python`'s virtualenv): PyFlink's
  TableEnvironment in streaming mode, parallelism --cores, its Kafka SQL connector from
  pyflink/lib, as bench/flink_job.py runs a query on files.

Seconds: from the query file's first statement to the INSERT's end (the JVM already up);
events/s = N / seconds (N: every event, as Nexmark counts; the queries read `bid`, 92% of
them). Query `read` is a plain `INSERT INTO blackhole SELECT * FROM bid`. The load average is
noted before each run. Prints a table; JSON in target/bench/kafka_nexmark.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import data  # noqa: E402

QUERIES = "read,q0,q1,q5,q7"
FLINK_PYTHON = "/tmp/flinkvenv/bin/python"
WATERMARK = "WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND"
READ_SCRIPT = f"""-- A plain read of the bid topic into a blackhole (bench/kafka_nexmark.py).
USE nexmark;

CREATE TEMPORARY TABLE blackhole ({data.COLUMNS['bid']}) WITH ('connector' = 'blackhole');

INSERT INTO blackhole SELECT * FROM bid;
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--queries", default=QUERIES, help="'read' and/or query files of queries/nexmark")
    parser.add_argument("--engines", default="streamsql,flink")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--batch-rows", type=int, default=250_000,
                        help="streamsql: records a micro-batch ('source.max-rows-per-batch')")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a run is stopped and reported")
    parser.add_argument("--flink-python", default=FLINK_PYTHON)
    parser.add_argument("--out", default=str(ROOT / "target" / "bench" / "kafka_nexmark.json"))
    parser.add_argument("--work", default=str(ROOT / "target" / "bench" / "kafka-nexmark"))
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # one streamsql run (this process)
    parser.add_argument("--script", help=argparse.SUPPRESS)
    parser.add_argument("--catalog", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        return streamsql_job(args)

    from tests.apache_kafka import apache_kafka

    import run

    engines = args.engines.split(",")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "read.sql").write_text(READ_SCRIPT)
    rows = []
    with apache_kafka() as broker:
        print(f"Kafka {broker.bootstrap}; load average before producing: {_load()}", file=sys.stderr)
        produced = produce(broker, args.events, args.partitions)
        print(_produced_line(produced), file=sys.stderr)
        catalog = streamsql_catalog(work / "catalog", broker.bootstrap, args.batch_rows)
        flink_ddl = work / "flink_ddl.sql"
        flink_ddl.write_text("".join(kafka_ddl(kind, broker.bootstrap) + ";\n" for kind in data.KINDS))
        for query in args.queries.split(","):
            script = work / "read.sql" if query == "read" else query_file(query)
            row = {"query": query, "events": args.events}
            for engine in engines:
                load = _load()
                print(f"{query} {engine}: load average before the run: {load}", file=sys.stderr)
                if engine == "streamsql":
                    command = [sys.executable, str(Path(__file__).resolve()), "--job", "--script", str(script),
                               "--catalog", str(catalog), "--cores", str(args.cores), "--timeout", str(args.timeout)]
                else:
                    command = [args.flink_python, str(BENCH / "flink_kafka_job.py"), "--script", str(script),
                               "--ddl", str(flink_ddl), "--cores", str(args.cores)]
                report = measure(command, args.timeout + 120, run.PeakMemory)
                report["load_average_before"] = load
                row[engine] = report
                print(f"  {_report_line(report, args.events)}", file=sys.stderr)
            rows.append(row)
    result = {"machine": run._machine(args.cores), "events": args.events, "partitions": args.partitions,
              "batch_rows": args.batch_rows, "produce": produced, "queries": rows}
    run.save(Path(args.out), result, render(result))
    return 0


def query_file(query: str) -> Path:
    from job import query_file as find

    return find(query)


# --- the input ---------------------------------------------------------------------------

def produce(broker, events: int, partitions: int) -> dict:
    """The N events into person/auction/bid as JSON (record i of a kind into partition
    i % partitions); the counts, bytes and rates. The JSON is made before the clock starts."""
    from confluent_kafka import Producer

    began = time.perf_counter()
    records = {kind: encoded(kind, events) for kind in data.KINDS}
    encoding = time.perf_counter() - began
    for kind in data.KINDS:
        broker.create_topic(kind, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "batch.num.messages": 100_000, "compression.type": "lz4", "acks": 1,
                         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    errors: list = []

    def delivered(error, _message):
        if error is not None:
            errors.append(error)

    began = time.perf_counter()
    for kind, values in records.items():
        for i, value in enumerate(values):
            while True:
                try:
                    producer.produce(kind, value=value, partition=i % partitions, on_delivery=delivered)
                    break
                except BufferError:  # the queue is full: let the producer send
                    producer.poll(0.05)
            if i % 10_000 == 0:
                producer.poll(0)
    left = producer.flush(300)
    seconds = time.perf_counter() - began
    if left or errors:
        raise RuntimeError(f"produce failed: {errors[0] if errors else f'{left} records unsent after 300 s'}")
    total = sum(len(values) for values in records.values())
    size = sum(len(value) for values in records.values() for value in values)
    return {"records": {kind: len(values) for kind, values in records.items()}, "total": total, "bytes": size,
            "encode_seconds": round(encoding, 2), "seconds": round(seconds, 2),
            "records_per_second": round(total / seconds), "mb_per_second": round(size / seconds / 2**20, 1)}


def encoded(kind: str, events: int) -> list[bytes]:
    """The kind's rows among the first ``events`` Nexmark events, a JSON object each, with
    the flat columns bench/data.py writes as CSV (timestamps 'yyyy-MM-dd HH:mm:ss.SSS')."""
    import pyarrow.compute as pc

    from streamsql.runtime.generators.nexmark import NexmarkConfig, generate

    values: list[bytes] = []
    for batch in generate(NexmarkConfig(events=events), 0, events):
        rows = batch.column(kind).filter(pc.equal(batch.column("event_type"), data.KINDS[kind]))
        if len(rows):
            frame = data._flatten(rows).to_pandas()
            values.extend(line.encode() for line in frame.to_json(orient="records", lines=True).splitlines())
    return values


def kafka_ddl(kind: str, bootstrap: str, *extra: str) -> str:
    """person/auction/bid as a Kafka table read from the earliest offset to the latest one."""
    options = ", ".join(["'connector' = 'kafka'", f"'topic' = '{kind}'", f"'properties.bootstrap.servers' = '{bootstrap}'",
                         "'scan.startup.mode' = 'earliest-offset'", "'scan.bounded.mode' = 'latest-offset'",
                         "'format' = 'json'", *extra])
    return f"CREATE TABLE {kind} ({data.COLUMNS[kind]},\n  {WATERMARK}\n) WITH ({options})"


def streamsql_catalog(directory: Path, bootstrap: str, batch_rows: int) -> Path:
    database = directory / "nexmark"
    database.mkdir(parents=True, exist_ok=True)
    for kind in data.KINDS:
        ddl = kafka_ddl(kind, bootstrap, f"'source.max-rows-per-batch' = '{batch_rows}'")
        (database / f"{kind}.sql").write_text(ddl + ";\n")
    (database / "side_input.sql").write_text(data.side_input_ddl())
    return directory


# --- one streamsql run (--job, a fresh process) -------------------------------------------

def streamsql_job(args) -> int:
    import shutil
    import threading

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    from streamsql.catalog import Catalog
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter
    from streamsql.runtime.session import default_conf, start_session

    from stream_job import INTERVAL, Watch, _one_line, _state_files

    spark = start_session(default_conf(f"local[{args.cores}]"))
    spark.range(1).count()
    watch = Watch(spark, 10**18, until_idle=False)  # counts micro-batches and rows; stops the run at --timeout
    spark.streams.addListener(watch.listener())
    checkpoint = Path(tempfile.mkdtemp(prefix="streamsql-kafka-nexmark-"))
    notes: list[str] = []
    stopper = threading.Thread(target=watch.stop_when_done, args=(args.timeout,), daemon=True)
    script = Path(args.script)
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(Catalog(args.catalog), spark=spark, base_dir=script.parent, log=notes.append)
    for key, value in {"execution.runtime-mode": "streaming", "execution.bounded-input": "stream",
                       "execution.checkpointing.dir": str(checkpoint),
                       "execution.checkpointing.interval": INTERVAL}.items():
        engine.settings.set(key, value)
    error = None
    stopper.start()
    started = watch.started = time.perf_counter()
    try:
        engine.run_script(script.read_text(), ResultWriter("csv"))
    except Exception as failure:  # a refusal (StreamsqlError) or a failure translated by streamsql
        error = _one_line(str(failure)) or type(failure).__name__
    seconds = time.perf_counter() - started
    watch.ended.set()
    stopper.join()
    # The listener hears of a micro-batch after the query has ended: wait for the last reports
    # (until none for 1 s; at most 10 s) before counting them.
    settled = time.perf_counter()
    while time.perf_counter() - max(settled, watch.last or 0) < 1 and time.perf_counter() - settled < 10:
        time.sleep(0.1)
    report = watch.report()
    del report["events"]
    report["seconds"] = seconds
    report["notes"] = [_one_line(note) for note in notes]
    report["state_dir_bytes"] = _state_files(checkpoint)
    if watch.timed_out:
        report["error"] = f"timed out after {args.timeout:.0f} s ({report['input_rows']:,} rows read)"
    elif error is not None:
        report["error"] = error
    elif not report["batches"]:
        report["error"] = "did not stream: " + (report["notes"][0] if notes else "ran as one bounded computation")
    print(json.dumps(report))
    spark.stop()
    shutil.rmtree(checkpoint, ignore_errors=True)
    return 0


# --- measuring ------------------------------------------------------------------------------

def measure(command: list[str], timeout: float, peak_memory) -> dict:
    """bench/run.py's measure, with a timeout: the job process in its own process group (all
    of it killed at the timeout), its reported JSON line and the peak RSS of its tree."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               start_new_session=True)
    peak = peak_memory(process.pid)
    peak.start()
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"error": f"killed after {timeout:.0f} s"}
    finally:
        peak.stop()
        try:  # anything the job left in its group (a JVM)
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if process.returncode != 0 or not out.strip():
        lines = err.strip().splitlines() or ["no output"]
        causes = [line.strip() for line in lines if ("Error" in line or "Exception" in line) and not line.strip().startswith("at ")]
        return {"error": (causes or lines)[-1][:500], "stderr_tail": err[-3000:]}
    report = json.loads(out.strip().splitlines()[-1])
    report["peak_mb"] = round(peak.peak / 2**20)
    report["peak_jvm_mb"] = round(peak.peak_jvm / 2**20)
    return report


def _load() -> str:
    return "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


# --- output ---------------------------------------------------------------------------------

def _rate(events: int, report: dict | None) -> float | None:
    if not report or "error" in report or not report.get("seconds"):
        return None
    return events / report["seconds"]


def _events_per_second(rate: float | None) -> str:
    if rate is None:
        return "—"
    return f"{rate / 1000:,.0f} k" if rate >= 10_000 else f"{rate:,.0f}"


def _produced_line(produced: dict) -> str:
    counts = ", ".join(f"{kind} {count:,}" for kind, count in produced["records"].items())
    return (f"Produced {produced['total']:,} records ({counts}; {produced['bytes'] / 2**20:,.0f} MB of JSON) in "
            f"{produced['seconds']:.1f} s: {produced['records_per_second']:,} records/s, "
            f"{produced['mb_per_second']} MB/s (JSON made beforehand in {produced['encode_seconds']:.1f} s)")


def _report_line(report: dict, events: int) -> str:
    if "error" in report:
        return f"error: {report['error']}"
    extra = f", {report['batches']} micro-batches, {report['input_rows']:,} rows read" if "batches" in report else ""
    return f"{report['seconds']:.2f} s = {_events_per_second(_rate(events, report))} events/s, peak {report['peak_mb']} MB{extra}"


def render(result: dict) -> str:
    head = ("| query | streamsql s | streamsql events/s | Flink s | Flink events/s | streamsql / Flink | "
            "micro-batches (rows read) | load avg before (streamsql; Flink) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    notes = []
    for row in result["queries"]:
        mine, theirs, events = row.get("streamsql"), row.get("flink"), row["events"]
        ours, flinks = _rate(events, mine), _rate(events, theirs)
        cells = [row["query"]]
        for report, rate in ((mine, ours), (theirs, flinks)):
            if report is None:
                cells += ["—", "—"]
            elif "error" in report:
                cells += ["failed", "—"]
            else:
                cells += [f"{report['seconds']:.2f}", _events_per_second(rate)]
        cells.append(f"{ours / flinks:.2f}" if ours and flinks else "—")
        cells.append(f"{mine['batches']} ({mine['input_rows']:,})" if mine and "batches" in mine else "—")
        cells.append(f"{(mine or {}).get('load_average_before', '—')}; {(theirs or {}).get('load_average_before', '—')}")
        lines.append("| " + " | ".join(cells) + " |")
        for engine, report in (("streamsql", mine), ("Flink", theirs)):
            if report and "error" in report:
                notes.append(f"- {row['query']} on {engine}: {report['error']}")
            for note in (report or {}).get("notes", []):
                notes.append(f"- {row['query']} on {engine} (logged): {note}")
    machine, produced = result["machine"], result["produce"]
    lines += ["", f"Machine: {machine['cpu']}, {machine['cores_used']} of {machine['cores']} cores used, "
                  f"{machine['memory_gb']} GB RAM, Python {machine['python']}; {result['events']:,} events in "
                  f"{result['partitions']} partitions a topic, streamsql {result['batch_rows']:,} records a "
                  f"micro-batch. events/s: all N events / seconds. Ratio: streamsql's events/s / Flink's "
                  f"(above 1: streamsql is faster).", _produced_line(produced)]
    if notes:
        lines += ["", "Failures and notes:", *notes]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
