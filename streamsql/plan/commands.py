"""Statements sqlglot leaves as commands or SET items: STOP JOB, RESET, SET 'k' = 'v'."""

from __future__ import annotations

import re

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.key_values import string_pair
from streamsql.plan.positions import start_position
from streamsql.plan.setting_values import check_setting
from streamsql.plan.steps import SetStep, StopJobStep


def command_text(node: exp.Command) -> str:
    """What follows a command's keyword, as written."""
    rest = node.expression
    return "" if rest is None else rest if isinstance(rest, str) else rest.name


def stop_job(node: exp.Command) -> StopJobStep:
    """STOP JOB 'id' [WITH SAVEPOINT] [WITH DRAIN]."""
    text = command_text(node)
    match = re.fullmatch(r"\s*JOB\s+'([^']+)'((?:\s+WITH\s+(?:SAVEPOINT|DRAIN))*)\s*", text, re.IGNORECASE)
    if not match:
        raise ValidationError("Expected STOP JOB 'job id' [WITH SAVEPOINT] [WITH DRAIN]")
    options = match.group(2).upper()
    return StopJobStep(match.group(1), "SAVEPOINT" in options, "DRAIN" in options)


SET_FORM = "SET 'key' = 'value'"


def set_step(node: exp.Set) -> SetStep:
    item = node.expressions[0] if node.expressions else None
    if item is None:
        return SetStep(None, None)
    assignment = item.this
    if not isinstance(assignment, exp.EQ):
        raise ValidationError(f"Expected {SET_FORM}, got: {node.sql()}", start_position(assignment))
    key, value = string_pair(assignment.this, assignment.expression, SET_FORM, assignment)
    check_setting(key, value, start_position(assignment.expression))
    return SetStep(key, value)

