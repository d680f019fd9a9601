"""EXPLAIN text for an operator plan, in the shape of Flink's `== Optimized Physical Plan ==`.

    Sink(table=[default_catalog.default_database.out], fields=[a, c], changelogMode=[I,UB,UA])
    +- GroupAggregate(groupBy=[a], select=[a, COUNT(*) AS c], changelogMode=[I,UB,UA], upsertKeys=[[a]], state=[unbounded])
       +- TableSourceScan(table=[[default_catalog, default_database, t]], fields=[a, b], changelogMode=[I], bounded=[true])

Each node ends with its changelog mode (Flink's EXPLAIN CHANGELOG_MODE), its upsert keys
when it has any, and how its state is bounded when it keeps state. A source says
whether it is bounded.
"""

from __future__ import annotations

from streamsql.plan.operators import Operator, Scan, short_mode


def describe_with_traits(node: Operator) -> str:
    extra = [f"changelogMode=[{short_mode(node.mode)}]"]
    if node.upsert_keys:
        extra.append("upsertKeys=[" + ", ".join(f"[{', '.join(k)}]" for k in node.upsert_keys) + "]")
    if node.state != "none":
        extra.append(f"state=[{node.state}]")
    if isinstance(node, Scan):
        extra.append(f"bounded=[{'true' if node.bounded else 'false'}]")
    text = node.describe()
    return f"{text[:-1]}, {', '.join(extra)})" if text.endswith(")") else f"{text} {', '.join(extra)}"


def explain_operators(root: Operator) -> list[str]:
    """The tree, one node a line, children indented under `+- ` (last) or `:- ` (others)."""
    lines: list[str] = []

    def visit(node: Operator, prefix: str, connector: str, child_prefix: str) -> None:
        lines.append(prefix + connector + describe_with_traits(node))
        for index, child in enumerate(node.inputs):
            last = index == len(node.inputs) - 1
            visit(child, child_prefix, "+- " if last else ":- ", child_prefix + ("   " if last else ":  "))

    visit(root, "", "", "")
    return lines
