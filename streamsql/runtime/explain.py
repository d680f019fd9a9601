"""EXPLAIN: what streamsql will do with a statement, and the plan Spark will run.

Sections: the sources, windows, sink and execution (== streamsql plan ==), Flink's
operators with their changelog modes and state (== Operator plan ==), the Spark SQL,
and Spark's physical plan. All but the last are made without Spark (``describe``).
"""

from __future__ import annotations

from streamsql.plan.planner import InsertStep, QueryStep
from streamsql.plan.windows import watermark_delay_ms
from streamsql.runtime.sources import DEFAULT_POLL_INTERVAL, is_bounded
from streamsql.spark.dialect import to_spark_sql
from streamsql.runtime.execution import streams
from streamsql.spark.physical import native_update_aggregate


def explain(engine, step: QueryStep | InsertStep) -> list[str]:
    from streamsql.errors import ValidationError
    from streamsql.runtime.execution import check_operators

    lines, streaming = describe(engine, step)
    lines.append("== Spark plan ==")
    if streaming:
        try:  # a query refused over unbounded input has no Spark plan: say why, as running it would
            check_operators(engine, step, engine.settings)
        except ValidationError as error:
            return lines + [f"(none: {error.message})"]
    frame, _ = engine._frame(step.plan, streaming=streaming)
    return lines + _spark_plan(frame).splitlines()


def describe(engine, step: QueryStep | InsertStep) -> tuple[list[str], bool]:
    """Every section but Spark's plan, and whether the step runs on Structured Streaming."""
    from streamsql.runtime.operator_plan import changelog_problems, operator_plan

    plan = step.plan
    lines = ["== streamsql plan =="]
    for table in plan.tables:
        options = table.options
        kind = f"{options['connector']}" + (f" {options['format']}" if "format" in options else "")
        bounded = "bounded" if is_bounded(table) else f"unbounded (every {options.get('source.monitor-interval', DEFAULT_POLL_INTERVAL)})"
        watermark = ""
        if table.watermark is not None:
            watermark = f", watermark on {table.watermark.column} - {watermark_delay_ms(table)} ms"
        lines.append(f"source {table.name}: {kind}, {bounded}{watermark}")
    for window in plan.windows:
        params = ", ".join(f"{k.lower()} {v} ms" for k, v in window.parameters.items())
        late = "late rows: not tracked (processing time or derived input)"
        if window.late_source is not None:
            late = "late rows: dropped and counted" + (
                f", routed to {window.late_table.name}" if window.late_table else "")
        lines.append(f"window {window.name}: {window.kind}({params}) on {window.time_column}; {late}")
    if isinstance(step, InsertStep):
        lines.append(f"sink {step.table.name}: {step.table.options['connector']}")
    streaming = streams(engine, step)
    operators = operator_plan(step, engine.settings, check=False)
    native_update = native_update_aggregate(operators.root) if streaming else None
    if native_update is not None:
        lines.append(f"execution: Spark Structured Streaming (update mode): the GroupAggregate runs on Spark's own"
                     f" streaming aggregation, each micro-batch emitting the new row of each key it changed;"
                     f" result changelog: {operators.root.mode}")
    elif streaming:
        lines.append(f"execution: Spark Structured Streaming (append mode, each row with its kind); result changelog:"
                     f" {operators.root.mode}; each operator's state as the operator plan shows")
    elif engine.settings.streaming:
        lines.append("execution: bounded input, run to its end as one computation; all windows fire at the"
                     " end (watermark +inf); state is released when the run ends")
    else:
        lines.append("execution: batch")
    if isinstance(step, InsertStep) and engine.settings.streaming:
        lines.append(_update_kinds(step, operators.root))
    lines += ["", "== Operator plan ==", *operators.explain()]
    if engine.settings.streaming:  # in batch mode every result is final: nothing to check
        lines += [f"note: {problem}" for problem in changelog_problems(step, operators, engine.settings)]
    lines += ["", "== Spark SQL ==", to_spark_sql(plan.query), ""]
    return lines, streaming


def _update_kinds(step: InsertStep, root) -> str:
    """What the sink needs of the query's updates, and who then emits UPDATE_AFTER only."""
    from streamsql.plan.update_kinds import ONLY_UPDATE_AFTER, sink_requirement, upsert_producers

    required, why = sink_requirement(step.table, step.sources, root.inputs[0])
    if required != ONLY_UPDATE_AFTER:
        return f"update kinds: both images of an update ({why})"
    told = ", ".join(node.kind for node in upsert_producers(root)) or "no operator (the result is insert-only)"
    return f"update kinds: UPDATE_AFTER only ({why}); emitting no UPDATE_BEFORE: {told}"


def _spark_plan(frame) -> str:
    try:
        return frame._sc._jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), "formatted")
    except AttributeError:  # Spark Connect: no JVM on this side
        return "(not available through Spark Connect)"
