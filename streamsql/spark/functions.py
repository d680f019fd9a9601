"""Flink built-in functions as Spark SQL with Flink's semantics.

Spark runs in ANSI mode with the session time zone pinned to UTC, so: parsing a bad
string or indexing past an array's end would fail the query where Flink returns NULL
(hence TRY_TO_TIMESTAMP, TRY_ELEMENT_AT); Flink's GREATEST/LEAST are NULL when any
argument is; LPAD/RPAD are NULL for a negative length or an empty pad; INITCAP starts
a word after any non-alphanumeric character; JSON values are encoded with Spark's
TO_JSON and assembled as text, so JSON_OBJECT/JSON_ARRAY nest and mix types as Flink's do.
"""

from __future__ import annotations

import json

from sqlglot import exp

from streamsql.dialect.builtins import Default, options
from streamsql.dialect.functions import FlinkCall
from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position

DEFAULT_DATETIME = "'yyyy-MM-dd HH:mm:ss'"
_DATE_UNITS = {"DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}


_NAMES = {"flinkdateformat": "DATE_FORMAT", "similarto": "SIMILAR TO", "currenttime": "CURRENT_TIME"}


def _unsupported(e: exp.Expression, why: str) -> ValidationError:
    return ValidationError(f"{_name(e)}: {why}", start_position(e))


def _name(e: exp.Expression) -> str:
    return e.name if isinstance(e, FlinkCall) else _NAMES.get(e.key, e.key.upper())


def _null_if_any_null(args: list[str], sql: str) -> str:
    return f"CASE WHEN {' OR '.join(f'{a} IS NULL' for a in args)} THEN NULL ELSE {sql} END"


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
    encoded = f"TO_JSON(NAMED_STRUCT('v', {self.sql(node)}))"
    return f"NULLIF(REGEXP_EXTRACT({encoded}, '^\\\\{{\"v\":(.*)\\\\}}$', 1), '')"


def json_object(self, e: exp.JSONObject) -> str:
    absent = (e.args.get("null_handling") or "").upper().startswith("ABSENT")
    members = []
    for pair in e.expressions:
        key, value = pair.this, pair.expression
        key_sql = exp.Literal.string(json.dumps(key.this) + ":").sql(dialect="spark") if isinstance(key, exp.Literal) \
            else f"CONCAT({json_text(self, key)}, ':')"
        text = json_text(self, value)
        members.append(f"CONCAT({key_sql}, {text if absent else f'COALESCE({text}, {chr(39)}null{chr(39)})'})")
    return f"CONCAT('{{', ARRAY_JOIN(ARRAY({', '.join(members)}), ','), '}}')" if members else "'{}'"


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
    return f"CONCAT('[', ARRAY_JOIN(COLLECT_LIST({text}), ','), ']')"


def _on(self, e: FlinkCall, kind: str, value: str) -> str:
    """The ON EMPTY / ON ERROR behaviour applied to ``value`` (NULL when empty or invalid)."""
    clause = options(e).get(kind)
    if clause is None or clause.name == "NULL":
        return value
    if isinstance(clause, Default):
        return f"COALESCE({value}, {self.sql(clause.this)})"
    if clause.name in ("EMPTY ARRAY", "EMPTY OBJECT"):
        return f"COALESCE({value}, '{'[]' if clause.name == 'EMPTY ARRAY' else '{}'}')"
    raise _unsupported(e, f"{clause.name} ON {kind.upper()} is not supported (NULL, DEFAULT <value> and EMPTY ARRAY/OBJECT are)")


def _json_value(self, e: FlinkCall, args: list[str]) -> str:
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
    path = _json_path(e, e.expressions[1], args[1])
    exists = f"(TRY_VARIANT_GET(TRY_PARSE_JSON({args[0]}), {path}, 'variant') IS NOT NULL)"
    return f"CASE WHEN {args[0]} IS NULL THEN NULL ELSE COALESCE({exists}, FALSE) END"


DIFF_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


def _diff_unit(e: FlinkCall) -> str:
    """TIMESTAMPDIFF/TIMESTAMPADD's unit (SQL_TSI_DAY is DAY); refused when Spark has none."""
    unit = e.expressions[0].name.upper()
    unit = unit[len("SQL_TSI_"):] if unit.startswith("SQL_TSI_") else unit
    unit = {"FRAC_SECOND": "MICROSECOND"}.get(unit, unit)
    if unit not in DIFF_UNITS:
        raise _unsupported(e, f"unit {e.expressions[0].name} is not supported (units: {', '.join(DIFF_UNITS)})")
    return unit


def _timestampdiff(self, e: FlinkCall, args: list[str]) -> str:
    return f"CAST(TIMESTAMPDIFF({_diff_unit(e)}, {args[1]}, {args[2]}) AS INT)"


def _timestampadd(self, e: FlinkCall, args: list[str]) -> str:
    unit = _diff_unit(e)
    sql = f"TIMESTAMPADD({unit}, {args[1]}, {args[2]})"
    moved = e.expressions[2].type
    if moved is not None and moved.this == exp.DType.DATE and unit in _DATE_UNITS:
        return f"CAST({sql} AS DATE)"
    return sql


def _to_timestamp_ltz(self, e: FlinkCall, args: list[str]) -> str:
    precision = e.expressions[1] if len(e.expressions) > 1 else exp.Literal.number(3)
    if not (isinstance(precision, exp.Literal) and precision.this in ("0", "3")):
        raise _unsupported(e, "the precision must be the literal 0 (epoch seconds) or 3 (epoch milliseconds)")
    return f"{'TIMESTAMP_SECONDS' if precision.this == '0' else 'TIMESTAMP_MILLIS'}({args[0]})"


def _unix_timestamp(self, e: FlinkCall, args: list[str]) -> str:
    if not args:
        return "UNIX_TIMESTAMP()"
    parsed = f"TRY_TO_TIMESTAMP({args[0]}, {args[1]})" if len(args) > 1 else f"TRY_TO_TIMESTAMP({args[0]})"
    return f"CASE WHEN {args[0]} IS NULL THEN NULL ELSE COALESCE(UNIX_SECONDS({parsed}), -9223372036854775808) END"


def _pad(function: str):
    def pad(self, e: FlinkCall, args: list[str]) -> str:
        return f"CASE WHEN {args[1]} < 0 OR {args[2]} = '' THEN NULL ELSE {function}({', '.join(args)}) END"
    return pad


def _initcap(self, e: FlinkCall, args: list[str]) -> str:
    s = args[0]
    word_start = f"(i = 1 OR NOT SUBSTRING({s}, i - 1, 1) RLIKE '[\\\\p{{L}}\\\\p{{Nd}}]')"
    chars = f"TRANSFORM(SEQUENCE(1, LENGTH({s})), i -> IF({word_start}, UPPER(SUBSTRING({s}, i, 1)), LOWER(SUBSTRING({s}, i, 1))))"
    return f"CASE WHEN {s} = '' THEN '' ELSE ARRAY_JOIN({chars}, '') END"


def _element(self, e: FlinkCall, args: list[str]) -> str:
    a = args[0]
    return (f"CASE WHEN SIZE({a}) = 0 THEN NULL WHEN SIZE({a}) = 1 THEN {a}[0] "
            f"ELSE RAISE_ERROR('ELEMENT: the array has more than one element') END")


def _truncate(self, e: FlinkCall, args: list[str]) -> str:
    digits = args[1] if len(args) > 1 else "0"
    value_type = e.expressions[0].type
    if value_type is not None and value_type.this in (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT):
        return args[0] if digits == "0" else f"CAST(IF({args[0]} >= 0, FLOOR({args[0]}, {digits}), CEIL({args[0]}, {digits})) AS {self.sql(value_type)})"
    truncated = f"IF({args[0]} >= 0, FLOOR({args[0]}, {digits}), CEIL({args[0]}, {digits}))"
    return f"CAST({truncated} AS {self.sql(value_type)})" if value_type is not None and value_type.this != exp.DType.UNKNOWN else truncated


def _sign(self, e: FlinkCall, args: list[str]) -> str:
    value_type = e.expressions[0].type
    cast_to = self.sql(value_type) if value_type is not None and value_type.this != exp.DType.UNKNOWN else "DOUBLE"
    return f"CAST(SIGN({args[0]}) AS {cast_to})"


def _typeof(self, e: FlinkCall, args: list[str]) -> str:
    from streamsql.plan.types import type_name

    data_type = e.expressions[0].type
    name = type_name(data_type) if data_type is not None else "NULL"
    name = {"INT": "INT", "TEXT": "STRING", "VARCHAR": "STRING"}.get(name, name)
    return exp.Literal.string(name).sql(dialect="spark")


def _listagg(self, e: FlinkCall, args: list[str]) -> str:
    separator = args[1] if len(args) > 1 else "','"
    return f"IF(COUNT({args[0]}) = 0, NULL, ARRAY_JOIN(COLLECT_LIST({args[0]}), {separator}))"


def _first_last(function: str):
    def first_last(self, e: FlinkCall, args: list[str]) -> str:
        return f"{function}({args[0]}, TRUE)"  # Flink's FIRST_VALUE/LAST_VALUE skip NULLs
    return first_last


def _current_database(self, e: FlinkCall, args: list[str]) -> str:
    return exp.Literal.string(e.meta.get("database", "default_database")).sql(dialect="spark")


TEMPLATES = {
    "TIMESTAMPDIFF": _timestampdiff,
    "TIMESTAMPADD": _timestampadd,
    "TO_TIMESTAMP": lambda self, e, a: f"TRY_TO_TIMESTAMP({', '.join(a)})",
    "TO_DATE": lambda self, e, a: f"CAST(TRY_TO_TIMESTAMP({a[0]}, {a[1]}) AS DATE)" if len(a) > 1 else f"TRY_CAST({a[0]} AS DATE)",
    "UNIX_TIMESTAMP": _unix_timestamp,
    "FROM_UNIXTIME": lambda self, e, a: f"FROM_UNIXTIME({a[0]}, {a[1] if len(a) > 1 else DEFAULT_DATETIME})",
    "CONVERT_TZ": lambda self, e, a: (f"DATE_FORMAT(FROM_UTC_TIMESTAMP(TO_UTC_TIMESTAMP(TRY_TO_TIMESTAMP({a[0]}), {a[1]}), {a[2]}),"
                                      f" {DEFAULT_DATETIME})"),
    "TO_TIMESTAMP_LTZ": _to_timestamp_ltz,
    "NOW": lambda self, e, a: "CURRENT_TIMESTAMP()",
    "CURRENT_ROW_TIMESTAMP": lambda self, e, a: "CURRENT_TIMESTAMP()",
    "LOCALTIMESTAMP": lambda self, e, a: "CURRENT_TIMESTAMP()",
    "LOCALTIME": lambda self, e, a: _no_time(e),
    "ARRAY_REVERSE": lambda self, e, a: f"REVERSE({a[0]})",
    "ARRAY_SORT": lambda self, e, a: _array_sort(a),
    "JSON_VALUE": _json_value,
    "JSON_QUERY": _json_query,
    "JSON_EXISTS": _json_exists,
    "JSON_STRING": lambda self, e, a: json_text(self, e.expressions[0]),
    "JSON_ARRAY": _json_array,
    "JSON_ARRAYAGG": _json_arrayagg,
    "JSON_QUOTE": lambda self, e, a: json_text(self, exp.cast(e.expressions[0], "STRING")),
    "JSON_UNQUOTE": lambda self, e, a: (f"CASE WHEN {a[0]} RLIKE '^\".*\"$' THEN COALESCE(FROM_JSON(CONCAT('{{\"v\":', {a[0]}, '}}'),"
                                        f" 'v STRING').v, {a[0]}) ELSE {a[0]} END"),
    "CARDINALITY": lambda self, e, a: f"SIZE({a[0]})",
    "ELEMENT": _element,
    "MAP_ENTRIES": lambda self, e, a: f"MAP_ENTRIES({a[0]})",
    "MAP_VALUES": lambda self, e, a: f"MAP_VALUES({a[0]})",
    "MAP_FROM_ARRAYS": lambda self, e, a: f"MAP_FROM_ARRAYS({a[0]}, {a[1]})",
    "ROW": lambda self, e, a: "NAMED_STRUCT(" + ", ".join(f"'EXPR${i}', {x}" for i, x in enumerate(a)) + ")",
    "MAP": lambda self, e, a: f"MAP({', '.join(a)})",
    "MAP_UNION": lambda self, e, a: _map_union(a),
    "ARRAY_UNION": lambda self, e, a: f"ARRAY_UNION({a[0]}, {a[1]})",
    "RAND_INTEGER": lambda self, e, a: (f"CAST(FLOOR(RAND() * {a[0]}) AS INT)" if len(a) == 1
                                        else f"CAST(FLOOR(RAND({a[0]}) * {a[1]}) AS INT)"),
    "BIN": lambda self, e, a: f"BIN({a[0]})",
    "PRINTF": lambda self, e, a: f"PRINTF({', '.join(a)})",
    "BTRIM": lambda self, e, a: f"BTRIM({', '.join(a)})",
    "URL_DECODE": lambda self, e, a: f"TRY_URL_DECODE({a[0]})",
    "URL_ENCODE": lambda self, e, a: f"URL_ENCODE({a[0]})",
    "IS_ALPHA": lambda self, e, a: f"COALESCE({a[0]} RLIKE '^\\\\p{{L}}+$', FALSE)",
    "IS_DIGIT": lambda self, e, a: f"COALESCE({a[0]} RLIKE '^\\\\p{{Nd}}+$', FALSE)",
    "IS_DECIMAL": lambda self, e, a: f"COALESCE({a[0]} RLIKE '^[+-]?([0-9]+\\\\.?[0-9]*|\\\\.[0-9]+)([eE][+-]?[0-9]+)?$', FALSE)",
    "REGEXP": lambda self, e, a: f"REGEXP_LIKE({a[0]}, {a[1]})",
    "E": lambda self, e, a: "E()",
    "SHA224": lambda self, e, a: f"SHA2({a[0]}, 224)",
    "SHA256": lambda self, e, a: f"SHA2({a[0]}, 256)",
    "SHA384": lambda self, e, a: f"SHA2({a[0]}, 384)",
    "SHA512": lambda self, e, a: f"SHA2({a[0]}, 512)",
    "TYPEOF": _typeof,
    "GREATEST": lambda self, e, a: _null_if_any_null(a, f"GREATEST({', '.join(a)})"),
    "LEAST": lambda self, e, a: _null_if_any_null(a, f"LEAST({', '.join(a)})"),
    "LPAD": _pad("LPAD"),
    "RPAD": _pad("RPAD"),
    "INITCAP": _initcap,
    "CONCAT_WS": lambda self, e, a: f"CONCAT_WS({', '.join(a)})",
    "TRUNCATE": _truncate,
    "ELT": lambda self, e, a: (f"CASE WHEN {a[0]} BETWEEN 1 AND {len(a) - 1} THEN ELT({', '.join(a)}) END"),
    "FROM_BASE64": lambda self, e, a: f"CAST(UNBASE64({a[0]}) AS STRING)",
    "ARRAY_SLICE": lambda self, e, a: _array_slice(a),
    "REGEXP_COUNT": lambda self, e, a: f"CAST(REGEXP_COUNT({a[0]}, {a[1]}) AS INT)",
    "REGEXP_INSTR": lambda self, e, a: f"CAST(REGEXP_INSTR({a[0]}, {a[1]}) AS INT)",
    "REGEXP_SUBSTR": lambda self, e, a: f"REGEXP_SUBSTR({a[0]}, {a[1]})",
    "REGEXP_EXTRACT_ALL": lambda self, e, a: f"REGEXP_EXTRACT_ALL({a[0]}, {a[1]}, {a[2] if len(a) > 2 else '1'})",
    "PARSE_URL": lambda self, e, a: f"TRY_PARSE_URL({', '.join(a)})",
    "STR_TO_MAP": lambda self, e, a: f"STR_TO_MAP({', '.join(a)})",
    "UNHEX": lambda self, e, a: f"TRY_TO_BINARY({a[0]}, 'hex')",
    "HEX": lambda self, e, a: f"HEX({a[0]})",
    "CURRENT_DATABASE": _current_database,
    "UUID": lambda self, e, a: "UUID()",
    "CHR": lambda self, e, a: f"CHR({a[0]})",
    "SIGN": _sign,
    "LISTAGG": _listagg,
    "COLLECT": lambda self, e, a: f"COLLECT_LIST({a[0]})",
    "ARRAY_AGG": lambda self, e, a: f"COLLECT_LIST({a[0]})",
    "PERCENTILE": lambda self, e, a: f"PERCENTILE({', '.join(a)})",
    "FIRST_VALUE": _first_last("FIRST_VALUE"),
    "LAST_VALUE": _first_last("LAST_VALUE"),
}


def _array_slice(a: list[str]) -> str:
    """Flink: 1-based inclusive [start, end], negative counts from the end, 0 is the start."""
    arr, size = a[0], f"SIZE({a[0]})"
    start = f"(CASE WHEN {a[1]} < 0 THEN {size} + {a[1]} + 1 WHEN {a[1]} = 0 THEN 1 ELSE {a[1]} END)"
    end = f"(CASE WHEN {a[2]} < 0 THEN {size} + {a[2]} + 1 ELSE LEAST({a[2]}, {size}) END)" if len(a) > 2 else size
    start = f"GREATEST({start}, 1)"
    return (f"CASE WHEN {' OR '.join(f'{x} IS NULL' for x in a)} THEN NULL WHEN {start} > {end} THEN SLICE({arr}, 1, 0) "
            f"ELSE SLICE({arr}, {start}, {end} - {start} + 1) END")


def _no_time(e: exp.Expression) -> str:
    raise ValidationError(f"Built-in function {_name(e)} is not supported: Spark has no TIME type for query results;"
                          " use CURRENT_TIMESTAMP or DATE_FORMAT(..., 'HH:mm:ss')", start_position(e))


def _array_sort(a: list[str]) -> str:
    """Flink: ascending with NULLs first by default; descending puts NULLs last; a third
    argument puts NULLs first (TRUE) or last (FALSE) whatever the order. NULL if any is NULL."""
    ascending = a[1] if len(a) > 1 else "TRUE"
    sorted_values = f"FILTER(SORT_ARRAY({a[0]}, {ascending}), x -> x IS NOT NULL)"
    nulls = f"FILTER({a[0]}, x -> x IS NULL)"
    nulls_first = a[2] if len(a) > 2 else ascending
    return _null_if_any_null(a, f"IF({nulls_first}, CONCAT({nulls}, {sorted_values}), CONCAT({sorted_values}, {nulls}))")


def _map_union(a: list[str]) -> str:
    """Later maps win on a repeated key (Spark's MAP_CONCAT would fail the query)."""
    merged = a[0]
    for other in a[1:]:
        merged = f"MAP_CONCAT(MAP_FILTER({merged}, (k, v) -> NOT ARRAY_CONTAINS(MAP_KEYS({other}), k)), {other})"
    return merged


def flink_call_sql(self, e: FlinkCall) -> str:
    """Spark SQL for a Flink built-in parsed into a FlinkCall."""
    translate = TEMPLATES.get(e.name)
    if translate is None:
        raise _unsupported(e, "this built-in function is not supported")
    return translate(self, e, [self.sql(a) for a in e.expressions])


# -- sqlglot's own nodes whose Spark spelling has another meaning -----------------------

_EXTRACT = {"DOW": "DAYOFWEEK({0})", "DOY": "DAYOFYEAR({0})", "ISODOW": "EXTRACT(DAYOFWEEK_ISO FROM {0})",
            "ISOYEAR": "EXTRACT(YEAROFWEEK FROM {0})", "SECOND": "SECOND({0})",
            "MILLISECOND": "FLOOR(EXTRACT(SECOND FROM {0}) * 1000)", "MICROSECOND": "FLOOR(EXTRACT(SECOND FROM {0}) * 1000000)",
            "EPOCH": "UNIX_SECONDS(CAST({0} AS TIMESTAMP))", "DECADE": "FLOOR(YEAR({0}) / 10)",
            "CENTURY": "CEIL(YEAR({0}) / 100)", "MILLENNIUM": "CEIL(YEAR({0}) / 1000)"}
_SPARK_EXTRACT = ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE")
_TRUNCATE_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "QUARTER", "YEAR")


def extract_sql(self, e: exp.Extract) -> str:
    """Flink's EXTRACT returns BIGINT; SECOND is whole seconds, MILLISECOND counts the seconds too."""
    unit, value = e.this.name.upper(), self.sql(e, "expression")
    if unit not in _EXTRACT and unit not in _SPARK_EXTRACT:
        units = ", ".join([*_SPARK_EXTRACT, *_EXTRACT])
        raise _unsupported(e, f"EXTRACT({unit} FROM ...) is not supported (units: {units})")
    template = _EXTRACT.get(unit, f"EXTRACT({unit} FROM {{0}})")
    return f"CAST({template.format(value)} AS BIGINT)"


def rounding_sql(function: str):
    """FLOOR/CEIL(x): Flink keeps a DOUBLE a DOUBLE; FLOOR/CEIL(t TO unit) round a time point."""
    def rounding(self, e: exp.Floor | exp.Ceil) -> str:
        value = self.sql(e, "this")
        unit = e.args.get("to")
        if unit is None:
            sql = self.func(function, e.this, e.args.get("decimals"))
            value_type = e.this.type
            if value_type is not None and value_type.this in (exp.DType.DOUBLE, exp.DType.FLOAT):
                return f"CAST({sql} AS {self.sql(value_type)})"
            return sql
        name = unit.name.upper()
        if name not in _TRUNCATE_UNITS:
            raise _unsupported(e, f"{function}(... TO {name}) is not supported (units: {', '.join(_TRUNCATE_UNITS)})")
        floor = f"DATE_TRUNC('{name}', {value})"
        if function == "CEIL":
            step = "3 MONTH" if name == "QUARTER" else f"1 {name}"
            floor = f"CASE WHEN {floor} = {value} THEN {floor} ELSE {floor} + INTERVAL {step} END"
        value_type = e.this.type
        if value_type is not None and value_type.this == exp.DType.DATE:
            return f"CAST({floor} AS DATE)"
        return floor
    return rounding


def bracket_sql(self, e: exp.Bracket) -> str:
    """Flink's array[i] is 1-based and NULL out of range; map[key] is NULL when absent."""
    return f"TRY_ELEMENT_AT({self.sql(e, 'this')}, {self.sql(e.expressions[0])})"


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


def _sql_regex(pattern: str) -> str:
    """A SIMILAR TO pattern as a Java regular expression: % and _ are wildcards, the
    regex operators | * + ? {m,n} ( ) [ ] keep their meaning, everything else is literal."""
    out = []
    for char in pattern:
        if char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        elif char in ".^$\\":
            out.append("\\" + char)
        else:
            out.append(char)
    return "^(?:" + "".join(out) + ")$"


def similar_to_sql(self, e: exp.SimilarTo) -> str:
    pattern = e.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise _unsupported(e, "SIMILAR TO needs a literal pattern here")
    return f"{self.sql(e, 'this')} RLIKE {exp.Literal.string(_sql_regex(pattern.this)).sql(dialect='spark')}"


def overlaps_sql(self, e: exp.Overlaps) -> str:
    """(s1, e1) OVERLAPS (s2, e2), an end being a time point or an interval after the start."""
    periods = []
    for pair in (e.this, e.expression):
        if not isinstance(pair, exp.Tuple) or len(pair.expressions) != 2:
            raise _unsupported(e, "OVERLAPS takes two (start, end or interval) pairs")
        start, end = pair.expressions
        start_sql = self.sql(start)
        end_sql = f"{start_sql} + {self.sql(end)}" if isinstance(end, exp.Interval) else self.sql(end)
        periods.append((f"LEAST({start_sql}, {end_sql})", f"GREATEST({start_sql}, {end_sql})"))
    (s1, e1), (s2, e2) = periods
    return f"({e1} >= {s2} AND {e2} >= {s1})"


def json_objectagg_sql(self, e: exp.JSONObjectAgg) -> str:
    pair = e.expressions[0]
    absent = (e.args.get("null_handling") or "").upper().startswith("ABSENT")
    value = json_text(self, pair.expression)
    member = f"CONCAT({json_text(self, pair.this)}, ':', {value if absent else f'COALESCE({value}, {chr(39)}null{chr(39)})'})"
    if absent:
        member = f"IF({value} IS NULL, NULL, {member})"
    return f"CONCAT('{{', ARRAY_JOIN(COLLECT_LIST({member}), ','), '}}')"


# SimpleDateFormat letters that Spark's formatter refuses (week-based fields, day number of week).
_WEEK_LETTERS = set("YwWu")


def date_format_sql(self, e: exp.Expression) -> str:
    """DATE_FORMAT(t, pattern): Spark's patterns are Java SimpleDateFormat's but for week fields."""
    pattern = e.expression
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        unquoted = "".join(part for i, part in enumerate(pattern.this.split("'")) if i % 2 == 0)
        refused = sorted(set(unquoted) & _WEEK_LETTERS)
        if refused:
            raise _unsupported(e, f"pattern letter(s) {', '.join(refused)} (week-based fields) are not supported")
    return self.func("DATE_FORMAT", e.this, pattern)


_SCALED_UNITS = {"QUARTER": (3, "MONTH"), "DECADE": (10, "YEAR"), "CENTURY": (100, "YEAR"), "MILLENNIUM": (1000, "YEAR")}


def interval_sql(self, e: exp.Interval) -> str:
    """INTERVAL 'n' QUARTER (DECADE, CENTURY, MILLENNIUM), which Spark lacks, in months (years)."""
    unit = e.args.get("unit")
    scaled = _SCALED_UNITS.get(unit.name.upper()) if isinstance(unit, exp.Var) else None
    if scaled is not None and isinstance(e.this, exp.Literal):
        factor, spark_unit = scaled
        value = int(e.this.this.strip()) * factor
        return self.sql(exp.Interval(this=exp.Literal.string(str(value)), unit=exp.var(spark_unit)))
    return self.interval_sql(e)


def week_sql(self, e: exp.Week) -> str:
    """WEEK(date): the ISO week of the year (Spark's WEEKOFYEAR)."""
    return f"CAST(WEEKOFYEAR({self.sql(e, 'this')}) AS BIGINT)"
