"""How a query runs, decided from its operator plan before Spark starts.

- ``check_operators``: Flink's changelog rules (runtime.operator_plan) and, over unbounded
  input, whether every operator can run (natively, or on a stateful operator).
- ``streams``: Spark Structured Streaming, or one bounded computation.
- ``stateful_stages``: a query cut around streamsql's stateful operators (spark.stateful.chain).
- ``trigger``: to the end of bounded input, or every interval for unbounded input.
"""

from __future__ import annotations

from streamsql.errors import ValidationError
from streamsql.plan.durations import parse_duration, spark_interval
from streamsql.plan.steps import InsertStep, QueryPlan, QueryStep, StatementSetStep, Step
from streamsql.spark import real_time


def streams(engine, step: QueryStep | InsertStep) -> bool:
    """Whether to run on Spark Structured Streaming.

    Streaming mode over bounded input runs as one bounded computation instead when the
    query has windows (Spark's streaming never fires the windows still open at the end of
    the input, Flink's does: its watermark reaches +infinity; late rows are still dropped as
    Flink's watermark would drop them, spark.windows) — unless 'execution.bounded-input' is
    'stream': then the input is streamed and its end fires the last windows
    (runtime.end_of_input) — or an operator Spark cannot stream (spark.physical: its final
    result is the table Flink's changelog ends with). So does
    bounded input into a blackhole (with no output to keep exactly-once, micro-batches and
    checkpoints would be pure overhead), and a SELECT ... LIMIT over bounded input (a batch
    query stops reading once it has its rows). Unbounded input that needs an operator Spark
    lacks was refused at plan time (check_operators).
    """
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.spark.physical import needs_stateful_operator, pads_as_time_passes

    settings, plan = engine.settings, step.plan
    sink = step.table if isinstance(step, InsertStep) else None
    if not settings.streaming or not plan.tables:
        return False
    bounded = "availableNow" in trigger(settings, plan)
    stream_bounded = settings.get("execution.bounded-input") == "stream"
    if bounded and sink is not None and sink.options["connector"] == "blackhole" and not stream_bounded:
        return False
    if bounded and sink is None and plan.query.args.get("limit") is not None and not stream_bounded:
        return False
    root = operator_plan(step, settings, check=False).root
    if stateful_stages(engine, step, bounded, root=root) is not None:
        return True
    if bounded and not stream_bounded and pads_as_time_passes(root):
        return False
    stateful = needs_stateful_operator(root) if bounded else None
    if bounded and stateful is None and plan.windows and settings.get("execution.bounded-input") == "stream":
        return True  # windows Spark streams natively; the end of input fires the last ones (runtime.end_of_input)
    if bounded and (stateful is not None or plan.windows):
        if settings.get("execution.bounded-input") == "stream":
            engine.log(f"Note: 'execution.bounded-input' = 'stream': this query's {stateful.kind} operator has no"
                       " incremental form on Spark yet; it runs over the bounded input as one computation.")
        return False
    return True


def stateful_stages(engine, step: QueryStep | InsertStep, bounded: bool, settings=None, root=None,
                    why: list | None = None):
    """The stages (spark.stateful.chain) of a query that streams on streamsql's stateful
    operators: over unbounded input, or over bounded input with 'execution.bounded-input'
    = 'stream'. Remembered in the engine for building the query's frame."""
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.runtime.sources import is_bounded
    from streamsql.spark.physical import runs_on_stateful_operators
    from streamsql.spark.stateful.chain import compile_query

    settings = settings or engine.settings
    if bounded and settings.get("execution.bounded-input") != "stream":
        return None
    root = root or operator_plan(step, settings, check=False).root  # the step's operator plan
    if not runs_on_stateful_operators(root):
        return None
    ttl = settings.get("table.exec.state.ttl")
    stages = compile_query(step.plan, is_bounded, parse_duration(ttl) if ttl else None, why)
    if stages is not None:
        from streamsql.spark.stateful.stages import without_update_before

        without_update_before(stages, root)
        engine._stages[id(step.plan)] = (step.plan, stages)
    return stages


def check_operators(engine, step: Step, settings) -> None:
    """Plan-time checks of a query's operator plan, before Spark starts: Flink's changelog
    rules, and an unbounded query that needs an operator streamsql cannot stream yet.
    Warnings (an OVER over updates on bounded input) are logged."""
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.runtime.sources import is_bounded
    from streamsql.spark.physical import needs_stateful_operator

    steps = step.inserts if isinstance(step, StatementSetStep) else [step]
    for single in steps:
        if not isinstance(single, (QueryStep, InsertStep)):
            continue
        operators = operator_plan(single, settings)
        for warning in operators.warnings:
            engine.log(f"Note: {warning}")
        if real_time.wanted(settings) and settings.streaming:
            refused = real_time.refusal(operators.root, getattr(single, "table", None), single.plan.tables)
            if refused is not None:
                raise ValidationError(refused)
        if not settings.streaming or all(is_bounded(t) for t in single.plan.tables):
            continue
        missing = needs_stateful_operator(operators.root)
        why: list[str] = []
        if missing is not None and stateful_stages(engine, single, False, settings, operators.root, why) is None:
            from streamsql.spark.physical import STATEFUL_KINDS

            detail = f"here: {why[0]}" if why else "the README's 'Not yet' lists such shapes"
            what = ("is not streamed in this query's shape yet: streamsql's stateful operators run it, but not"
                    f" combined as this query combines it ({detail})"
                    if missing.kind in STATEFUL_KINDS else "needs a stateful streaming operator that streamsql does"
                    " not have yet (Spark Structured Streaming has none for it)")
            raise ValidationError(
                f"{missing.describe()} over an unbounded source {what}. Run it over bounded input (its final"
                " result is computed), or in batch mode (SET 'execution.runtime-mode' = 'batch')."
            )


def trigger(settings, plan: QueryPlan) -> dict:
    """Read bounded input to its end (availableNow); unbounded input every checkpoint interval
    (else the source's monitor interval)."""
    from streamsql.runtime.sources import DEFAULT_POLL_INTERVAL, is_bounded

    if all(is_bounded(t) for t in plan.tables):
        return {"availableNow": True}
    interval = settings.get("execution.checkpointing.interval")
    if real_time.wanted(settings):  # checked at plan time (check_operators): a shape real-time mode runs
        return {"realTime": spark_interval(interval or real_time.DEFAULT_BATCH)}
    if interval is None:
        interval = next((t.options["source.monitor-interval"] for t in plan.tables
                         if "source.monitor-interval" in t.options), DEFAULT_POLL_INTERVAL)
    return {"processingTime": spark_interval(interval)}
