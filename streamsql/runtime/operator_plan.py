"""The operator plan of a step, checked, for the engine and EXPLAIN.

``operator_plan(step, settings)`` builds the plan (``plan.logical``) with the runtime's
notion of a bounded source (``runtime.sources.is_bounded``) and the session's
'table.exec.state.ttl', puts the INSERT's Sink on top, and runs the plan-time changelog
checks (``plan.changelog_checks``) as Flink's streaming mode does:

- an updating result into a sink that takes only inserts is a ValidationError naming
  the node that produces the updates;
- an operator that needs insert-only input (OverAggregate, ...) over updates is a
  ValidationError over unbounded input, and a warning over bounded input, where
  streamsql runs the query to its end and writes the final result (Nexmark q6).

In batch mode (``execution.runtime-mode`` = batch) every operator's result is final,
so neither check applies — Flink's batch mode accepts these queries too.
No Spark is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamsql.errors import ValidationError
from streamsql.plan.changelog_checks import check_consumption, check_sink, consumption_issues
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.operator_explain import explain_operators
from streamsql.plan.operators import Operator, Sink
from streamsql.plan.planner import InsertStep, QueryStep
from streamsql.plan.sink_materialize import materialization
from streamsql.plan.update_kinds import push_update_kinds, sink_requirement
from streamsql.runtime.sources import is_bounded

STATE_TTL = "table.exec.state.ttl"


@dataclass
class OperatorPlan:
    root: Operator  # the Sink for an INSERT, else the query's root
    warnings: list[str] = field(default_factory=list)

    @property
    def updating(self) -> bool:
        """Whether the query's result updates (Flink: its changelog has -U/+U/-D)."""
        return self.root.updating

    def explain(self) -> list[str]:
        return explain_operators(self.root)


def operator_plan(step: QueryStep | InsertStep, settings=None, check: bool = True) -> OperatorPlan:
    """Build and (in streaming mode, unless ``check`` is False) check the step's plan."""
    ttl = settings.get(STATE_TTL) if settings is not None else None
    streaming = settings.streaming if settings is not None else True
    root = build_operator_plan(step.plan, is_bounded, ttl)
    warnings: list[str] = []
    if isinstance(step, InsertStep):
        if check and streaming:
            check_sink(root, step.table)
        root = Sink(inputs=[root], fields=root.fields, upsert_keys=root.upsert_keys, table=str(step.table.name),
                    connector=step.table.options.get("connector", ""), conflict=step.conflict)
        if streaming:  # Flink's sink upsert materializer and the ON CONFLICT rules; the sink's update
            # kinds pushed down (batch results are final)
            root.materialize = _materialization(step, root.inputs[0], settings, check)
            push_update_kinds(root, sink_requirement(step.table, step.sources, root.inputs[0])[0])
    if check and streaming:
        warnings = check_consumption(root)
    return OperatorPlan(root, warnings)


def _materialization(step, result, settings, check: bool):
    try:
        return materialization(step, result, settings)
    except ValidationError:
        if check:
            raise
        return None


def changelog_problems(step: QueryStep | InsertStep, plan: OperatorPlan, settings=None) -> list[str]:
    """What the checks would say about this plan, without raising (for EXPLAIN)."""
    problems = []
    if isinstance(step, InsertStep):
        for check in (lambda: check_sink(plan.root.inputs[0], step.table),
                      lambda: materialization(step, plan.root.inputs[0], settings)):
            try:
                check()
            except ValidationError as error:
                problems.append(error.message)
    for issue in consumption_issues(plan.root):
        problems.append(issue.message + (" (bounded input: computed to its end)" if issue.bounded else ""))
    return problems
