"""streamsql's servers under load: many clients at once, each running many short statements,
over Flink's SQL Gateway REST API (`serve --gateway`) and over HiveServer2 (`serve --thrift`).

    python bench/serve_load.py                                   # 20 clients x 200 statements, both servers
    python bench/serve_load.py --clients 3 --statements 5 --servers gateway

On loopback, over a catalog of its own (a table `shop.orders` of 20 rows). Each client is a
thread with a connection of its own that opens a session, runs its statements one after
the other, then closes the session: the gateway's REST calls as Flink's clients make them
(open session, submit a statement, page its results to EOS, close the operation, close
the session), HiveServer2's through PyHive (Superset's client; beeline starts a JVM a
statement). The statements cycle through four kinds, each client starting at another:
a SELECT over the catalog table, SHOW TABLES, SET and a SELECT of a missing column, which
must fail with its error. Any other outcome (a wrong row count, an unexpected error, a
statement that fails to fail) is an error.

Each server first runs one statement of each kind (Spark started and warm), then every
round runs the whole load. Printed per server and round: errors, statements/s over the
round's wall time, latency p50/p99 (a statement's submission to its last row, or its
error), the server's RSS (its process and its children: Python and Spark's JVM) before the
load, during it (the median and the highest of samples every 0.5 s) and after it, and the
sessions left open after every client closed its own: the gateway's own count (it runs in
a child process of this script, `--serve-gateway`, as `serve --gateway` runs it, and
answers a line on its stdin with its counts: sessions, operations, threads, py4j's Python
proxies), HiveServer2's the live HiveSessionImpl objects of its JVM; and each JVM's live
heap after a full GC (`jcmd GC.class_histogram`, which collects first), which tells a leak
from a heap the JVM merely grew (its RSS seldom shrinks). Figures only: it asserts nothing
about times. The JSON of it all is the last line.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script: the tests' helpers for processes and ports)

from tests.ports import free_ports  # noqa: E402
from tests.processes import descendants, jvm_children  # noqa: E402
ORDERS = [(i, ("apple", "pear", "fig", "plum")[i % 4], i % 5, f"{i % 7}.25") for i in range(20)]
SELECTED = sum(1 for _, _, qty, _ in ORDERS if qty > 1)  # the SELECT's rows
KINDS = ("select", "show", "set", "fail")
GATEWAY_SQL = {
    "select": "SELECT id, item, qty, price FROM shop.orders WHERE qty > 1",
    "show": "SHOW TABLES FROM shop",
    "set": "SET 'pipeline.name' = 'load-{client}-{n}'",
    "fail": "SELECT nope FROM shop.orders",
}
HIVE_SQL = {
    "select": "SELECT id, item, qty, price FROM shop.orders WHERE qty > 1",
    "show": "SHOW TABLES IN shop",
    "set": "SET streamsql.load.client=load-{client}-{n}",
    "fail": "SELECT nope FROM shop.orders",
}
HIVE_SESSION_CLASSES = ("org.apache.hive.service.cli.session.HiveSessionImpl",
                        "org.apache.hive.service.cli.session.HiveSessionImplwithUGI")
HIVE_OPERATION_CLASS = "org.apache.spark.sql.hive.thriftserver.SparkExecuteStatementOperation"
START_TIMEOUT_S = 180


# -- the catalog -------------------------------------------------------------------------------


def make_catalog(work: Path) -> Path:
    data = work / "orders"
    data.mkdir(parents=True, exist_ok=True)
    (data / "part-0.csv").write_text("".join(f"{i},{item},{qty},{price}\n" for i, item, qty, price in ORDERS))
    catalog = work / "catalog"
    ddl = ("CREATE DATABASE shop;\n"
           "CREATE TABLE shop.orders (id BIGINT, item STRING, qty INT, price DECIMAL(10, 2)) WITH "
           f"('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');\n")
    done = subprocess.run([sys.executable, "-m", "streamsql.cli", "--catalog", str(catalog), "run", "-e", ddl],
                          env=_env(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"the catalog was not created: {done.stderr[-2000:]}")
    return catalog


def _env(**extra) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **extra)


# -- processes and memory ----------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (/proc)."""
    return [pid, *(p.pid for p in descendants(pid))]


def rss_mb(pid: int) -> float:
    """The resident memory of ``pid`` and its descendants, in MB."""
    total = 0
    for member in _tree(pid):
        try:
            with open(f"/proc/{member}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def jvm_of(pid: int) -> int | None:
    jvms = jvm_children(pid)
    return jvms[0].pid if jvms else None


def jvm_live(pid: int) -> dict:
    """What the JVM of ``pid``'s tree holds after a full GC (``jcmd GC.class_histogram``
    collects first): its live heap in MB and the live instances of a few classes."""
    jvm = jvm_of(pid)
    if jvm is None or shutil.which("jcmd") is None:  # (a JDK's)
        return {}
    done = subprocess.run(["jcmd", str(jvm), "GC.class_histogram"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {}
    instances, total = {}, 0
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith(":"):
            instances[parts[3]] = int(parts[1])
        elif len(parts) == 3 and parts[0] == "Total":
            total = int(parts[2])
    return {"live_heap_mb": round(total / 2**20, 1),
            "hive_sessions": sum(instances.get(c, 0) for c in HIVE_SESSION_CLASSES),
            "hive_operations": instances.get(HIVE_OPERATION_CLASS, 0),
            "spark_sessions": instances.get("org.apache.spark.sql.classic.SparkSession", 0),
            "py4j_connections": instances.get("py4j.ClientServerConnection", 0)}


def own_rss_mb(pid: int) -> dict:
    """RSS by process kind: the JVM and the rest (Python)."""
    jvm = jvm_of(pid)
    whole = rss_mb(pid)
    java = rss_mb(jvm) if jvm is not None else 0.0
    return {"jvm": java, "other": round(whole - java, 1)}


class Sampler:
    """The server's RSS every ``interval`` seconds while the load runs."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.pid, self.interval, self.samples = pid, interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.interval):
            self.samples.append(rss_mb(self.pid))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def stop_process(process: subprocess.Popen, seconds: float = 60) -> None:
    """SIGTERM, then SIGKILL to its process group; waits for it."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# -- the gateway ---------------------------------------------------------------------------------


def serve_gateway(catalog: str, port: int, master: str) -> int:
    """The gateway as `streamsql serve --gateway` runs it (runtime.gateway), answering each
    line on stdin with its counts as JSON; stdin's end stops it (sessions closed, Spark stopped)."""
    from streamsql.runtime.gateway import Gateway

    gateway = Gateway(catalog, master=master, base_dir=Path(catalog).parent, log=lambda m: None)
    try:
        server = gateway.listen("127.0.0.1", port)
        print(json.dumps({"port": server.server_address[1]}), flush=True)
        for _ in sys.stdin:
            gc.collect()  # (what only cycles held goes, and py4j tells the JVM)
            sessions = list(gateway.sessions.values())
            operations = sum(len(s.operations) for s in sessions)
            running = sum(1 for t in threading.enumerate() if t.name.startswith("gateway-operation-"))
            names = Counter(re.sub(r"\d+", "N", t.name) for t in threading.enumerate())
            print(json.dumps({"sessions": len(sessions), "operations": operations, "operation_threads": running,
                              "threads": threading.active_count(), "thread_names": dict(names.most_common(5)),
                              "py4j_python_proxies": _python_proxies()}), flush=True)
    finally:
        gateway.close()
    return 0


def _python_proxies() -> int | None:
    """Python objects the JVM holds proxies of (py4j's pool: a foreachBatch function each)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return len(gateway.gateway_property.pool) if gateway is not None else None


class GatewayServer:
    def __init__(self, catalog: Path, master: str):
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve-gateway", "--catalog", str(catalog),
             "--master", master], env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            start_new_session=True)
        line = self.process.stdout.readline()
        if not line:
            stop_process(self.process)
            raise RuntimeError("the gateway did not start")
        self.port = json.loads(line)["port"]
        self.pid = self.process.pid

    def counts(self) -> dict:
        """The gateway's own counts, and its JVM's live objects."""
        self.process.stdin.write("counts\n")
        self.process.stdin.flush()
        counts = json.loads(self.process.stdout.readline())
        live = jvm_live(self.pid)
        return {**counts, "jvm": {k: live[k] for k in ("live_heap_mb", "spark_sessions", "py4j_connections")
                                  if k in live}}

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        stop_process(self.process)


class GatewayClient:
    """Flink's REST calls over one keep-alive connection."""

    def __init__(self, port: int, properties: dict | None = None):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.properties = properties or {}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")

    def open(self) -> str:
        status, body = self.call("POST", "/v1/sessions", {"sessionName": "load", "properties": self.properties})
        if status != 200:
            raise RuntimeError(f"open session: {status} {body}")
        return body["sessionHandle"]

    def run(self, session: str, statement: str) -> tuple[list, str | None]:
        """(rows, error): every page of the statement's result, then its operation closed."""
        status, body = self.call("POST", f"/v2/sessions/{session}/statements", {"statement": statement})
        if status != 200:
            return [], f"submit: {status} {body}"
        operation = body["operationHandle"]
        rows, error, uri = [], None, f"/v2/sessions/{session}/operations/{operation}/result/0?rowFormat=JSON"
        while uri:
            status, page = self.call("GET", uri)
            if status != 200:
                error = " ".join(page.get("errors") or [str(status)])
                break
            if page["resultType"] != "NOT_READY":
                rows += page["results"]["data"]
            uri = page.get("nextResultUri")
        status, body = self.call("DELETE", f"/v2/sessions/{session}/operations/{operation}/close")
        if status != 200 and error is None:
            error = f"close operation: {status} {body}"
        return rows, error

    def close(self, session: str) -> None:
        status, body = self.call("DELETE", f"/v1/sessions/{session}")
        if status != 200:
            raise RuntimeError(f"close session: {status} {body}")
        self.connection.close()


def gateway_outcome(kind: str, rows: list, error: str | None) -> str | None:
    """None when the statement did what it should, else what went wrong."""
    if kind == "fail":
        return None if error and "'nope' could not be resolved" in error else f"expected an error, got {error or rows}"
    if error:
        return error
    if kind == "select" and len(rows) != SELECTED:
        return f"{len(rows)} rows, not {SELECTED}"
    if kind == "show" and ["orders"] not in [r["fields"] for r in rows]:
        return f"no 'orders' in {rows}"
    if kind == "set" and [r["fields"] for r in rows] != [["OK"]]:
        return f"SET answered {rows}"
    return None


RUNTIME_MODE = {"mode": "streaming"}  # the gateway sessions' execution.runtime-mode (--runtime-mode)


def gateway_client(port: int, client: int, statements: int, latencies: list, errors: list) -> None:
    try:
        api = GatewayClient(port, {"execution.runtime-mode": RUNTIME_MODE["mode"]})
        session = api.open()
        for n in range(statements):
            kind = KINDS[(client + n) % len(KINDS)]
            started = time.perf_counter()
            rows, error = api.run(session, GATEWAY_SQL[kind].format(client=client, n=n))
            latencies.append((kind, time.perf_counter() - started))
            wrong = gateway_outcome(kind, rows, error)
            if wrong:
                errors.append(f"client {client} statement {n} ({kind}): {wrong}"[:500])
        api.close(session)
    except Exception as failure:  # noqa: BLE001 (counted and shown)
        errors.append(f"client {client}: {type(failure).__name__}: {failure}"[:500])


# -- HiveServer2 ---------------------------------------------------------------------------------


class HiveServer:
    def __init__(self, catalog: Path, master: str):
        self.port, connect = free_ports(2)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamsql.cli", "--catalog", str(catalog), "serve", "--port", str(connect),
             "--thrift", str(self.port), "--master", master], env=_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=catalog.parent)
        self.output: list[str] = []
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            if line.startswith("JDBC/ODBC"):
                break
        else:
            line = ""
        if not line.startswith("JDBC/ODBC"):
            stop_process(self.process)
            raise RuntimeError("HiveServer2 did not start: " + "".join(self.output[-20:]))
        # keep reading: a full pipe would block its writes
        threading.Thread(target=lambda: self.output.extend(self.process.stdout), daemon=True).start()
        self.pid = self.process.pid

    def counts(self) -> dict:
        """Live session and statement objects in the server's JVM (a full GC first)."""
        live = jvm_live(self.pid)
        if not live:
            return {}
        return {"sessions": live["hive_sessions"], "operations": live["hive_operations"],
                "jvm": {k: live[k] for k in ("live_heap_mb", "spark_sessions")}}

    def close(self) -> None:
        stop_process(self.process)


def hive_outcome(kind: str, rows: list, error: str | None) -> str | None:
    if kind == "fail":
        return None if error and "nope" in error else f"expected an error, got {error or rows}"
    if error:
        return error
    if kind == "select" and len(rows) != SELECTED:
        return f"{len(rows)} rows, not {SELECTED}"
    if kind == "show" and "orders" not in [str(v) for row in rows for v in row]:
        return f"no 'orders' in {rows}"
    return None


def hive_client(port: int, client: int, statements: int, latencies: list, errors: list) -> None:
    from pyhive import hive

    try:
        connection = hive.connect(host="127.0.0.1", port=port, username="load", auth="NONE", database="shop")
        try:
            for n in range(statements):
                kind = KINDS[(client + n) % len(KINDS)]
                started = time.perf_counter()
                rows, error = [], None
                cursor = connection.cursor()
                try:
                    cursor.execute(HIVE_SQL[kind].format(client=client, n=n))
                    rows = cursor.fetchall() if cursor.description else []
                except Exception as failure:  # noqa: BLE001 (the failing kind's expected outcome)
                    error = f"{type(failure).__name__}: {failure}"
                finally:
                    cursor.close()
                latencies.append((kind, time.perf_counter() - started))
                wrong = hive_outcome(kind, rows, error)
                if wrong:
                    errors.append(f"client {client} statement {n} ({kind}): {wrong}"[:500])
        finally:
            connection.close()
    except Exception as failure:  # noqa: BLE001
        errors.append(f"client {client}: {type(failure).__name__}: {failure}"[:500])


# -- a load round ----------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))] if ordered else 0.0


def load(client, port: int, clients: int, statements: int) -> tuple[list, list, float]:
    latencies: list = []
    errors: list = []
    threads = [threading.Thread(target=client, args=(port, c, statements, latencies, errors)) for c in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, errors, time.perf_counter() - started


def bench_server(name: str, server, client, clients: int, statements: int, rounds: int, settle: float,
                 idle: float = 0.0) -> dict:
    """Warm-up (one client, a statement of each kind), then ``rounds`` of the load."""
    _, errors, _ = load(client, server.port, 1, len(KINDS))
    result = {"server": name, "clients": clients, "statements_per_client": statements, "warm_up_errors": errors,
              "rss_mb_before": rss_mb(server.pid), "rss_mb_before_by_process": own_rss_mb(server.pid),
              "counts_before": server.counts(), "rounds": []}
    if name == "gateway":
        result["runtime_mode"] = RUNTIME_MODE["mode"]
    for number in range(1, rounds + 1):
        with Sampler(server.pid) as sampler:
            latencies, errors, seconds = load(client, server.port, clients, statements)
        time.sleep(settle)  # sessions close, threads end
        times = [t for _, t in latencies]
        by_kind = {kind: round(statistics.median([t for k, t in latencies if k == kind]) * 1000, 1)
                   for kind in KINDS if any(k == kind for k, _ in latencies)}
        round_result = {
            "round": number, "statements": len(latencies), "errors": len(errors), "error_samples": errors[:5],
            "seconds": round(seconds, 2), "statements_per_s": round(len(latencies) / seconds, 1) if seconds else 0,
            "latency_ms_p50": round(percentile(times, 0.5) * 1000, 1),
            "latency_ms_p99": round(percentile(times, 0.99) * 1000, 1),
            "latency_ms_p50_by_kind": by_kind,
            "rss_mb_during_median": round(statistics.median(sampler.samples), 1) if sampler.samples else None,
            "rss_mb_during_max": max(sampler.samples) if sampler.samples else None,
            "rss_mb_after": rss_mb(server.pid),
            "rss_mb_after_by_process": own_rss_mb(server.pid),
            "left_open": server.counts(),
        }
        result["rounds"].append(round_result)
        print(f"{name:8} round {number}: {round_result['statements']} statements, {round_result['errors']} errors, "
              f"{round_result['statements_per_s']} statements/s, p50 {round_result['latency_ms_p50']} ms, "
              f"p99 {round_result['latency_ms_p99']} ms (p50 by kind {by_kind}); RSS MB before "
              f"{result['rss_mb_before']}, during {round_result['rss_mb_during_median']} (max "
              f"{round_result['rss_mb_during_max']}), after {round_result['rss_mb_after']}; left open "
              f"{round_result['left_open']}", flush=True)
        for error in errors[:5]:
            print(f"  error: {error}", flush=True)
    if idle > 0:  # what an idle server lets go of (thread pools' idle threads end after 60 s, say)
        time.sleep(idle)
        result["after_idle"] = {"seconds": idle, "rss_mb": rss_mb(server.pid), "counts": server.counts()}
        print(f"{name:8} after {idle:.0f} s idle: RSS MB {result['after_idle']['rss_mb']}; "
              f"{result['after_idle']['counts']}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--statements", type=int, default=200, help="statements per client")
    parser.add_argument("--rounds", type=int, default=2, help="times the whole load runs (memory after each)")
    parser.add_argument("--servers", default="gateway,hiveserver2")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runtime-mode", choices=["streaming", "batch"], default="streaming",
                        help="the gateway sessions' execution.runtime-mode (streaming: Flink's default)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after a round before 'after'")
    parser.add_argument("--idle", type=float, default=0.0, help="then seconds idle before a last look at memory")
    parser.add_argument("--serve-gateway", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--catalog", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_gateway:
        return serve_gateway(args.catalog, args.port, args.master)
    sys.path.insert(0, str(ROOT))
    RUNTIME_MODE["mode"] = args.runtime_mode
    results = []
    with tempfile.TemporaryDirectory(prefix="serve-load-") as work:
        catalog = make_catalog(Path(work))
        for name in [s.strip() for s in args.servers.split(",") if s.strip()]:
            if name == "gateway":
                server, client = GatewayServer(catalog, args.master), gateway_client
            elif name == "hiveserver2":
                server, client = HiveServer(catalog, args.master), hive_client
            else:
                parser.error(f"unknown server {name!r}: gateway or hiveserver2")
            try:
                results.append(bench_server(name, server, client, args.clients, args.statements, args.rounds,
                                            args.settle, args.idle))
            finally:
                server.close()
    print(json.dumps({"load": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
