"""The end of bounded input run as a stream ('execution.bounded-input' = 'stream').

Flink ends a bounded source with the maximal watermark: every window still open fires and
every timer runs. Spark's trigger(availableNow=True) reads the input to its end and stops
with the last windows still open. So a watermarked bounded source is read together with an
end-of-input directory (runtime.drain.DrainSources, the same signal a drain sends): the query
first runs over the input, then, once it has read all of it, the sentinel is written and the
query runs once more on its checkpoint: that run reads only the sentinel, its watermark goes
to the end of time and Spark's next (no-data) micro-batch fires everything still pending.
"""

from __future__ import annotations

END_OF_INPUT = "__end_of_input"  # the key the DrainSources travel under in a frame's metrics


def ends_input(settings, plan) -> bool:
    """Whether a streaming run of ``plan`` needs the end-of-input run: bounded input run as a
    stream, with a watermark on a bounded source, and an operator whose results wait for
    the watermark (``waits_for_watermark``), or a sink that does (ON CONFLICT DO NOTHING / DO ERROR)."""
    from streamsql.plan.logical import build_operator_plan
    from streamsql.runtime.sources import is_bounded

    return settings.get("execution.bounded-input") == "stream" and any(
        is_bounded(t) and t.watermark is not None for t in plan.tables) and (plan.sink_waits or waits_for_watermark(
        build_operator_plan(plan, is_bounded, None)))


def waits_for_watermark(root) -> bool:
    """Whether an operator of the plan emits as the watermark passes (a window, an OVER, an
    interval, window or temporal join, MATCH_RECOGNIZE, a sort by time: timers), or is one
    the plan does not know. The others emit as rows come: their last micro-batch has given
    all their results, and an end-of-input run would only start the query once more."""
    from streamsql.plan.aggregate_operators import Deduplicate, GroupAggregate, Rank
    from streamsql.plan.join_operators import Join
    from streamsql.plan.operators import (
        Calc, ChangelogNormalize, Correlate, Limit, Scan, Sink, SortLimit, Union, Values, walk)

    untimed = (Scan, Values, Calc, Correlate, Union, Sink, ChangelogNormalize, GroupAggregate, Rank, Deduplicate,
               Join, SortLimit, Limit)
    return any(type(node) not in untimed for node in walk(root))  # exact types: WindowRank is a Rank


def discard_scratch(query, checkpoint: str | None = None) -> None:
    """Remove a finished statement's temporary directories: its end-of-input directory and
    ``checkpoint`` (a streaming SELECT's own). A query still running is stopped first."""
    import shutil

    if query is not None and query.isActive:
        query.stop()
    if isinstance(query, EndOfInput):
        query._ends.discard()
    if checkpoint is not None:
        shutil.rmtree(checkpoint, ignore_errors=True)


class EndOfInput:
    """A streaming query that, when it has read its bounded input, runs once more with the
    end-of-input sentinel. Stands in for the query (everything else is the current run's)."""

    def __init__(self, query, restart, ends):
        self.query = query
        self._restart = restart
        self._ends = ends
        self._earlier: list = []

    def awaitTermination(self, timeout=None):
        finished = self.query.awaitTermination(timeout) if timeout is not None else self.query.awaitTermination()
        if finished and not self._ends.released and self.query.exception() is None:
            self._earlier = list(self.query.recentProgress)
            self._ends.release()
            self.query = self._restart()
            return False
        return finished

    @property
    def recentProgress(self):
        return self._earlier + list(self.query.recentProgress)

    def __getattr__(self, name):
        return getattr(self.query, name)
