"""A job's operator plans as graphs: what EXPLAIN's `== Operator plan ==` shows, as data.

When a job starts, the engine records each streaming INSERT's plan in the job's record
(``graph``): one node per operator, sources first, with its Flink description, changelog
mode, state bound, and where it runs — natively on Spark's streaming operators, or on
streamsql's stateful operators (spark.physical) — and for a source, what its Spark
progress description contains (its path or topic), so the dashboard can put the source's
rows on it. ``layout`` places the nodes for drawing: sources on the left, the sink on the
right, each node one column after its furthest input.
"""

from __future__ import annotations

import os

NATIVE, OWN = "Spark", "streamsql"


def graph(step, settings, query: str) -> dict:
    """The INSERT ``step``'s operator plan (run as the streaming query ``query``) as a graph."""
    from streamsql.plan.operator_explain import describe_with_traits
    from streamsql.plan.operators import Scan, short_mode
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.spark.physical import stateful_operators

    root = operator_plan(step, settings, check=False).root
    own = {id(node) for node in stateful_operators(root)}
    tables = {str(t.name): t for t in step.plan.tables}
    nodes: list[dict] = []
    numbered: dict[int, int] = {}

    def visit(node) -> int:
        if id(node) in numbered:  # an operator read twice is drawn once
            return numbered[id(node)]
        inputs = [visit(child) for child in node.inputs]
        entry = {"id": len(nodes), "kind": node.kind, "text": node.describe(), "explain": describe_with_traits(node),
                 "mode": short_mode(node.mode), "state": node.state, "runs": OWN if id(node) in own else NATIVE,
                 "inputs": inputs}
        if isinstance(node, Scan):
            entry["table"] = node.table
            entry["source"] = source_marker(tables.get(node.table))
        numbered[id(node)] = entry["id"]
        nodes.append(entry)
        return entry["id"]

    visit(root)
    return {"query": query, "nodes": nodes}


def source_marker(table) -> str | None:
    """What Spark's description of the table's source contains: its path, else its topic."""
    if table is None:
        return None
    options = table.options
    if options.get("path"):
        return os.path.abspath(options["path"]).rstrip("/")
    return options.get("topic") or options.get("topic-pattern")


def graphs(steps_and_names, settings) -> list[dict]:
    """Every streaming INSERT's graph; an INSERT whose plan cannot be drawn gets a note saying why
    instead (the job runs all the same)."""
    drawn = []
    for step, name in steps_and_names:
        try:
            drawn.append(graph(step, settings, name))
        except Exception as error:  # noqa: BLE001 (the dashboard's loss, never the job's)
            drawn.append({"query": name, "nodes": [], "error": f"{type(error).__name__}: {error}"})
    return drawn


def node_rows(plan: dict, totals: dict | None) -> dict[int, dict]:
    """Rows in and out per node where known: a source's rows from Spark's per-source counts,
    the sink's rows in (what reached it) and out (what it committed)."""
    totals = totals or {}
    known: dict[int, dict] = {}
    for node in plan.get("nodes", []):
        if node["kind"] == "TableSourceScan" and node.get("source"):
            counts = [rows for description, rows in (totals.get("sources") or {}).items()
                      if _names(description, node["source"])]
            if counts:
                known[node["id"]] = {"out": sum(counts)}
        elif node["kind"] == "Sink" and totals.get("rows_out") is not None:
            known[node["id"]] = {"out": totals["rows_out"]}
    return known


def _names(description: str, marker: str) -> bool:
    """Whether Spark's source description names this path or topic (not one it prefixes:
    ``/in`` is not ``/input``): ``FileStreamSource[file:/in/[!._]*]``, ``KafkaV2[Subscribe[t]]``."""
    at = description.find(marker)
    while at >= 0:
        after = description[at + len(marker):at + len(marker) + 1]
        if after in ("", "/", "]", ",", " "):
            return True
        at = description.find(marker, at + 1)
    return False


def layout(plan: dict) -> dict[int, tuple[int, int]]:
    """(column, row) per node id: a node one column right of its furthest input; rows in
    the order nodes were numbered (sources first, as the plan reads them)."""
    column: dict[int, int] = {}
    for node in plan.get("nodes", []):  # inputs are numbered before the nodes reading them
        column[node["id"]] = 1 + max((column[i] for i in node["inputs"]), default=-1)
    rows: dict[int, int] = {}
    placed: dict[int, tuple[int, int]] = {}
    for node in plan.get("nodes", []):
        col = column[node["id"]]
        placed[node["id"]] = (col, rows.get(col, 0))
        rows[col] = rows.get(col, 0) + 1
    return placed
