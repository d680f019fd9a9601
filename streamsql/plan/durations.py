"""Flink's duration syntax for option and SET values: '1s', '500 ms', '2 min', '1h', '10'.

Flink (TimeUtils.parseDuration) takes a number and an optional unit; no unit means
milliseconds. Spark's interval strings ('1 second') are accepted too, since the README
documented them before. The value is checked when a table is defined or a key is SET,
so a bad one is an error naming the option before Spark starts.
"""

from __future__ import annotations

import re

_UNITS_MS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "µs": 1e-3, "us": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration(text: str) -> int | None:
    """Milliseconds for a Flink duration string; None when it is not one."""
    match = _DURATION.match(text or "")
    if not match:
        return None
    unit = match.group(2).lower() or "ms"
    if unit not in _UNITS_MS:
        return None
    return int(round(float(match.group(1)) * _UNITS_MS[unit]))


def spark_interval(text: str) -> str:
    """A duration as Spark's trigger and watermark take it ('1500 milliseconds')."""
    millis = parse_duration(text)
    if millis is None:
        raise ValueError(f"not a duration: {text!r}")
    return f"{millis} milliseconds"


DURATION_HELP = "a duration such as '1s', '500 ms', '2 min' or '1 h' (a bare number is milliseconds)"
