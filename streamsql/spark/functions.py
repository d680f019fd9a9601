"""Flink built-in functions (parsed into FlinkCall nodes) as Spark SQL with Flink's semantics.

Spark runs in ANSI mode with the session time zone pinned to UTC, so: parsing a bad
string or indexing past an array's end would fail the query where Flink returns NULL
(hence TRY_TO_TIMESTAMP, TRY_ELEMENT_AT); Flink's GREATEST/LEAST are NULL when any
argument is; LPAD/RPAD are NULL for a negative length or an empty pad; INITCAP starts
a word after any non-alphanumeric character. JSON functions: spark.json_functions;
sqlglot's own nodes (EXTRACT, FLOOR ... TO, array[i], ...): spark.native_functions.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from streamsql.dialect.functions import FlinkCall
from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position
from streamsql.spark import arrival_order, json_functions, local_time, variants
from streamsql.spark.function_support import call_name, filtered, null_if_any_null, unsupported
from streamsql.spark.native_functions import check_pattern, java_log

DEFAULT_DATETIME = "'yyyy-MM-dd HH:mm:ss'"
_DATE_UNITS = {"DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}


DIFF_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


def _diff_unit(e: FlinkCall) -> str:
    """TIMESTAMPDIFF/TIMESTAMPADD's unit (SQL_TSI_DAY is DAY); refused when Spark has none."""
    unit = e.expressions[0].name.upper()
    unit = unit[len("SQL_TSI_"):] if unit.startswith("SQL_TSI_") else unit
    unit = {"FRAC_SECOND": "MICROSECOND"}.get(unit, unit)
    if unit not in DIFF_UNITS:
        raise unsupported(e, f"unit {e.expressions[0].name} is not supported (units: {', '.join(DIFF_UNITS)})")
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
        raise unsupported(e, "the precision must be the literal 0 (epoch seconds) or 3 (epoch milliseconds)")
    return f"{'TIMESTAMP_SECONDS' if precision.this == '0' else 'TIMESTAMP_MILLIS'}({args[0]})"


def _unix_timestamp(self, e: FlinkCall, args: list[str]) -> str:
    if not args:
        return "UNIX_TIMESTAMP()"
    parsed = f"TRY_TO_TIMESTAMP({args[0]}, {args[1]})" if len(args) > 1 else f"TRY_TO_TIMESTAMP({args[0]})"
    parsed = local_time.instant(parsed, e.meta.get(local_time.ZONE))  # the wall clock of the local time zone
    return f"CASE WHEN {args[0]} IS NULL THEN NULL ELSE COALESCE(UNIX_SECONDS({parsed}), -9223372036854775808) END"


def _from_unixtime(self, e: FlinkCall, args: list[str]) -> str:
    """Epoch seconds formatted on the local time zone's wall clock (Spark's session zone is UTC)."""
    pattern, zone = args[1] if len(args) > 1 else DEFAULT_DATETIME, e.meta.get(local_time.ZONE)
    if zone is None:
        return f"FROM_UNIXTIME({args[0]}, {pattern})"
    return f"DATE_FORMAT({local_time.wall_clock(f'TIMESTAMP_SECONDS({args[0]})', zone)}, {pattern})"


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


def _collected(self, e: FlinkCall, value: str | None = None) -> str:
    """COLLECT_LIST of the first argument (NULLs skipped), once per value under DISTINCT."""
    argument = e.expressions[0]
    distinct = isinstance(argument, exp.Distinct)
    inner = self.sql(argument.expressions[0]) if distinct else self.sql(argument)
    order = e.meta.get(arrival_order.META)
    if order:  # in the rows' read order (spark.arrival_order)
        pair = f"NAMED_STRUCT('s', {order}, 'v', {value or inner})"
        pair = pair if value else f"IF({inner} IS NULL, NULL, {pair})"
        # a MAP has no order, nor a struct holding one: those pairs are sorted by their order alone
        by = "" if _orderable(argument) else ", (l, r) -> CASE WHEN l.s < r.s THEN -1 WHEN l.s > r.s THEN 1 ELSE 0 END"
        collected = f"TRANSFORM(ARRAY_SORT({filtered(self, e, f'COLLECT_LIST({pair})')}{by}), __o -> __o.v)"
    else:
        collected = filtered(self, e, f"COLLECT_LIST({value or inner})")
    return f"ARRAY_DISTINCT({collected})" if distinct else collected


def _orderable(argument: exp.Expression) -> bool:
    """Whether Spark can order the values of ``argument`` (its planned type has no MAP in it)."""
    argument = argument.expressions[0] if isinstance(argument, exp.Distinct) else argument
    kind = argument.type  # (find_all yields the type itself first)
    return kind is not None and not any(t.this in (exp.DType.MAP, exp.DType.UNKNOWN) for t in kind.find_all(exp.DataType))


def _counted(self, e: FlinkCall) -> str:
    argument = e.expressions[0]
    return self.sql(argument.expressions[0]) if isinstance(argument, exp.Distinct) else self.sql(argument)


def _listagg(self, e: FlinkCall, args: list[str]) -> str:
    separator = args[1] if len(args) > 1 else "','"
    count = filtered(self, e, f"COUNT({_counted(self, e)})")
    return f"IF({count} = 0, NULL, ARRAY_JOIN({_collected(self, e)}, {separator}))"


def array_agg(self, e: FlinkCall, ignore_nulls: bool) -> str:
    """ARRAY_AGG keeps NULLs unless IGNORE NULLS (Spark's COLLECT_LIST drops them: a struct
    around each value keeps them); NULL without input rows."""
    rows = filtered(self, e, "COUNT(1)")
    if ignore_nulls:
        return f"IF({rows} = 0, NULL, {_collected(self, e)})"
    wrapped = _collected(self, e, f"NAMED_STRUCT('v', {_counted(self, e)})")
    return f"IF({rows} = 0, NULL, TRANSFORM({wrapped}, x -> x.v))"


def over_collected(self, window: exp.Window) -> str | None:
    """LISTAGG or ARRAY_AGG in an OVER: their translations combine two aggregates (a count
    and a COLLECT_LIST), so each gets the window (and the FILTER): ``IF(COUNT(x) OVER w = 0,
    NULL, ARRAY_JOIN(COLLECT_LIST(x) OVER w, sep))``; with DISTINCT, and COLLECT, FIRST_VALUE
    and LAST_VALUE with DISTINCT, the frame's distinct values. None for another call."""
    call = window.this
    condition = call.expression if isinstance(call, exp.Filter) else None  # on each aggregate it combines
    call = call.this if isinstance(call, exp.Filter) else call
    ignore_nulls = isinstance(call, exp.IgnoreNulls)
    inner = call.this if isinstance(call, (exp.IgnoreNulls, exp.RespectNulls)) else call

    def over(node: exp.Expression) -> str:
        spec = window.copy()
        spec.set("this", node if condition is None else exp.Filter(this=node, expression=condition.copy()))
        return Spark.Generator.window_sql(self, spec)

    if not isinstance(inner, FlinkCall) or not inner.expressions \
            or inner.name not in ("LISTAGG", "ARRAY_AGG", "COLLECT", "FIRST_VALUE", "LAST_VALUE"):
        return None
    if isinstance(inner.expressions[0], exp.Distinct):  # each value where it first appears in the frame
        return _distinct_over_list(self, inner.name, inner.expressions[0].expressions, ignore_nulls, over)
    if inner.name in ("COLLECT", "FIRST_VALUE", "LAST_VALUE"):
        return None  # one Spark aggregate: the window goes on it as on any aggregate
    argument = inner.expressions[0]

    if inner.name == "LISTAGG":
        separator = self.sql(inner.expressions[1]) if len(inner.expressions) > 1 else "','"
        values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[argument.copy()]))
        return f"IF({over(exp.Count(this=argument.copy()))} = 0, NULL, ARRAY_JOIN({values}, {separator}))"
    if ignore_nulls:
        values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[argument.copy()]))
        return f"IF({over(exp.Count(this=argument.copy()))} = 0, NULL, {values})"
    wrapped = exp.Anonymous(this="NAMED_STRUCT", expressions=[exp.Literal.string("v"), argument.copy()])
    values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[wrapped]))
    if condition is None:
        return f"TRANSFORM({values}, x -> x.v)"  # (the frame holds the current row: never empty)
    return f"IF(SIZE({values}) = 0, NULL, TRANSFORM({values}, x -> x.v))"  # a FILTER may take none


def _distinct_over_list(self, name: str, arguments: list, ignore_nulls: bool, over) -> str:
    """LISTAGG / ARRAY_AGG / COLLECT / FIRST_VALUE / LAST_VALUE (DISTINCT x) OVER (..): the
    frame's values, each once, where it first appears (its ORDER BY's order), as Flink's."""
    argument = arguments[0]
    if name in ("FIRST_VALUE", "LAST_VALUE"):
        values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[argument.copy()]))
        return f"TRY_ELEMENT_AT(ARRAY_DISTINCT({values}), {1 if name == 'FIRST_VALUE' else -1})"
    if name == "LISTAGG":
        separator = self.sql(arguments[1]) if len(arguments) > 1 else "','"
        values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[argument.copy()]))
        return f"IF({over(exp.Count(this=argument.copy()))} = 0, NULL, ARRAY_JOIN(ARRAY_DISTINCT({values}), {separator}))"
    if name == "COLLECT" or ignore_nulls:
        values = f"ARRAY_DISTINCT({over(exp.Anonymous(this='COLLECT_LIST', expressions=[argument.copy()]))})"
        return values if name == "COLLECT" else f"IF(SIZE({values}) = 0, NULL, {values})"
    wrapped = exp.Anonymous(this="NAMED_STRUCT", expressions=[exp.Literal.string("v"), argument.copy()])
    values = over(exp.Anonymous(this="COLLECT_LIST", expressions=[wrapped]))
    # a NULL kept once, as ARRAY_AGG keeps NULLs; NULL when a FILTER takes no row
    return f"IF(SIZE({values}) = 0, NULL, TRANSFORM(ARRAY_DISTINCT({values}), x -> x.v))"


def nulls_sql(ignore: bool):
    """``ARRAY_AGG(x) IGNORE NULLS`` / ``RESPECT NULLS``; other functions as sqlglot writes them."""
    def sql(self, e: exp.Expression) -> str:
        if isinstance(e.this, FlinkCall) and e.this.name == "ARRAY_AGG":
            return array_agg(self, e.this, ignore_nulls=ignore)
        return self.ignorenulls_sql(e) if ignore else self.respectnulls_sql(e)
    return sql


def _first_last(function: str):
    def first_last(self, e: FlinkCall, args: list[str]) -> str:
        order = e.meta.get(arrival_order.META)
        if isinstance(e.expressions[0], exp.Distinct):  # a value counts where it first appears (Flink's DISTINCT)
            return f"TRY_ELEMENT_AT({_collected(self, e)}, {1 if function == 'FIRST_VALUE' else -1})"
        if order:  # the first (last) non-NULL value in the rows' read order (spark.arrival_order)
            by = "MIN_BY" if function == "FIRST_VALUE" else "MAX_BY"
            return f"{by}({args[0]}, IF({args[0]} IS NULL, NULL, {order}))"
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
    "FROM_UNIXTIME": _from_unixtime,
    "CONVERT_TZ": lambda self, e, a: (f"DATE_FORMAT(FROM_UTC_TIMESTAMP(TO_UTC_TIMESTAMP(TRY_TO_TIMESTAMP({a[0]}), {a[1]}), {a[2]}),"
                                      f" {DEFAULT_DATETIME})"),
    "TO_TIMESTAMP_LTZ": _to_timestamp_ltz,
    "NOW": lambda self, e, a: "CURRENT_TIMESTAMP()",
    "CURRENT_ROW_TIMESTAMP": lambda self, e, a: "CURRENT_TIMESTAMP()",
    "LOCALTIMESTAMP": lambda self, e, a: local_time.wall_clock("CURRENT_TIMESTAMP()", e.meta.get(local_time.ZONE)),
    "LOCALTIME": lambda self, e, a: no_time(e),
    "ARRAY_REVERSE": lambda self, e, a: f"REVERSE({a[0]})",
    # Flink finds and removes NULL elements too (Spark's ARRAY_CONTAINS/ARRAY_REMOVE give NULL)
    "ARRAY_CONTAINS": lambda self, e, a: f"EXISTS({a[0]}, x -> x <=> {a[1]})",
    "ARRAY_REMOVE": lambda self, e, a: f"FILTER({a[0]}, x -> NOT x <=> {a[1]})",
    "ARRAY_SORT": lambda self, e, a: _array_sort(a),
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
    "GREATEST": lambda self, e, a: null_if_any_null(a, f"GREATEST({', '.join(a)})"),
    "LEAST": lambda self, e, a: null_if_any_null(a, f"LEAST({', '.join(a)})"),
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
    # Flink's default delimiters are ',' and '=' (Spark's ',' and ':')
    "STR_TO_MAP": lambda self, e, a: f"STR_TO_MAP({a[0]}, {a[1] if len(a) > 1 else chr(39) + ',' + chr(39)}, {a[2] if len(a) > 2 else chr(39) + '=' + chr(39)})",
    "LOG10": lambda self, e, a: java_log("LOG10", a[0]),
    "SPLIT": lambda self, e, a: _split(a),
    "UNHEX": lambda self, e, a: f"TRY_TO_BINARY({a[0]}, 'hex')",
    "HEX": lambda self, e, a: f"HEX({a[0]})",
    "CURRENT_DATABASE": _current_database,
    "UUID": lambda self, e, a: "UUID()",
    "CHR": lambda self, e, a: f"CHR({a[0]})",
    "SIGN": _sign,
    "LISTAGG": _listagg,
    "COLLECT": lambda self, e, a: _collected(self, e),
    "ARRAY_AGG": lambda self, e, a: array_agg(self, e, ignore_nulls=False),
    "PERCENTILE": lambda self, e, a: f"PERCENTILE({', '.join(a)})",
    "FIRST_VALUE": _first_last("FIRST_VALUE"),
    "LAST_VALUE": _first_last("LAST_VALUE"),
    **json_functions.TEMPLATES,
    **variants.TEMPLATES,
}


def _split(a: list[str]) -> str:
    """Flink splits on the literal delimiter; an empty delimiter splits into characters."""
    text, delimiter = a
    quoted = f"CONCAT('\\\\Q', {delimiter}, '\\\\E')"
    chars = f"IF({text} = '', ARRAY({text}), TRANSFORM(SEQUENCE(1, LENGTH({text})), i -> SUBSTRING({text}, i, 1)))"
    return f"CASE WHEN {delimiter} = '' THEN {chars} ELSE SPLIT({text}, {quoted}, -1) END"


def _array_slice(a: list[str]) -> str:
    """Flink: 1-based inclusive [start, end], negative counts from the end, 0 is the start."""
    arr, size = a[0], f"SIZE({a[0]})"
    start = f"(CASE WHEN {a[1]} < 0 THEN {size} + {a[1]} + 1 WHEN {a[1]} = 0 THEN 1 ELSE {a[1]} END)"
    end = f"(CASE WHEN {a[2]} < 0 THEN {size} + {a[2]} + 1 ELSE LEAST({a[2]}, {size}) END)" if len(a) > 2 else size
    start = f"GREATEST({start}, 1)"
    return (f"CASE WHEN {' OR '.join(f'{x} IS NULL' for x in a)} THEN NULL WHEN {start} > {end} THEN SLICE({arr}, 1, 0) "
            f"ELSE SLICE({arr}, {start}, {end} - {start} + 1) END")


def no_time(e: exp.Expression) -> str:
    raise ValidationError(f"Built-in function {call_name(e)} is not supported: Spark 4.3's TIME type is unfinished (a"
                          " cast, comparison or write of one fails with UNSUPPORTED_TIME_TYPE); use CURRENT_TIMESTAMP"
                          " or DATE_FORMAT(..., 'HH:mm:ss')", start_position(e))


def _array_sort(a: list[str]) -> str:
    """Flink: ascending with NULLs first by default; descending puts NULLs last; a third
    argument puts NULLs first (TRUE) or last (FALSE) whatever the order. NULL if any is NULL."""
    ascending = a[1] if len(a) > 1 else "TRUE"
    sorted_values = f"FILTER(SORT_ARRAY({a[0]}, {ascending}), x -> x IS NOT NULL)"
    nulls = f"FILTER({a[0]}, x -> x IS NULL)"
    nulls_first = a[2] if len(a) > 2 else ascending
    return null_if_any_null(a, f"IF({nulls_first}, CONCAT({nulls}, {sorted_values}), CONCAT({sorted_values}, {nulls}))")


def _map_union(a: list[str]) -> str:
    """Later maps win on a repeated key (Spark's MAP_CONCAT would fail the query)."""
    merged = a[0]
    for other in a[1:]:
        merged = f"MAP_CONCAT(MAP_FILTER({merged}, (k, v) -> NOT ARRAY_CONTAINS(MAP_KEYS({other}), k)), {other})"
    return merged


# Functions taking a datetime pattern, and its position.
_PATTERNS = {"TO_TIMESTAMP": 1, "TO_DATE": 1, "UNIX_TIMESTAMP": 1, "FROM_UNIXTIME": 1}


def flink_call_sql(self, e: FlinkCall) -> str:
    """Spark SQL for a Flink built-in parsed into a FlinkCall."""
    translate = TEMPLATES.get(e.name)
    if translate is None:
        raise unsupported(e, "this built-in function is not supported")
    if e.name in _PATTERNS and len(e.expressions) > _PATTERNS[e.name]:
        check_pattern(e, e.expressions[_PATTERNS[e.name]])
    return translate(self, e, [self.sql(a) for a in e.expressions])
