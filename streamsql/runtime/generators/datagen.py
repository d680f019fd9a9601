"""Flink's 'datagen' connector: random or sequence values per column, vectorised.

Options (Flink's names): ``rows-per-second`` (default 10000), ``number-of-rows`` (makes
the source bounded), and per field ``fields.<name>.kind`` = ``random`` | ``sequence``,
``.min`` / ``.max`` (random numbers), ``.max-past`` (random timestamps: up to that long
before now), ``.length`` (random strings, default 100), ``.start`` / ``.end``
(sequences; a sequence that ends bounds the source), ``.null-rate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamsql.plan.durations import parse_duration
from streamsql.runtime.generators.chunks import CHUNK, chunk_rng, in_chunks, strings_from_lengths

DEFAULT_RATE = 10_000
DEFAULT_STRING_LENGTH = 100
HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
INTEGER_RANGES = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type_name: str  # Spark's simpleString: 'int', 'bigint', 'string', 'timestamp', 'decimal(10,2)', ...
    arrow_type: object
    kind: str = "random"
    minimum: float | None = None
    maximum: float | None = None
    length: int = DEFAULT_STRING_LENGTH
    start: int = 0
    end: int | None = None
    max_past_ms: int = 0
    null_rate: float = 0.0


@dataclass(frozen=True)
class DatagenSpec:
    fields: tuple[FieldSpec, ...]
    total: int | None  # None: unbounded
    rows_per_second: float | None
    seed: int = 0

    @classmethod
    def from_options(cls, options: dict, schema) -> "DatagenSpec":
        from pyspark.sql.pandas.types import to_arrow_type

        fields = []
        for field in schema.fields:
            def option(key, default=None, name=field.name):
                return options.get(f"fields.{name}.{key}".lower(), default)

            kind = option("kind", "random")
            fields.append(FieldSpec(
                name=field.name, type_name=field.dataType.simpleString(), arrow_type=to_arrow_type(field.dataType, timezone="UTC"),
                kind=kind, minimum=_float(option("min")), maximum=_float(option("max")),
                length=int(option("length", DEFAULT_STRING_LENGTH)), start=int(option("start", 0)),
                end=None if option("end") is None else int(option("end")),
                max_past_ms=_duration_ms(option("max-past", "0")), null_rate=float(option("null-rate", 0)),
            ))
        totals = [f.end - f.start + 1 for f in fields if f.kind == "sequence" and f.end is not None]
        if options.get("number-of-rows") is not None:
            totals.append(int(options["number-of-rows"]))
        rate = options.get("rows-per-second", DEFAULT_RATE)
        return cls(tuple(fields), min(totals) if totals else None, float(rate), int(options.get("seed", 0)))


def generate(spec: DatagenSpec, start: int, end: int):
    """Record batches of rows ``start`` (inclusive) to ``end`` (exclusive)."""
    return in_chunks(start, end, lambda chunk: _chunk(spec, chunk))


def _chunk(spec: DatagenSpec, chunk: int) -> pa.RecordBatch:
    rng = chunk_rng(spec.seed, chunk)
    numbers = np.arange(chunk * CHUNK, (chunk + 1) * CHUNK, dtype=np.int64)
    arrays = [_column(field, rng, numbers) for field in spec.fields]
    return pa.RecordBatch.from_arrays(arrays, names=[f.name for f in spec.fields])


def _column(field: FieldSpec, rng, numbers: np.ndarray) -> pa.Array:
    """One column for a chunk; every field draws from the chunk's generator in order, so a
    row's values depend only on its number."""
    n = len(numbers)
    nulls = rng.random(n) < field.null_rate if field.null_rate > 0 else None
    if field.kind == "sequence":
        values = field.start + numbers
        if field.type_name == "string":
            return pa.array(values.astype(str), mask=nulls)
        return pa.array(values, mask=nulls).cast(field.arrow_type)
    kind = field.type_name
    if kind in INTEGER_RANGES:
        bits = INTEGER_RANGES[kind]
        low = int(field.minimum) if field.minimum is not None else -(1 << (bits - 1))
        high = int(field.maximum) if field.maximum is not None else (1 << (bits - 1)) - 1
        return pa.array(rng.integers(low, high, n, endpoint=True), mask=nulls).cast(field.arrow_type)
    if kind in ("float", "double") or kind.startswith("decimal"):
        low = field.minimum if field.minimum is not None else 0.0
        high = field.maximum if field.maximum is not None else (1e6 if kind.startswith("decimal") else 1.0)
        values = pa.array(rng.uniform(low, high, n), mask=nulls)
        return values.cast(field.arrow_type, safe=False)
    if kind == "boolean":
        return pa.array(rng.integers(0, 2, n).astype(bool), mask=nulls)
    if kind == "string":
        strings = strings_from_lengths(HEX[rng.integers(0, 16, n * field.length)], np.full(n, field.length))
        return strings if nulls is None else pc.if_else(pa.array(nulls), pa.scalar(None, pa.string()), strings)
    if kind in ("timestamp", "timestamp_ntz", "date"):
        import time

        now_ms = int(time.time() * 1000)
        past = (rng.random(n) * field.max_past_ms).astype(np.int64)
        micros = pa.array((now_ms - past) * 1000, mask=nulls).cast(pa.timestamp("us"))
        if kind == "date":
            return micros.cast(pa.date32())
        return micros.cast(field.arrow_type)
    raise ValueError(f"datagen cannot generate {kind} values (column '{field.name}')")


def _float(text):
    return None if text is None else float(text)


def _duration_ms(text: str) -> int:
    """Flink durations ('5000' is ms, '10 s', '5 min', '1 h'), checked by plan.option_values."""
    millis = parse_duration(text)
    if millis is None:
        raise ValueError(f"not a duration: '{text}'")
    return millis
