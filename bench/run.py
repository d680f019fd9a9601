"""Nexmark benchmark: streamsql against hand-written PySpark (and Apache Flink), same files.

    python bench/run.py                       # 1,000,000 events, every query
    python bench/run.py --events 200000 --queries q0,q5,q7
    python bench/run.py --with-flink          # also Apache Flink (installed into its own venv)

Generates the events to CSV files once (target/bench/data-N), then runs every query in a
fresh process per engine on the same cores, into a blackhole/noop sink, and prints a
table: seconds (the job's own time, Spark or Flink already up), events/s (events in the
input / seconds), peak memory (RSS of the process and its JVM), ratios. Also prints the
latency a person sees: `streamsql run -e 'SELECT ...'` to its first row (cold), and an ad
hoc query in a running shell (warm). Results are saved as JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import data  # noqa: E402
import handwritten  # noqa: E402

QUERIES = [f"q{n}" for n in range(24)] + ["hop_count", "cumulate_sum", "over_avg", "left_join"]  # the rest: bench/queries/


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--with-flink", action="store_true", help="also run Apache Flink (pip-installed into target/flink-venv)")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "target" / "bench" / "results.json"))
    parser.add_argument("--merge", action="store_true", help="re-measure --queries into the existing --out file")
    args = parser.parse_args()

    work = ROOT / "target" / "bench"
    files = work / f"data-{args.events}"
    counts = data.generate_files(files, args.events)
    catalog = data.streamsql_catalog(work / f"catalog-{args.events}", files)
    flink = _flink_python(work) if args.with_flink else None

    rows = []
    for query in args.queries.split(","):
        row = {"query": query, "events": args.events, "plan_ms": planning_ms(query, catalog)}
        row["streamsql"] = measure(_spark_job("streamsql", query, files, catalog, args))
        if query in handwritten.QUERIES:
            row["pyspark"] = measure(_spark_job("pyspark", query, files, catalog, args))
        if flink:
            row["flink"] = measure([flink, str(BENCH / "flink_job.py"), "--query", query, "--data", str(files), "--cores", str(args.cores)])
        rows.append(row)
        print(_line(row), file=sys.stderr)

    result = {"machine": _machine(args.cores), "events": args.events, "rows": counts, "queries": rows}
    if args.merge:
        result = merged(Path(args.out), result)
    if not args.no_latency:
        result["latency"] = latency(catalog)
    save(Path(args.out), result, render(result))
    return 0


def merged(out: Path, result: dict) -> dict:
    """``result`` over an earlier run saved at ``out`` (--merge): its re-measured queries
    replace theirs, in place; the others are kept."""
    if not out.exists():
        return result
    previous = json.loads(out.read_text())
    fresh = {row["query"]: row for row in result["queries"]}
    previous["queries"] = [fresh.pop(row["query"], row) for row in previous["queries"]] + list(fresh.values())
    return previous


def save(out: Path, result: dict, rendered: str) -> None:
    """Write the JSON and print the table."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(rendered)
    print(f"\nSaved {out}")


def planning_ms(query: str, catalog: Path, repeats: int = 11) -> float:
    """Median milliseconds to parse, validate, plan and translate the query file to Spark SQL
    (the first of ``repeats`` runs left out when there are more)."""
    import statistics

    from streamsql.catalog import Catalog
    from streamsql.plan.planner import InsertStep
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.engine import Engine
    from streamsql.spark.dialect import to_spark_sql

    from job import query_file

    text = query_file(query).read_text()
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(Catalog(catalog), base_dir=ROOT / "queries" / "nexmark")
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for step in engine.plan_script(text):
            if isinstance(step, InsertStep):
                to_spark_sql(step.plan.query)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times[1:] or times), 1)


def _spark_job(engine: str, query, files, catalog, args) -> list[str]:
    return [sys.executable, str(BENCH / "job.py"), "--engine", engine, "--query", query, "--data", str(files),
            "--catalog", str(catalog), "--cores", str(args.cores)]


def measure(command: list[str]) -> dict:
    """Run a job process; its reported seconds and the peak RSS of its process tree."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak = PeakMemory(process.pid)
    peak.start()
    out, err = process.communicate()
    peak.stop()
    if process.returncode != 0:
        lines = err.strip().splitlines() or ["no output"]
        causes = [line.strip() for line in lines if ("Error" in line or "Exception" in line) and not line.strip().startswith("at ")]
        return {"error": (causes or lines)[-1][:300]}
    report = json.loads(out.strip().splitlines()[-1])
    report["peak_mb"] = round(peak.peak / 2**20)
    report["peak_jvm_mb"] = round(peak.peak_jvm / 2**20)
    report["rss_mb_every_5s"] = peak.timeline
    return report


class PeakMemory(threading.Thread):
    """Samples the resident memory of a process and its descendants (the JVM) every 100 ms:
    the peak of all, the JVM's alone, and the whole every 5 s (does it level off?)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_jvm, self._done = pid, 0, 0, threading.Event()
        self.timeline: list[int] = []

    def run(self) -> None:
        ticks = 0
        while not self._done.wait(0.1):
            sizes = {p: _rss(p) for p in _tree(self.pid)}
            total = sum(sizes.values())
            self.peak = max(self.peak, total)
            self.peak_jvm = max(self.peak_jvm, sum(size for p, size in sizes.items() if _is_jvm(p)))
            if ticks % 50 == 0:
                self.timeline.append(round(total / 2**20))
            ticks += 1

    def stop(self) -> None:
        self._done.set()
        self.join()


def _tree(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _is_jvm(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def latency(catalog: Path) -> dict:
    """Seconds from `streamsql run -e` to its first row (cold), and for an ad hoc query in a
    shell that has already run one (warm)."""
    import pexpect

    env = dict(os.environ, STREAMSQL_CATALOG=str(catalog))
    command = [sys.executable, str(ROOT / "cli.py"), "run", "--format", "csv", "-e",
               "SELECT auction, price FROM nexmark.bid WHERE price > 1000000 LIMIT 1"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    process.stdout.readline()  # the header
    process.stdout.readline()  # the first row
    cold = time.perf_counter() - started
    process.wait()

    shell = pexpect.spawn(sys.executable, [str(ROOT / "cli.py")], env=env, encoding="utf-8", timeout=300)
    shell.expect("Flink SQL>")
    ad_hoc = "SET 'execution.runtime-mode' = 'batch';\nSELECT channel, COUNT(*) AS bids FROM nexmark.bid GROUP BY channel ORDER BY bids DESC LIMIT 5;\n"
    warm = []
    for _ in range(3):
        started = time.perf_counter()
        shell.send(ad_hoc)
        shell.expect("rows? in set")
        warm.append(time.perf_counter() - started)
    shell.sendline("QUIT;")
    shell.expect(pexpect.EOF)
    return {"cold_first_row_s": round(cold, 2), "warm_ad_hoc_s": round(min(warm[1:]), 2), "first_ad_hoc_s": round(warm[0], 2)}


def _flink_python(work: Path) -> str:
    """Apache Flink (PyPI apache-flink) in its own virtualenv, never a dependency of streamsql."""
    venv = work.parent / "flink-venv"
    python = venv / "bin" / "python"
    if not (venv / "bin" / "pyflink-shell.sh").exists() and not _has_pyflink(python):
        print("Installing apache-flink into", venv, "...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "apache-flink==2.3.0"], check=True)
    return str(python)


def _has_pyflink(python: Path) -> bool:
    return python.exists() and subprocess.run([str(python), "-c", "import pyflink"], capture_output=True).returncode == 0


def _machine(cores: int) -> dict:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores_used": cores, "cores": os.cpu_count(), "memory_gb": memory, "python": platform.python_version()}


def _rate(events: int, report: dict | None) -> str:
    if not report:
        return "—"
    if "error" in report:
        return "failed"
    rate = events / report["seconds"]
    return f"{rate / 1000:,.0f} k" if rate >= 10_000 else f"{rate:,.0f}"


def _ratio(a: dict | None, b: dict | None) -> str:
    if not a or not b or "error" in a or "error" in b:
        return "—"
    return f"{b['seconds'] / a['seconds']:.2f}"


def _line(row: dict) -> str:
    parts = [row["query"]]
    for engine in ("streamsql", "pyspark", "flink"):
        report = row.get(engine)
        if report:
            parts.append(f"{engine} " + (report.get("error") or f"{report['seconds']:.2f} s, {report['peak_mb']} MB"))
    return "  ".join(parts)


def render(result: dict) -> str:
    """The results as a Markdown table (the README shows it)."""
    flink = any("flink" in row for row in result["queries"])
    head = "| query | plan ms | events | streamsql s | streamsql events/s | peak MB | hand-written PySpark s | streamsql / PySpark |"
    if flink:
        head += " Flink s | streamsql / Flink |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in result["queries"]:
        mine, theirs, other = row.get("streamsql"), row.get("pyspark"), row.get("flink")
        seconds = f"{mine['seconds']:.2f}" if mine and "error" not in mine else (mine or {}).get("error", "—")[:60]
        cells = [row["query"], str(row.get("plan_ms", "—")), f"{row['events']:,}", seconds, _rate(row["events"], mine),
                 str(mine.get("peak_mb", "—")) if mine else "—",
                 f"{theirs['seconds']:.2f}" if theirs and "error" not in theirs else ("not native" if not theirs else "failed"),
                 _ratio(mine, theirs)]
        if flink:
            cells += [f"{other['seconds']:.2f}" if other and "error" not in other else "failed", _ratio(mine, other)]
        lines.append("| " + " | ".join(cells) + " |")
    machine = result["machine"]
    lines.append("")
    lines.append(f"Machine: {machine['cpu']}, {machine['cores_used']} of {machine['cores']} cores used, "
                 f"{machine['memory_gb']} GB RAM, Python {machine['python']}. Ratios: the other's seconds / streamsql's "
                 f"(above 1: streamsql is faster).")
    if "latency" in result:
        lat = result["latency"]
        lines.append(f"Latency: `streamsql run -e 'SELECT ...'` to its first row {lat['cold_first_row_s']} s (cold, "
                     f"Spark starting); an ad hoc query in a running shell {lat['warm_ad_hoc_s']} s (warm; the "
                     f"shell's first {lat['first_ad_hoc_s']} s).")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
