"""Streaming Nexmark benchmark: streamsql's streaming operators against Flink's streaming mode.

    python bench/streaming.py --with-flink             # 1,000,000 events, q0-q23, beside Flink 2.3
    python bench/streaming.py --events 100000 --queries q4,q9,q15
    python bench/streaming.py --source nexmark         # streamsql on the nexmark generator

Each query runs in a fresh process (bench/stream_job.py) as a stream on unbounded input, through
Spark's native streaming operators and streamsql's stateful ones, into its blackhole table, one
micro-batch right after another, and is stopped once it has read --events events. Its input:
`--source files` (the default), the N events written once as CSV files by the generator behind
the `nexmark` table (bench/data.py), read as watched directories a file a micro-batch: the
same files Flink reads. `--source nexmark`: an unbounded `nexmark` table (Flink Nexmark's DDL,
catalog/nexmark/events.sql, without 'events.num'), `--batch-rows` events a micro-batch; the
events are the same, generated in Spark's Python workers as the query runs.
Flink (`--with-flink`) runs the same query file in its streaming mode (PyFlink's local
mini-cluster, bench/flink_job.py) on the same cores over those CSV files, to their end
(apache-flink from PyPI has no Nexmark source); a query streamsql refuses is not run on Flink.
Prints a table: events/s of each, the ratio, streamsql's peak state and memory, failures and
refusals in one line each, and for a query below 1.0x what its measurements say bounds it.
JSON in target/bench/streaming.json.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import data  # noqa: E402
import run  # noqa: E402
from stream_reasons import reason  # noqa: E402

QUERIES = [f"q{n}" for n in range(24)]
NEXMARK = ROOT / "catalog" / "nexmark"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--conf", action="append", default=[], help="streamsql: a Spark setting key=value (A/B runs)")
    parser.add_argument("--source", choices=["files", "nexmark"], default="files",
                        help="streamsql reads Flink's CSV files (watched directories) or the nexmark generator")
    parser.add_argument("--batch-rows", type=int, default=250_000, help="nexmark: events per micro-batch ('source.max-rows-per-batch')")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a streamsql query is stopped and reported")
    parser.add_argument("--with-flink", action="store_true", help="also run Apache Flink (pip-installed into target/flink-venv)")
    parser.add_argument("--out", default=str(ROOT / "target" / "bench" / "streaming.json"))
    parser.add_argument("--work", default=str(ROOT / "target" / "bench"), help="where the files and catalogs go")
    parser.add_argument("--merge", action="store_true", help="re-measure --queries into the existing --out file")
    args = parser.parse_args()

    work = Path(args.work)
    batch_rows = min(args.batch_rows, args.events) if args.source == "nexmark" else data.FILE_ROWS
    flink = run._flink_python(ROOT / "target" / "bench") if args.with_flink else None
    files = work / f"data-{args.events}"
    if flink or args.source == "files":
        data.generate_files(files, args.events)
    if args.source == "files":
        catalog = files_catalog(work / f"stream-catalog-files-{args.events}", files)
    else:
        catalog = stream_catalog(work / f"stream-catalog-{batch_rows}", batch_rows)

    rows = []
    for query in args.queries.split(","):
        row = {"query": query, "events": args.events, "batch_rows": batch_rows, "source": args.source}
        refused = plan_check(query, catalog)
        row["streamsql"] = {"error": refused} if refused else run.measure([sys.executable, str(BENCH / "stream_job.py"), "--query", query,
                                        "--catalog", str(catalog), "--events", str(args.events), "--source", args.source,
                                        "--cores", str(args.cores), "--timeout", str(args.timeout),
                                        *[f"--conf={c}" for c in args.conf]])
        if flink and not refused:
            row["flink"] = run.measure([flink, str(BENCH / "flink_job.py"), "--query", query, "--data", str(files),
                                        "--cores", str(args.cores)])
        rows.append(row)
        print(_line(row), file=sys.stderr)

    result = {"machine": run._machine(args.cores), "events": args.events, "batch_rows": batch_rows,
              "source": args.source, "queries": rows}
    if args.merge:
        result = run.merged(Path(args.out), result)
    run.save(Path(args.out), result, render(result))
    return 0


def stream_catalog(directory: Path, batch_rows: int) -> Path:
    """A catalog whose database 'nexmark' is the embedded one's, its `events` table unbounded
    (no 'events.num') and read `batch_rows` events a micro-batch."""
    database = directory / "nexmark"
    database.mkdir(parents=True, exist_ok=True)
    events = (NEXMARK / "events.sql").read_text()
    events, found = re.subn(r"'events\.num' = '\d+'", f"'source.max-rows-per-batch' = '{batch_rows}'", events)
    assert found == 1, "catalog/nexmark/events.sql no longer sets 'events.num'"
    (database / "events.sql").write_text(events)
    for view in ("person", "auction", "bid"):
        (database / f"{view}.sql").write_text((NEXMARK / f"{view}.sql").read_text())
    (database / "side_input.sql").write_text(data.side_input_ddl())
    return directory


def files_catalog(directory: Path, files: Path) -> Path:
    """A catalog whose person/auction/bid are watched directories of the benchmark's CSV files
    (unbounded: 'source.monitor-interval'), read a file a micro-batch."""
    database = directory / "nexmark"
    database.mkdir(parents=True, exist_ok=True)
    for kind in data.KINDS:
        ddl = data.table_ddl(kind, files / kind, "'source.max-files-per-batch' = '1'", "'source.monitor-interval' = '1 s'")
        (database / f"{kind}.sql").write_text(ddl)
    (database / "side_input.sql").write_text(data.side_input_ddl())
    return directory


def plan_check(query: str, catalog: Path) -> str | None:
    """streamsql's plan-time refusal of the query over the unbounded source (one line), or
    None: the checks run before Spark starts, so a refused query costs no JVM."""
    from streamsql.catalog import Catalog
    from streamsql.errors import StreamsqlError
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.engine import Engine

    from job import query_file

    script = query_file(query)
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(Catalog(catalog), base_dir=script.parent)
    engine.settings.set("execution.bounded-input", "stream")
    try:
        engine.plan_script(script.read_text())
    except StreamsqlError as error:
        return short_error(str(error).strip().splitlines()[0])
    return None


def _rate(report: dict | None) -> float | None:
    if not report or "error" in report or not report.get("seconds"):
        return None
    return report.get("events", 0) / report["seconds"]


def _events_per_second(rate: float | None) -> str:
    if rate is None:
        return "—"
    return f"{rate / 1000:,.0f} k" if rate >= 10_000 else f"{rate:,.0f}"


def _megabytes(value: int | None) -> str:
    return "—" if value is None else f"{value / 2**20:,.1f}"


def _line(row: dict) -> str:
    parts = [row["query"]]
    for engine in ("streamsql", "flink"):
        report = row.get(engine)
        if report:
            parts.append(f"{engine} " + (report.get("error") or f"{report['seconds']:.2f} s, {report['peak_mb']} MB"))
    return "  ".join(parts)


def render(result: dict) -> str:
    """The results as a Markdown table (the README shows it), then the failures and reasons."""
    head = ("| query | streamsql s | streamsql events/s | Flink s | Flink events/s | streamsql / Flink | "
            "micro-batches | peak state MB (rows) | state files MB | peak RSS MB streamsql / Flink |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    notes = []
    source = _source_seconds_per_event(result["queries"])
    for row in result["queries"]:
        mine, theirs = row.get("streamsql") or {}, row.get("flink")
        ours, flinks = _rate(mine), _rate(_flink_events(theirs, row["events"]))
        ratio = ours / flinks if ours and flinks else None
        if "error" in mine:
            error = short_error(mine["error"])
            cells = [row["query"], "refused" if _refused(error) else "failed", "—"]
            notes.append(f"- {row['query']}: {error}")
        else:
            cells = [row["query"], f"{mine['seconds']:.2f}", _events_per_second(ours)]
        cells += [f"{theirs['seconds']:.2f}" if theirs and "error" not in theirs else ("failed" if theirs else "—"),
                  _events_per_second(flinks), f"{ratio:.2f}" if ratio else "—"]
        if "error" in mine:
            cells += ["—", "—", "—"]
        else:
            cells += [str(mine["batches"]),
                      f"{_megabytes(mine['peak_state_bytes'])} ({mine['peak_state_rows']:,})" if mine["state_operators"] else "no state",
                      _megabytes(mine.get("state_dir_bytes"))]
        cells.append(f"{mine.get('peak_mb', '—')} / {theirs.get('peak_mb', '—') if theirs else '—'}")
        lines.append("| " + " | ".join(cells) + " |")
        if theirs and "error" in theirs:
            notes.append(f"- {row['query']} on Flink: {theirs['error']}")
        if ratio is not None and ratio < 1.0:
            generating = source * mine.get("input_rows", 0) if source else None
            notes.append(f"- {row['query']} ({ratio:.2f}x): {reason(row['query'], mine, generating, result.get('source', 'nexmark'))}")
    machine = result["machine"]
    lines += ["", f"Machine: {machine['cpu']}, {machine['cores_used']} of {machine['cores']} cores used, "
                  f"{machine['memory_gb']} GB RAM, Python {machine['python']}; {result['events']:,} events, {_source(result)}. "
                  f"Ratio: streamsql's events/s / Flink's (above 1: streamsql is faster)."]
    if notes:
        lines += ["", "Failures, refusals and what bounds each query below 1.0x:", *notes]
    return "\n".join(lines)


def _source_seconds_per_event(rows: list[dict]) -> float | None:
    """Seconds q0 (a projection of the source) spends running its micro-batches, per event:
    the cost of generating the events, which every query pays."""
    q0 = next((row.get("streamsql") for row in rows if row["query"] == "q0"), None)
    if not q0 or "error" in q0 or not q0.get("input_rows"):
        return None
    return q0["durations_ms"].get("addBatch", 0) / 1000 / q0["input_rows"]


def short_error(error: str) -> str:
    """streamsql's message in one short line: a refused operator by its name (and window)."""
    refused = re.match(r"(\w+)\((?:window=\[(\w+))?.*?\) over an unbounded source (needs a stateful streaming"
                       r" operator|is not streamed in this query's shape)", error)
    if refused:
        window = f" ({refused.group(2)})" if refused.group(2) else ""
        what = ("needs a stateful streaming operator streamsql does not have yet" if refused.group(3).startswith("needs")
                else "is not streamed in this query's shape yet")
        return f"refused at plan time: {refused.group(1)}{window} over an unbounded source {what}"
    changes = re.match(r"(\w+ doesn't support consuming update and delete changes which is produced by node \w+)", error)
    if changes:  # Flink's own refusal (its planner refuses the same query)
        return f"refused at plan time: {changes.group(1)} (Flink's message; Flink refuses it too)"
    return error[:300]


def _source(result: dict) -> str:
    if result.get("source") == "files":
        return (f"streamsql reading the CSV files Flink reads as watched directories, a file (at most "
                f"{result['batch_rows']:,} rows) a micro-batch")
    return f"streamsql reading an unbounded nexmark source, {result['batch_rows']:,} events a micro-batch"


def _flink_events(report: dict | None, events: int) -> dict | None:
    """Flink reads every event of the files."""
    return None if not report else {**report, "events": events}


def _refused(error: str) -> bool:
    return error.startswith("refused") or "did not stream" in error


if __name__ == "__main__":
    sys.exit(main())
