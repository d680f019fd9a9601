"""A regular join's side whose rows the watermark retires (``plan.join_retiring``), on
streamsql's join operator.

The operator plan's Join says which side's rows no row still to come can match once the
watermark passes their time plus c: an inner join's insert-only side whose partners are an
event-time window aggregate's rows, bounded by their ``window_end``. That side carries
``t + c`` in epoch ms as a column of its own (``EXPIRES``), and its store drops a generation
once the watermark has passed all of its rows (``generations.Generations``). Here the other
side must be streamsql's window operator itself, fed by no other window operator, its window
end read as it is: the operator emits a window in the micro-batch whose watermark reaches its
end and never after, which is what the bound rests on.
"""

from __future__ import annotations

from sqlglot import exp

EXPIRES = ("__lx", "__rx")  # each side's column: epoch ms below which the watermark retires the row


def expiring_sides(node, aliases: tuple[str, str], stages: tuple) -> list:
    """Per side (left, right): the SQL of its rows' ``t + c`` in epoch ms, or None where they
    stay. ``node``: the operator plan's Join; ``stages``: the stage each side reads (None: a
    table or subquery)."""
    from streamsql.spark.stateful.stages import epoch_millis

    found: list = [None, None]
    if not hasattr(node, "retires"):  # a join the cut makes itself (semi_cut, scalar_cut): no bound
        return found
    for side, (retires, bound) in enumerate(zip(node.retires(), node.retired)):
        if retires and bound[0] == aliases[side] and _window_end(stages[1 - side], bound[3]):
            found[side] = exp.Add(this=epoch_millis(exp.column(bound[1], bound[0])),
                                  expression=exp.Literal.number(bound[2]))
    return found


def _window_end(stage, name: str) -> bool:
    """Whether ``stage`` is an event-time window aggregate of its own input whose output
    column ``name`` is its window end, as it is."""
    from streamsql.spark.stateful.stages import WindowAggregateStage

    if not isinstance(stage, WindowAggregateStage) or stage.proctime or stage.cascaded or stage.window_views:
        return False
    return any(projection.alias_or_name == name and isinstance(value := projection.unalias(), exp.Column)
               and value.name == stage.end_key for projection in stage.split.output_query.expressions)
