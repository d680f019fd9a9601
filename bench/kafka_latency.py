"""End-to-end latency of a Kafka -> Kafka job at a fixed input rate, in micro-batch and in
real-time mode (``SET 'execution.trigger' = 'real-time'``, spark.real_time).

    python bench/kafka_latency.py                          # 50,000 events/s for 30 s, both modes
    python bench/kafka_latency.py --rate 20000 --seconds 60 --modes real-time

A local Apache Kafka broker (tests/apache_kafka.py), an input and an output topic of
`--partitions` partitions. `streamsql run` runs a stateless INSERT (a filter and a projection
of JSON records) from one into the other. Once its first records come out (the job is warm), a
producer (confluent-kafka) sends `--rate` records a second for `--seconds`, each stamped with
its send time (CreateTime); Spark's Kafka sink stamps each output record with the time it
produced it. The first `--warm-up` seconds at that rate are not measured (the JVM compiles the
path the records take then: real-time mode's first 3 s at 50,000 records/s took 0.3-0.9 s a
record, the seconds after 3-6 ms). A record's latency is the output stamp minus the input stamp, i.e. from the
moment it was sent to the moment its result was produced into the output topic (the clocks
are one machine's). Prints p50/p99/max per mode, and the rate the producer reached.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from resume import kill, start  # noqa: E402


def job_script(broker, source: str, out: str, mode: str, interval: str | None) -> str:
    common = f"'properties.bootstrap.servers' = '{broker.bootstrap}', 'format' = 'json'"
    setting = "SET 'execution.trigger' = 'real-time';\n" if mode == "real-time" else ""
    if interval:  # micro-batch: how often one starts; real-time: how long one lasts
        setting += f"SET 'execution.checkpointing.interval' = '{interval}';\n"
    return (f"CREATE TABLE src (id BIGINT, k STRING, price BIGINT) WITH ('connector' = 'kafka', 'topic' = '{source}',"
            f" 'scan.startup.mode' = 'earliest-offset', {common});\n"
            f"CREATE TABLE dst (id BIGINT, k STRING, euro DOUBLE) WITH ('connector' = 'kafka', 'topic' = '{out}', {common});\n"
            + setting + "INSERT INTO dst SELECT id, UPPER(k), 0.908 * price FROM src WHERE price >= 0;\n")


def produce(broker, topic: str, rate: int, seconds: float, first_id: int) -> tuple[int, float]:
    """``rate`` records a second for ``seconds``, in 10 ms slices; (records sent, seconds taken)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "queue.buffering.max.messages": 2_000_000})
    began, sent = time.time(), 0
    while time.time() - began < seconds:
        due = int((time.time() - began) * rate)
        while sent < due:
            now = int(time.time() * 1000)
            value = json.dumps({"id": first_id + sent, "k": f"k{sent % 100}", "price": sent % 1000})
            try:
                producer.produce(topic, value=value, timestamp=now)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)
    return sent, time.time() - began


def latencies(broker, source: str, out: str, first_id: int) -> list[float]:
    """Per record from ``first_id`` on: output stamp - input stamp, in ms."""
    sent = {json.loads(m.value())["id"]: m.timestamp()[1] for m in broker.read_all(source)}
    return sorted(m.timestamp()[1] - sent[i] for m in broker.read_all(out)
                  if (i := json.loads(m.value())["id"]) >= first_id and i in sent)


def one_mode(broker, mode: str, rate: int, seconds: float, partitions: int, interval: str | None,
             warm_up: float) -> dict:
    from tests.apache_kafka import new_topic

    source, out = new_topic(broker, partitions), new_topic(broker, partitions)
    broker.produce(source, [(None, json.dumps({"id": i, "k": "warm", "price": 1})) for i in range(100)])
    with tempfile.TemporaryDirectory(prefix="streamsql-latency-") as scratch:
        work = Path(scratch)
        job_file = work / "job.sql"
        job_file.write_text(job_script(broker, source, out, mode, interval))
        job = start(work, job_file)
        try:
            deadline = time.time() + 300
            while len(broker.read_all(out)) < 100:
                if job.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"{mode}: the job did not start: {job.stderr.read()[-2000:]}")
                time.sleep(1)
            time.sleep(2)
            sent, took = produce(broker, source, rate, warm_up + seconds, first_id=1_000_000)
            deadline = time.time() + 120
            while len(broker.read_all(out)) < 100 + sent and time.time() < deadline and job.poll() is None:
                time.sleep(2)
        finally:
            kill(job)
        measured = latencies(broker, source, out, 1_000_000 + int(rate * warm_up))
    if not measured:
        return {"mode": mode, "records": 0}
    return {"mode": mode, "interval": interval or "default", "sent": sent, "rate": round(sent / took), "records": len(measured),
            "p50_ms": statistics.median(measured), "p99_ms": measured[int(len(measured) * 0.99) - 1],
            "max_ms": measured[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--modes", default="micro-batch,real-time")
    parser.add_argument("--warm-up", type=float, default=10, help="seconds at the rate before measuring")
    parser.add_argument("--interval", help="'execution.checkpointing.interval' (e.g. '500 ms' or '60 s'); else the defaults")
    args = parser.parse_args()
    from tests.apache_kafka import apache_kafka

    with apache_kafka() as broker:
        for mode in args.modes.split(","):
            result = one_mode(broker, mode, args.rate, args.seconds, args.partitions, args.interval, args.warm_up)
            print("  ".join(f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
