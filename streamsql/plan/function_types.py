"""Argument types of Flink's built-in functions, checked at plan time as Flink's validator does.

Flink (Calcite, without implicit type coercion) refuses a built-in whose argument is of
the wrong type family — ``UPPER(1)``, ``ABS('1')``, ``YEAR(42)``, ``TIMESTAMPDIFF(DAY, 1, 2)``
— and a CASE, IF, COALESCE, NULLIF, GREATEST or LEAST whose values have no common type
(``CASE WHEN c THEN 1 ELSE 'a' END``); Spark would cast silently and compute something
else. Within a family (INT and BIGINT, CHAR and STRING) everything passes, and so does a
value whose type is unknown or NULL: a false error is worse than none.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect import functions as F
from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position
from streamsql.plan.typefamilies import family
from streamsql.plan.types import type_name

STRING = ("character string",)
BYTES = ("binary",)
NUMERIC = ("numeric",)
BOOLEAN = ("boolean",)
DATETIME = ("datetime",)
TEMPORAL = ("datetime", "time")
VARIANT = ("variant",)
_FORMS = {STRING: "CHARACTER", STRING + BYTES: "CHARACTER", NUMERIC: "NUMERIC", BOOLEAN: "BOOLEAN",
          DATETIME: "DATETIME", TEMPORAL: "DATETIME", STRING + DATETIME: "DATETIME"}

# sqlglot nodes: (name as Flink spells it, [(argument key, allowed families)]).
NODES: dict[type, tuple[str, list[tuple[str, tuple[str, ...]]]]] = {
    exp.Upper: ("UPPER", [("this", STRING)]),
    exp.Lower: ("LOWER", [("this", STRING)]),
    exp.Length: ("CHAR_LENGTH", [("this", STRING)]),
    exp.Substring: ("SUBSTRING", [("this", STRING + BYTES), ("start", NUMERIC), ("length", NUMERIC)]),
    exp.Trim: ("TRIM", [("this", STRING), ("expression", STRING)]),
    exp.StrPosition: ("POSITION", [("this", STRING), ("substr", STRING)]),
    exp.Replace: ("REPLACE", [("this", STRING), ("expression", STRING), ("replacement", STRING)]),
    exp.Repeat: ("REPEAT", [("this", STRING), ("times", NUMERIC)]),
    exp.RegexpReplace: ("REGEXP_REPLACE", [("this", STRING), ("expression", STRING), ("replacement", STRING)]),
    exp.Left: ("LEFT", [("this", STRING), ("expression", NUMERIC)]),
    exp.Right: ("RIGHT", [("this", STRING), ("expression", NUMERIC)]),
    exp.MD5: ("MD5", [("this", STRING + BYTES)]),
    exp.SHA: ("SHA1", [("this", STRING + BYTES)]),
    exp.SHA2: ("SHA2", [("this", STRING + BYTES), ("length", NUMERIC)]),
    F.RegexpExtractGroup: ("REGEXP_EXTRACT", [("this", STRING), ("expression", STRING), ("group", NUMERIC)]),
    F.SplitIndex: ("SPLIT_INDEX", [("this", STRING), ("expression", STRING), ("index", NUMERIC)]),
    F.FlinkDateFormat: ("DATE_FORMAT", [("this", STRING + DATETIME), ("expression", STRING)]),
    exp.Abs: ("ABS", [("this", NUMERIC)]),
    exp.Sqrt: ("SQRT", [("this", NUMERIC)]),
    exp.Ln: ("LN", [("this", NUMERIC)]),
    exp.Log: ("LOG", [("this", NUMERIC), ("expression", NUMERIC)]),
    exp.Exp: ("EXP", [("this", NUMERIC)]),
    exp.Pow: ("POWER", [("this", NUMERIC), ("expression", NUMERIC)]),
    exp.Round: ("ROUND", [("this", NUMERIC), ("decimals", NUMERIC)]),
    exp.Extract: ("EXTRACT", [("expression", TEMPORAL + ("interval",))]),
    **{node: (node.__name__.upper(), [("this", DATETIME)])
       for node in (exp.Year, exp.Quarter, exp.Month, exp.Week, exp.DayOfYear, exp.DayOfMonth, exp.DayOfWeek)},
    **{node: (node.__name__.upper(), [("this", TEMPORAL)]) for node in (exp.Hour, exp.Minute, exp.Second)},
    exp.If: ("IF", [("this", BOOLEAN)]),
}

# Translated Flink calls (FlinkCall names): allowed families by position (None: not checked).
CALLS: dict[str, list[tuple[str, ...] | None]] = {
    "TIMESTAMPDIFF": [None, TEMPORAL, TEMPORAL],
    "TIMESTAMPADD": [None, NUMERIC, TEMPORAL],
    "TO_TIMESTAMP": [STRING, STRING], "TO_DATE": [STRING, STRING], "UNIX_TIMESTAMP": [STRING, STRING],
    "FROM_UNIXTIME": [NUMERIC, STRING], "CONVERT_TZ": [STRING, STRING, STRING], "TO_TIMESTAMP_LTZ": [NUMERIC, NUMERIC],
    "JSON_VALUE": [STRING + VARIANT, STRING], "JSON_QUERY": [STRING + VARIANT, STRING],
    "JSON_EXISTS": [STRING + VARIANT, STRING], "PARSE_JSON": [STRING, BOOLEAN], "TRY_PARSE_JSON": [STRING, BOOLEAN],
    "INITCAP": [STRING], "LPAD": [STRING, NUMERIC, STRING], "RPAD": [STRING, NUMERIC, STRING],
    "IS_ALPHA": [STRING], "IS_DIGIT": [STRING], "IS_DECIMAL": [STRING], "REGEXP": [STRING, STRING],
    "URL_DECODE": [STRING], "URL_ENCODE": [STRING], "BTRIM": [STRING, STRING], "FROM_BASE64": [STRING],
    "SHA224": [STRING + BYTES], "SHA256": [STRING + BYTES], "SHA384": [STRING + BYTES], "SHA512": [STRING + BYTES],
    "LISTAGG": [STRING, STRING], "TRUNCATE": [NUMERIC, NUMERIC], "SIGN": [NUMERIC], "BIN": [NUMERIC],
    "RAND_INTEGER": [NUMERIC, NUMERIC], "REGEXP_COUNT": [STRING, STRING], "REGEXP_INSTR": [STRING, STRING],
    "REGEXP_SUBSTR": [STRING, STRING], "REGEXP_EXTRACT_ALL": [STRING, STRING, NUMERIC],
    "PARSE_URL": [STRING, STRING, STRING], "STR_TO_MAP": [STRING, STRING, STRING], "ELT": [NUMERIC],
}


def check_function_types(query: exp.Expression) -> None:
    """Raise ValidationError, with the SQL position, for the first built-in call Flink refuses."""
    for node in query.walk():
        if isinstance(node, F.FlinkCall):
            _check_arguments(node.name, list(zip(node.expressions, CALLS.get(node.name, []))), node)
            if node.name in ("GREATEST", "LEAST"):
                _check_common_type(node.name, node.expressions, node)
        elif type(node) in NODES and not (isinstance(node, exp.If) and isinstance(node.parent, exp.Case)):
            name, signature = NODES[type(node)]
            _check_arguments(name, [(node.args.get(key), families) for key, families in signature], node)
        elif isinstance(node, (exp.Floor, exp.Ceil)):
            families = TEMPORAL if node.args.get("to") is not None else NUMERIC
            _check_arguments(type(node).__name__.upper(), [(node.this, families)], node)
        if isinstance(node, exp.Case):
            _check_common_type("CASE", [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")], node)
        elif isinstance(node, exp.If) and not isinstance(node.parent, exp.Case):
            _check_common_type("IF", [node.args.get("true"), node.args.get("false")], node)
        elif isinstance(node, exp.Coalesce):
            _check_common_type("COALESCE", [node.this, *node.expressions], node)
        elif isinstance(node, exp.Nullif):
            _check_common_type("NULLIF", [node.this, node.expression], node)


def _check_arguments(name: str, arguments: list[tuple[exp.Expression | None, tuple[str, ...] | None]], node: exp.Expression) -> None:
    for argument, families in arguments:
        if argument is None or families is None:
            continue
        found = family(argument.type)
        if found is not None and found not in families:
            types = ", ".join(f"<{_flink_type(a)}>" for a in _call_arguments(node))
            form = _FORMS.get(families, "/".join(f.upper() for f in families))
            raise ValidationError(
                f"Cannot apply '{name}' to arguments of type '{name}({types})': the argument {_flink_type(argument)}"
                f" is not {form} (Flink casts it only when told: CAST(... AS ...))",
                start_position(argument) or start_position(node),
            )


def _check_common_type(name: str, values: list[exp.Expression | None], node: exp.Expression) -> None:
    typed = [(v, family(v.type)) for v in values if v is not None and not isinstance(v, exp.Null)]
    families = {f for _, f in typed if f is not None}
    if len(families) > 1:
        types = ", ".join(_flink_type(v) for v, _ in typed)
        raise ValidationError(f"Illegal mixing of types in {name}: {types} have no common type; CAST them to one type",
                              start_position(node))


def _call_arguments(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, F.FlinkCall):
        return [a for a in node.expressions if not isinstance(a, exp.Var)]
    return [v for k, v in node.args.items() if isinstance(v, exp.Expression) and k != "to"]


def _flink_type(node: exp.Expression) -> str:
    if isinstance(node, exp.Literal) and node.is_string:
        return f"CHAR({len(node.this)})"
    name = type_name(node.type)
    return {"INT": "INTEGER", "TEXT": "STRING"}.get(name, name)
