"""A job's state directory (runtime.jobstate) without Spark: what is resumed and what is refused."""

from __future__ import annotations

import json

import pytest

from streamsql.errors import JobStateError
from streamsql.plan.objects import ObjectName, TableDef
from streamsql.runtime.jobstate import STATE_LAYOUT, STREAMING, JobState


def job(tmp_path) -> JobState:
    table = TableDef(ObjectName("default_database", "totals"), [], {"connector": "jdbc"})
    return JobState.of(tmp_path / "state", "insert-into-totals", table, "f00d", STREAMING)


def saved_as(state: JobState, layout: int | None) -> None:
    """The job's record as a streamsql of ``layout`` wrote it (None: before layouts were recorded)."""
    record = json.loads((state.directory / "job.json").read_text())
    if layout is None:
        del record["state_layout"]
    else:
        record["state_layout"] = layout
    (state.directory / "job.json").write_text(json.dumps(record))


def with_operator_state(state: JobState) -> None:
    (state.directory / "checkpoint" / "state" / "0").mkdir(parents=True)


def test_a_checkpoint_with_state_in_an_older_layout_is_not_resumed(tmp_path):
    state = job(tmp_path)
    state.save()
    record = json.loads((state.directory / "job.json").read_text())
    assert record["state_layout"] == STATE_LAYOUT
    state.check()  # the same layout: resumed
    saved_as(state, None)  # as streamsql wrote it before generations
    state.check()  # no operator state yet: nothing to lose
    with_operator_state(state)
    with pytest.raises(JobStateError) as error:
        state.check()
    message = error.value.message
    assert "laid out their state another way" in message and "would start empty" in message
    assert str(state.directory) in message and "STOP JOB" in message


RETIRING = "drops once the watermark has passed it"
OVER = "OVER operator kept each bucket's history in one value"
ARGMAX = "joined a window aggregate with its own maximum per window"
TEMPORAL = "temporal join kept each bucket's versions in one value"
ORDERED = "without the rows' read order"


@pytest.mark.parametrize("layout, concern, words", [(4, "retiring", RETIRING), (4, "over", OVER), (5, "over", OVER),
                                                    (6, "over", OVER), (4, "argmax", ARGMAX), (7, "argmax", ARGMAX),
                                                    (4, "temporal", TEMPORAL), (8, "temporal", TEMPORAL),
                                                    (4, "ordered", ORDERED), (9, "ordered", ORDERED)])
def test_a_job_of_an_earlier_layout_resumes_unless_an_operator_of_it_changed_its_state(tmp_path, layout, concern,
                                                                                       words):
    """Layout 4 kept a regular join's every row in an operator without event time; Spark
    refuses to switch a checkpointed operator to event time, so a job whose join now lets the
    watermark retire a side's rows is refused, in streamsql's words. Before layout 7 OVER
    kept a bucket's whole history in one value, which the operator no longer reads. Before
    layout 8 a window aggregate joined with its own maximum per window ran as a join, which
    is now a window Top-N. Before layout 9 the temporal join kept a bucket's versions in one
    value, now in generations by key. Before layout 10 a window aggregate's LISTAGG,
    ARRAY_AGG, FIRST_VALUE and LAST_VALUE collected values without their read order. Any
    other job resumes, and so does one with no operator state yet."""
    state = job(tmp_path)
    state.save()
    saved_as(state, layout)
    state.check(**{concern: True})  # no operator state yet: nothing to lose
    with_operator_state(state)
    state.check()
    with pytest.raises(JobStateError) as error:
        state.check(**{concern: True})
    message = error.value.message
    assert words in message and "STOP JOB" in message
    saved_as(state, STATE_LAYOUT)
    state.check(retiring=True, over=True, argmax=True, temporal=True, ordered=True)


def test_a_job_of_layout_5_resumes_and_a_later_layout_is_refused(tmp_path):
    """Layout 5's generations hold no stale rows: read as layout 6's, they resume (a join
    the watermark retires included; no OVER). A layout this streamsql does not know is refused."""
    state = job(tmp_path)
    state.save()
    with_operator_state(state)
    saved_as(state, 5)
    state.check(retiring=True)
    saved_as(state, 7)  # layout 7's OVER generations are layout 8's
    state.check(retiring=True, over=True)
    saved_as(state, 8)  # layout 8's ranked argmax join is layout 9's
    state.check(retiring=True, over=True, argmax=True)
    saved_as(state, 9)  # layout 9's temporal join is layout 10's
    state.check(retiring=True, over=True, argmax=True, temporal=True)
    saved_as(state, STATE_LAYOUT + 1)
    with pytest.raises(JobStateError, match="by a later streamsql whose stateful operators laid out"):
        state.check()
