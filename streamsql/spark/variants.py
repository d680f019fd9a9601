"""Flink's VARIANT (Flink 2.1+) on Spark's own VARIANT type.

Both encode JSON the same way (objects' keys sorted, numbers as the smallest integer or a
decimal, ``1e3`` a DOUBLE), so PARSE_JSON, JSON_STRING and TO_JSON agree on every value.
What differs is translated here:

- ``v['key']`` and ``v[i]`` (1-based) read a field or an element (VARIANT_GET with a
  path; ``$[i-1]``). Absent, out of range, or of the other kind (a key into an array): NULL
  (Flink fails the query on the last).
- ``=`` and ``<>`` compare the values' JSON texts: Spark has no VARIANT equality (Flink
  compares the encodings, so ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` differ there).
- PARSE_JSON's ``allowDuplicateKeys = TRUE`` is refused: Spark reads that choice from a
  session setting, once per query, not per call.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.functions import FlinkCall
from streamsql.plan.typefamilies import family
from streamsql.spark.function_support import unsupported


def is_variant(node: exp.Expression | None) -> bool:
    return node is not None and node.type is not None and node.type.is_type(exp.DType.VARIANT)


def parse_json(self, e: FlinkCall, args: list[str]) -> str:
    """PARSE_JSON / TRY_PARSE_JSON(json [, allowDuplicateKeys]): a duplicate key fails
    PARSE_JSON and makes TRY_PARSE_JSON NULL, as Flink's default."""
    if len(e.expressions) > 1:
        allow = e.expressions[1]
        if not isinstance(allow, (exp.Boolean, exp.Null)):
            raise unsupported(e, "allowDuplicateKeys must be the literal TRUE or FALSE")
        if isinstance(allow, exp.Boolean) and allow.this:
            raise unsupported(e, "allowDuplicateKeys = TRUE is not supported: Spark's PARSE_JSON takes that "
                                 "choice from a session setting, not per call; a duplicate key fails PARSE_JSON "
                                 "(TRY_PARSE_JSON is NULL), as with FALSE")
    return f"{'TRY_PARSE_JSON' if e.name == 'TRY_PARSE_JSON' else 'PARSE_JSON'}({args[0]})"


def _quoted_key(key: str) -> str | None:
    """A path step for an object key, quoted with whichever quote it does not hold."""
    if "'" not in key:
        return f"['{key}']"
    if '"' not in key:
        return f'["{key}"]'
    return None


def bracket_sql(self, e: exp.Bracket) -> str:
    """``v[key]`` / ``v[i]`` on a VARIANT."""
    value, index = self.sql(e, "this"), e.expressions[0]
    if isinstance(index, exp.Literal):
        if index.is_string:
            step = _quoted_key(index.this)
            if step is None:
                raise unsupported(e, "a VARIANT key holding both ' and \" is not supported")
            path = exp.Literal.string(f"${step}").sql(dialect="spark")
        else:
            position = int(index.this)
            if position < 1:
                return "CAST(NULL AS VARIANT)"
            path = f"'$[{position - 1}]'"
        return f"VARIANT_GET({value}, {path}, 'variant')"
    key = self.sql(index)
    if family(index.type) == "numeric":
        path = f"CONCAT('$[', CAST({key} - 1 AS STRING), ']')"
        return f"CASE WHEN {key} >= 1 THEN VARIANT_GET({value}, {path}, 'variant') END"
    path = (f"CASE WHEN INSTR({key}, '''') = 0 THEN CONCAT('$[''', {key}, ''']')"
            f" WHEN INSTR({key}, '\"') = 0 THEN CONCAT('$[\"', {key}, '\"]') END")
    return f"VARIANT_GET({value}, {path}, 'variant')"


def comparison_sql(self, e: exp.EQ | exp.NEQ, default) -> str:
    """``=`` / ``<>`` of two VARIANTs: their JSON texts compared."""
    if not (is_variant(e.this) or is_variant(e.expression)):
        return default(self, e)
    operator = "=" if isinstance(e, exp.EQ) else "<>"
    return f"(TO_JSON({self.sql(e, 'this')}) {operator} TO_JSON({self.sql(e, 'expression')}))"


def as_json_text(node: exp.Expression, sql: str) -> str:
    """A JSON function's input: a VARIANT as its JSON text, a string as it is."""
    return f"TO_JSON({sql})" if is_variant(node) else sql


TEMPLATES = {"PARSE_JSON": parse_json, "TRY_PARSE_JSON": parse_json}
