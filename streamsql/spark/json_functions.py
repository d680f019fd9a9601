"""Flink's JSON functions as Spark SQL.

Values are encoded with Spark's TO_JSON and assembled as text, so JSON_OBJECT and
JSON_ARRAY nest (a JSON_OBJECT value is inserted as JSON, not as a string) and mix types
(`JSON_ARRAY(1, '2')` is `[1,"2"]`) as Flink's do. JSON_VALUE and JSON_EXISTS read through
Spark's VARIANT (TRY_PARSE_JSON): invalid JSON is NULL, a non-scalar JSON_VALUE is NULL.
Flink's 'lax'/'strict' path modes are dropped (Spark's paths are lax).
"""

from __future__ import annotations

import json

from sqlglot import exp

from streamsql.dialect.builtins import Default, options
from streamsql.dialect.functions import FlinkCall
from streamsql.spark import variants
from streamsql.spark.function_support import unsupported
from streamsql.spark.stateful.sequences import DUPLICATE_KEY


def _json_path(e: FlinkCall, path: exp.Expression, sql: str) -> str:
    """Flink's SQL/JSON path, without its 'lax'/'strict' mode (Spark's paths are lax)."""
    if isinstance(path, exp.Literal) and path.is_string:
        text = path.this.strip()
        for mode in ("lax ", "strict "):
            if text.lower().startswith(mode):
                text = text[len(mode):].strip()
        return exp.Literal.string(text).sql(dialect="spark")
    return f"REGEXP_REPLACE({sql}, '^\\\\s*(lax|strict)\\\\s+', '')"


def json_text(self, node: exp.Expression) -> str:
    """A value as JSON text (NULL for NULL); JSON built by JSON_OBJECT/JSON_ARRAY is kept as is."""
    if isinstance(node, exp.JSONObject) or (isinstance(node, FlinkCall) and node.name in ("JSON_ARRAY", "JSON_OBJECT")):
        return self.sql(node)
    if isinstance(node, exp.Null):
        return "CAST(NULL AS STRING)"
    value = self.sql(node)
    if variants.is_variant(node):
        return f"TO_JSON({value})"
    if node.type is not None and node.type.is_type(exp.DType.MAP):  # Flink writes a MAP's keys in order
        value = f"MAP_FROM_ENTRIES(ARRAY_SORT(MAP_ENTRIES({value})))"
    if node.type is not None and node.type.is_type(exp.DType.DOUBLE, exp.DType.FLOAT):
        return _number_text(f"CAST({value} AS STRING)")
    if node.type is not None and node.type.is_type(exp.DType.TIMESTAMP):
        return _timestamp_text(value)
    encoded = f"TO_JSON(NAMED_STRUCT('v', {value}))"
    return f"NULLIF(REGEXP_EXTRACT({encoded}, '^\\\\{{\"v\":(.*)\\\\}}$', 1), '')"


def _number_text(text: str) -> str:
    """A DOUBLE or FLOAT as Flink's JSON functions write it: Java's shortest text made a BigDecimal
    and written back (BigDecimal.toString): ``1.0E20`` is ``1.0E+20``, ``1.23456789E8``
    ``123456789``, ``1.0E-6`` ``0.0000010``; plain texts and exponents below -6 stay; -0.0 is 0.0."""
    parts = "'^(-?)([0-9])\\\\.([0-9]+)E(-?[0-9]+)$'"
    sign, digit, fraction = (f"REGEXP_EXTRACT({text}, {parts}, {i})" for i in (1, 2, 3))
    power = f"CAST(REGEXP_EXTRACT({text}, {parts}, 4) AS INT)"
    return (f"CASE WHEN {text} IS NULL THEN NULL WHEN {text} = '-0.0' THEN '0.0'"
            f" WHEN {text} NOT LIKE '%E%' OR {power} < -6 THEN {text}"
            f" WHEN {power} < 0 THEN CONCAT({sign}, '0.', REPEAT('0', -{power} - 1), {digit}, {fraction})"
            f" WHEN LENGTH({fraction}) >= {power} THEN CONCAT({sign}, {digit}, SUBSTRING({fraction}, 1, {power}),"
            f" IF(LENGTH({fraction}) > {power}, CONCAT('.', SUBSTRING({fraction}, {power} + 1)), ''))"
            f" ELSE CONCAT({sign}, {digit}, '.', {fraction}, 'E+', {power}) END")


def _timestamp_text(value: str) -> str:
    """A TIMESTAMP as Flink's JSON functions write it (Java's ISO_LOCAL_DATE_TIME): seconds
    always, the fraction without its trailing zeros, no zone: ``"2024-01-02T03:04:05.1"``."""
    text = f"DATE_FORMAT({value}, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS\")"
    return f"CONCAT('\"', REGEXP_REPLACE(REGEXP_REPLACE({text}, '0+$', ''), '\\\\.$', ''), '\"')"


# JSON_QUOTE's escapes (Flink's JsonQuoteFunction): these characters, then every one above
# U+007F as \\uXXXX; other control characters stay as they are.
_QUOTE_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}


def _json_quote(text: str) -> str:
    """Flink's JSON_QUOTE, character by character (code points: Spark's SPLIT by '' and ASCII)."""
    def literal(value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def hex4(code: str) -> str:
        return f"LPAD(LOWER(HEX({code})), 4, '0')"

    cases = " ".join(f"WHEN c = CHAR({ord(char)}) THEN {literal(escaped)}" for char, escaped in _QUOTE_ESCAPES.items())
    # a code point beyond U+FFFF as Flink 2.3 writes it: its own hex, then its low surrogate's
    high = f"CONCAT('\\\\u', LOWER(HEX(ASCII(c))), '\\\\u', {hex4('56320 + (ASCII(c) - 65536) % 1024')})"
    each = (f"c -> CASE {cases} WHEN ASCII(c) > 65535 THEN {high}"
            f" WHEN ASCII(c) > 127 THEN CONCAT('\\\\u', {hex4('ASCII(c)')}) ELSE c END")
    return f"CONCAT('\"', ARRAY_JOIN(TRANSFORM(SPLIT({text}, ''), {each}), ''), '\"')"


def json_object(self, e: exp.JSONObject) -> str:
    """Flink's JSON_OBJECT: its members ordered by key (Java's String order), a repeated key's
    last value kept (under ABSENT ON NULL its last value that is not NULL), as Flink's
    Jackson ObjectNode, sorted when written, gives them."""
    absent = (e.args.get("null_handling") or "").upper().startswith("ABSENT")
    pairs = [(pair.this, pair.expression) for pair in e.expressions]
    if not pairs:
        return "'{}'"
    if all(isinstance(key, exp.Literal) and key.is_string for key, _ in pairs):
        return _constant_keys(self, pairs, absent)
    members = [f"NAMED_STRUCT('k', CAST({self.sql(key)} AS STRING), 'm', {_member(self, key, value, absent)})"
               for key, value in pairs]
    kept = f"FILTER(ARRAY_SORT(ARRAY({', '.join(members)})), p -> p.m IS NOT NULL)"
    return f"CONCAT('{{', ARRAY_JOIN(TRANSFORM({kept}, p -> p.m), ','), '}}')"


def _constant_keys(self, pairs: list, absent: bool) -> str:
    values: dict[str, list[exp.Expression]] = {}
    for key, value in pairs:
        values.setdefault(key.this, []).append(value)
    members = []
    for key in sorted(values, key=lambda k: k.encode("utf-16-be")):
        texts = [json_text(self, v) for v in reversed(values[key])]
        text = texts[0] if not absent or len(texts) == 1 else f"COALESCE({', '.join(texts)})"
        key_sql = exp.Literal.string(json.dumps(key) + ":").sql(dialect="spark")
        members.append(f"CONCAT({key_sql}, {text if absent else f'COALESCE({text}, {chr(39)}null{chr(39)})'})")
    return f"CONCAT('{{', ARRAY_JOIN(ARRAY({', '.join(members)}), ','), '}}')"


def _member(self, key: exp.Expression, value: exp.Expression, absent: bool) -> str:
    text = json_text(self, value)
    member = f"CONCAT({json_text(self, key)}, ':', {text if absent else f'COALESCE({text}, {chr(39)}null{chr(39)})'})"
    return f"IF({text} IS NULL, NULL, {member})" if absent else member


def _json_array(self, e: FlinkCall, args: list[str]) -> str:
    on_null = options(e).get("null")
    keep_nulls = on_null is not None and on_null.name == "NULL"
    texts = [json_text(self, a) for a in e.expressions]
    if keep_nulls:
        texts = [f"COALESCE({t}, 'null')" for t in texts]
    if not texts:
        return "'[]'"
    return f"CONCAT('[', ARRAY_JOIN(ARRAY({', '.join(texts)}), ','), ']')"


def _json_arrayagg(self, e: FlinkCall, args: list[str]) -> str:
    on_null = options(e).get("null")
    text = json_text(self, e.expressions[0])
    if on_null is not None and on_null.name == "NULL":
        text = f"COALESCE({text}, 'null')"
    from streamsql.spark.functions import _collected  # (functions imports this module)

    # in the rows' read order where the query knows it (spark.arrival_order), as LISTAGG
    return f"CONCAT('[', ARRAY_JOIN({_collected(self, e, text)}, ','), ']')"


def _on(self, e: FlinkCall, kind: str, value: str) -> str:
    """The ON EMPTY / ON ERROR behaviour applied to ``value`` (NULL when empty or invalid)."""
    clause = options(e).get(kind)
    if clause is None or clause.name == "NULL":
        return value
    if isinstance(clause, Default):
        return f"COALESCE({value}, {self.sql(clause.this)})"
    if clause.name in ("EMPTY ARRAY", "EMPTY OBJECT"):
        return f"COALESCE({value}, '{'[]' if clause.name == 'EMPTY ARRAY' else '{}'}')"
    raise unsupported(e, f"{clause.name} ON {kind.upper()} is not supported (NULL, DEFAULT <value> and EMPTY ARRAY/OBJECT are)")


def _json_value(self, e: FlinkCall, args: list[str]) -> str:
    args = [variants.as_json_text(e.expressions[0], args[0]), *args[1:]]
    path = _json_path(e, e.expressions[1], args[1])
    value = f"TRY_VARIANT_GET(TRY_PARSE_JSON({args[0]}), {path}, 'variant')"
    scalar = f"CASE WHEN SCHEMA_OF_VARIANT({value}) RLIKE '^(OBJECT|ARRAY)' THEN NULL ELSE TRY_VARIANT_GET({value}, '$', 'string') END"
    returning = e.args.get("returning")
    if returning is not None:
        scalar = f"TRY_CAST({scalar} AS {self.sql(returning)})"
    empty, error = options(e).get("empty"), options(e).get("error")
    if isinstance(empty, Default) or isinstance(error, Default):
        default = (empty if isinstance(empty, Default) else error).this
        return f"COALESCE({scalar}, {self.sql(default)})"
    return _on(self, e, "error", _on(self, e, "empty", scalar))


def _json_query(self, e: FlinkCall, args: list[str]) -> str:
    args = [variants.as_json_text(e.expressions[0], args[0]), *args[1:]]
    returning = e.args.get("returning")
    if returning is not None and returning.this not in (exp.DType.TEXT, exp.DType.VARCHAR):
        raise unsupported(e, f"RETURNING {self.sql(returning)} is not supported (the result is a STRING)")
    path = _json_path(e, e.expressions[1], args[1])
    value = f"GET_JSON_OBJECT({args[0]}, {path})"
    wrapper = options(e).get("wrapper")
    structured = f"({value} RLIKE '^\\\\s*[\\\\[{{]' AND TRY_PARSE_JSON({value}) IS NOT NULL)"
    text = f"TO_JSON(TRY_PARSE_JSON({value}))"
    scalar_json = f"TO_JSON(TRY_VARIANT_GET(TRY_PARSE_JSON({args[0]}), {path}, 'variant'))"
    if wrapper is None or wrapper.name == "WITHOUT":
        result = f"CASE WHEN {structured} THEN {text} END"
    elif wrapper.name == "CONDITIONAL":
        result = f"CASE WHEN {value} RLIKE '^\\\\s*\\\\[' THEN {text} WHEN {value} IS NOT NULL THEN CONCAT('[', COALESCE({scalar_json}, {text}), ']') END"
    else:
        result = f"CASE WHEN {value} IS NOT NULL THEN CONCAT('[', COALESCE({scalar_json}, {text}), ']') END"
    return _on(self, e, "error", _on(self, e, "empty", result))


def _json_exists(self, e: FlinkCall, args: list[str]) -> str:
    args = [variants.as_json_text(e.expressions[0], args[0]), *args[1:]]
    on_error = options(e).get("error")
    if on_error is not None and on_error.name != "FALSE":
        raise unsupported(e, f"{on_error.name} ON ERROR is not supported (paths are lax: a missing path is FALSE)")
    path = _json_path(e, e.expressions[1], args[1])
    exists = f"(TRY_VARIANT_GET(TRY_PARSE_JSON({args[0]}), {path}, 'variant') IS NOT NULL)"
    return f"CASE WHEN {args[0]} IS NULL THEN NULL ELSE COALESCE({exists}, FALSE) END"


def is_sql(self, e: exp.Is) -> str:
    """``x IS JSON [VALUE|SCALAR|ARRAY|OBJECT]``: FALSE for NULL or invalid JSON (Flink)."""
    if not isinstance(e.expression, exp.JSON):
        return f"{self.sql(e, 'this')} IS {self.sql(e, 'expression')}"
    kind = (e.expression.name or "VALUE").upper()
    parsed = f"TRY_PARSE_JSON({self.sql(e, 'this')})"
    check = {"VALUE": f"{parsed} IS NOT NULL",
             "SCALAR": f"NOT SCHEMA_OF_VARIANT({parsed}) RLIKE '^(OBJECT|ARRAY)'",
             "ARRAY": f"SCHEMA_OF_VARIANT({parsed}) LIKE 'ARRAY%'",
             "OBJECT": f"SCHEMA_OF_VARIANT({parsed}) LIKE 'OBJECT%'"}[kind]
    return f"COALESCE({check}, FALSE)"


def json_objectagg_sql(self, e: exp.JSONObjectAgg) -> str:
    """Flink's JSON_OBJECTAGG: members ordered by key; a repeated key fails the query, whether or
    not its value is NULL, in Flink's words, naming the first key seen twice."""
    pair = e.expressions[0]
    key = self.sql(pair.this)
    pairs = f"COLLECT_LIST(IF({key} IS NULL, NULL, NAMED_STRUCT('k', CAST({key} AS STRING), 'm', {json_member(self, e)})))"
    keys = f"TRANSFORM({pairs}, p -> p.k)"
    repeated = f"ELEMENT_AT(FILTER(TRANSFORM({keys}, (k, i) -> IF(ARRAY_POSITION({keys}, k) <= i, k, NULL)), k -> k IS NOT NULL), 1)"
    message = f"CONCAT('Key ''', {repeated}, '''{DUPLICATE_KEY}')"
    joined = f"CONCAT('{{', ARRAY_JOIN(TRANSFORM(ARRAY_SORT({pairs}), p -> p.m), ','), '}}')"
    return f"CASE WHEN SIZE(ARRAY_DISTINCT({keys})) < SIZE({keys}) THEN RAISE_ERROR({message}) ELSE {joined} END"


def json_member(self, e: exp.JSONObjectAgg) -> str:
    """One JSON_OBJECTAGG member as text, ``"key":value``; NULL for a NULL value under ABSENT ON NULL."""
    pair = e.expressions[0]
    absent = (e.args.get("null_handling") or "").upper().startswith("ABSENT")
    value = json_text(self, pair.expression)
    member = f"CONCAT({json_text(self, pair.this)}, ':', {value if absent else f'COALESCE({value}, {chr(39)}null{chr(39)})'})"
    return f"IF({value} IS NULL, NULL, {member})" if absent else member


TEMPLATES = {
    "JSON_VALUE": _json_value,
    "JSON_QUERY": _json_query,
    "JSON_EXISTS": _json_exists,
    "JSON_STRING": lambda self, e, a: json_text(self, e.expressions[0]),
    "JSON_ARRAY": _json_array,
    "JSON_ARRAYAGG": _json_arrayagg,
    "JSON_QUOTE": lambda self, e, a: _json_quote(f"CAST({a[0]} AS STRING)"),
    "JSON_UNQUOTE": lambda self, e, a: (f"CASE WHEN {a[0]} RLIKE '^\".*\"$' THEN COALESCE(FROM_JSON(CONCAT('{{\"v\":', {a[0]}, '}}'),"
                                        f" 'v STRING').v, {a[0]}) ELSE {a[0]} END"),
}
