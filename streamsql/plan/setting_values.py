"""SET values checked when the script is planned: a bad value names the key and the value."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from streamsql.errors import Position, ValidationError
from streamsql.plan.durations import DURATION_HELP, parse_duration

CHOICES = {
    "execution.runtime-mode": ("streaming", "batch"),
    "sql-client.execution.result-mode": ("table", "changelog", "tableau"),
    "sql-client.verbose": ("true", "false"),
    "execution.bounded-input": ("auto", "stream"),
    "execution.trigger": ("micro-batch", "real-time"),  # spark.real_time
    "table.exec.sink.require-on-conflict": ("true", "false"),  # plan.sink_materialize
    "table.exec.sink.upsert-materialize": ("auto", "none", "force"),
}


def check_setting(key: str, value: str, position: Position | None = None) -> None:
    """Flink keys whose values streamsql uses: a ValidationError when the value is not one."""
    choices = CHOICES.get(key)
    if choices and value.lower() not in choices:
        raise ValidationError(f"'{key}' must be one of {', '.join(choices)}, not '{value}'", position)
    if key == "execution.checkpointing.interval" and not parse_duration(value):
        raise ValidationError(f"'{key}' must be {DURATION_HELP}, more than 0, not '{value}'", position)
    if key == "table.exec.source.idle-timeout" and parse_duration(value) is None:
        raise ValidationError(f"'{key}' must be {DURATION_HELP} (0: no partition is ever idle), not '{value}'", position)
    if key == "parallelism.default" and not (value.strip().isdigit() and int(value) > 0):
        raise ValidationError(f"'{key}' must be a positive integer, not '{value}'", position)
    if key == "table.local-time-zone" and not _is_zone(value):
        raise ValidationError(
            f"'{key}' must be a time zone id such as 'UTC', 'Europe/Berlin' or 'America/Los_Angeles', not '{value}'",
            position,
        )


# Java's ZoneId.SHORT_IDS, which Flink (and Spark) accept besides region ids and offsets.
_SHORT_IDS = {"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT", "EAT", "ECT", "EST",
              "HST", "IET", "IST", "JST", "MIT", "MST", "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST"}
_OFFSET = re.compile(r"^(?:GMT|UTC|UT)?[+-](?:0?\d|1[0-8])(?::?[0-5]\d)?$|^Z$")


def _is_zone(value: str) -> bool:
    """A region id ('Europe/Berlin', via zoneinfo), a short id ('PST') or an offset ('GMT-08:00')."""
    if value in _SHORT_IDS or _OFFSET.match(value):
        return True
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
