"""Parsing Flink's built-in functions that sqlglot does not know or parses with another meaning.

Each name in ``RESULT_TYPES`` parses into a ``FlinkCall`` (``FlinkAggCall`` for aggregates)
that streamsql.spark.functions translates. Functions with SQL/JSON clauses
(``JSON_VALUE(j, p RETURNING INT DEFAULT 0 ON EMPTY)``) and the unit-first temporal
functions (``TIMESTAMPDIFF(SECOND, a, b)``, whose unit is a keyword, not a column) have
parsers of their own.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from streamsql.dialect.functions import FlinkAggCall, FlinkCall

# Result type of each translated built-in: a Flink type, or "ARG<n>" (the n-th argument's).
RESULT_TYPES: dict[str, str] = {
    "TIMESTAMPDIFF": "INT", "TIMESTAMPADD": "ARG2", "TO_TIMESTAMP": "TIMESTAMP(3)", "TO_DATE": "DATE",
    "UNIX_TIMESTAMP": "BIGINT", "FROM_UNIXTIME": "STRING", "CONVERT_TZ": "STRING",
    "TO_TIMESTAMP_LTZ": "TIMESTAMP_LTZ(3)", "NOW": "TIMESTAMP_LTZ(3)", "CURRENT_ROW_TIMESTAMP": "TIMESTAMP_LTZ(3)",
    "JSON_VALUE": "STRING", "JSON_QUERY": "STRING", "JSON_EXISTS": "BOOLEAN", "JSON_STRING": "STRING",
    "JSON_ARRAY": "STRING", "JSON_QUOTE": "STRING", "JSON_UNQUOTE": "STRING",
    "PARSE_JSON": "VARIANT", "TRY_PARSE_JSON": "VARIANT",
    "CARDINALITY": "INT", "ELEMENT": "ELEMENT0", "MAP_ENTRIES": "ARG0", "RAND_INTEGER": "INT", "BIN": "STRING",
    "PRINTF": "STRING", "BTRIM": "STRING", "URL_DECODE": "STRING", "URL_ENCODE": "STRING",
    "IS_ALPHA": "BOOLEAN", "IS_DECIMAL": "BOOLEAN", "IS_DIGIT": "BOOLEAN", "REGEXP": "BOOLEAN", "E": "DOUBLE",
    "SHA224": "STRING", "SHA256": "STRING", "SHA384": "STRING", "SHA512": "STRING", "TYPEOF": "STRING",
    "GREATEST": "ARG0", "LEAST": "ARG0", "LPAD": "STRING", "RPAD": "STRING", "INITCAP": "STRING",
    "CONCAT_WS": "STRING", "TRUNCATE": "ARG0", "ELT": "ARG1", "FROM_BASE64": "STRING", "ARRAY_SLICE": "ARG0",
    "REGEXP_COUNT": "INT", "REGEXP_INSTR": "INT", "REGEXP_SUBSTR": "STRING", "REGEXP_EXTRACT_ALL": "ARRAY<STRING>",
    "PARSE_URL": "STRING", "STR_TO_MAP": "MAP<STRING, STRING>", "UNHEX": "BYTES", "HEX": "STRING",
    "CURRENT_DATABASE": "STRING", "ROW": "ROW", "ARRAY_REVERSE": "ARG0", "ARRAY_SORT": "ARG0",
    "ARRAY_CONTAINS": "BOOLEAN", "ARRAY_REMOVE": "ARG0", "LOG10": "DOUBLE", "SPLIT": "ARRAY<STRING>", "MAP_UNION": "ARG0", "ARRAY_UNION": "ARG0", "MAP_VALUES": "UNKNOWN", "MAP_FROM_ARRAYS": "UNKNOWN", "UUID": "STRING", "CHR": "STRING", "SIGN": "ARG0",
    # aggregates
    "LISTAGG": "STRING", "COLLECT": "ARRAY0", "PERCENTILE": "DOUBLE", "JSON_ARRAYAGG": "STRING",
    "ARRAY_AGG": "ARRAY0", "FIRST_VALUE": "ARG0", "LAST_VALUE": "ARG0",
}
AGGREGATES = {"LISTAGG", "COLLECT", "PERCENTILE", "JSON_ARRAYAGG", "ARRAY_AGG", "FIRST_VALUE", "LAST_VALUE"}
UNIT_FIRST = ("TIMESTAMPDIFF", "TIMESTAMPADD")


class Default(exp.Expression):
    """DEFAULT <expr> in an ON EMPTY / ON ERROR clause."""

    arg_types = {"this": True}


def _builder(name: str):
    node = FlinkAggCall if name in AGGREGATES else FlinkCall
    return lambda args: node(this=name, expressions=args)


FUNCTIONS = {name: _builder(name) for name in RESULT_TYPES if name not in UNIT_FIRST}


def _unit_first(self, name: str) -> FlinkCall:
    unit = self._parse_var(any_token=True)
    self._match(TokenType.COMMA)
    args = self._parse_csv(self._parse_assignment)
    return self.expression(FlinkCall(this=name, expressions=[exp.var(unit.name.upper()), *args]))


_BEHAVIOURS = ("NULL", "ERROR", "EMPTY ARRAY", "EMPTY OBJECT", "TRUE", "FALSE", "UNKNOWN", "ABSENT")


def _on_clause(self, on: str) -> exp.Expression | None:
    """``<behaviour> ON <on>`` or ``DEFAULT <expr> ON <on>``, or None."""
    for behaviour in _BEHAVIOURS:
        if self._match_text_seq(*behaviour.split(), "ON", on):
            return exp.var(behaviour)
    index = self._index
    if self._match(TokenType.DEFAULT):
        value = self._parse_bitwise()
        if self._match_text_seq("ON", on):
            return Default(this=value)
    self._retreat(index)
    return None


def _json_call(self, name: str) -> FlinkCall:
    """JSON_VALUE / JSON_QUERY / JSON_EXISTS (json, path [clauses])."""
    args = [self._parse_bitwise()]
    self._match(TokenType.COMMA)
    args.append(self._parse_bitwise())
    returning = self._match(TokenType.RETURNING) and self._parse_types()
    wrapper = None
    if self._match_text_seq("WITHOUT"):
        self._match_text_seq("ARRAY")
        self._match_text_seq("WRAPPER")
        wrapper = "WITHOUT"
    elif self._match(TokenType.WITH):
        kind = "UNCONDITIONAL" if self._match_text_seq("UNCONDITIONAL") else "CONDITIONAL" if self._match_text_seq("CONDITIONAL") else "UNCONDITIONAL"
        self._match_text_seq("ARRAY")
        self._match_text_seq("WRAPPER")
        wrapper = kind
    options = {"wrapper": exp.var(wrapper) if wrapper else None, "empty": _on_clause(self, "EMPTY"),
               "error": _on_clause(self, "ERROR")}
    node = FlinkCall(this=name, expressions=args, returning=returning or None)
    node.set("options", [exp.Tuple(expressions=[exp.var(k), v]) for k, v in options.items() if v is not None])
    return self.expression(node)


def _json_array(self, name: str) -> FlinkCall:
    """JSON_ARRAY(values [NULL|ABSENT ON NULL]) and JSON_ARRAYAGG(value [... ON NULL])."""
    values = []
    on_null = _on_clause(self, "NULL")
    while on_null is None and not self._match(TokenType.R_PAREN, advance=False):
        value = self._parse_assignment()
        if value is None:  # (DISTINCT, a stray keyword: nothing parsed, so nothing consumed)
            self.raise_error(f"Expected a value in {name}")
            break
        values.append(value)
        self._match(TokenType.COMMA)
        on_null = _on_clause(self, "NULL")
    node = (FlinkAggCall if name in AGGREGATES else FlinkCall)(this=name, expressions=values)
    if on_null is not None:
        node.set("options", [exp.Tuple(expressions=[exp.var("null"), on_null])])
    return self.expression(node)


FUNCTION_PARSERS = {
    **{name: (lambda n: lambda self: _unit_first(self, n))(name) for name in UNIT_FIRST},
    **{name: (lambda n: lambda self: _json_call(self, n))(name) for name in ("JSON_VALUE", "JSON_QUERY", "JSON_EXISTS")},
    **{name: (lambda n: lambda self: _json_array(self, n))(name) for name in ("JSON_ARRAY", "JSON_ARRAYAGG")},
    # Plain calls sqlglot parses specially (and differently from Flink): parse them as calls.
    **{name: (lambda n: lambda self: self.expression(_builder(n)(self._parse_csv(self._parse_assignment))))(name)
       for name in ("INITCAP", "TRUNCATE")},
}

def _map_constructor(self) -> exp.Expression:
    """MAP[k1, v1, k2, v2, ...] (a MAP column type, MAP<...>, is parsed elsewhere)."""
    if not self._match(TokenType.L_BRACKET):
        self._retreat(self._index - 1)
        return None
    args = self._parse_csv(self._parse_assignment)
    self._match(TokenType.R_BRACKET)
    return self.expression(FlinkCall(this="MAP", expressions=args))


NO_PAREN = {
    "MAP": _map_constructor,
    "LOCALTIMESTAMP": lambda self: self.expression(FlinkCall(this="LOCALTIMESTAMP", expressions=[])),
    "LOCALTIME": lambda self: self.expression(FlinkCall(this="LOCALTIME", expressions=[])),
}
RESULT_TYPES.update({"LOCALTIMESTAMP": "TIMESTAMP(3)", "LOCALTIME": "TIME", "MAP": "MAP"})


def options(call: FlinkCall) -> dict[str, exp.Expression]:
    """A call's clauses by kind: wrapper, empty, error, null."""
    return {t.expressions[0].name: t.expressions[1] for t in call.args.get("options") or []}


def flink_sql(self, e: FlinkCall) -> str:
    """Writes a call back as Flink SQL (views are stored as Flink SQL)."""
    args = [self.sql(a) for a in e.expressions]
    clauses = []
    if e.args.get("returning"):
        clauses.append(f"RETURNING {self.sql(e.args['returning'])}")
    for kind, value in options(e).items():
        if kind == "wrapper":
            clauses.append("WITHOUT ARRAY WRAPPER" if value.name == "WITHOUT" else f"WITH {value.name} ARRAY WRAPPER")
        else:
            behaviour = f"DEFAULT {self.sql(value.this)}" if isinstance(value, Default) else value.name
            clauses.append(f"{behaviour} ON {kind.upper()}")
    if e.name == "MAP":
        return f"MAP[{', '.join(args)}]"
    if e.name in NO_PAREN:
        return e.name
    if e.name in ("JSON_ARRAY", "JSON_ARRAYAGG"):
        return f"{e.name}({' '.join([', '.join(args), *clauses]).strip()})"
    tail = f" {' '.join(clauses)}" if clauses else ""
    return f"{e.name}({', '.join(args)}{tail})"


def annotate(self, e: FlinkCall) -> FlinkCall:
    """Type inference (sqlglot's annotate_types) for a translated built-in."""
    spec = RESULT_TYPES.get(e.name, "UNKNOWN")
    args = e.expressions
    if e.name in ("JSON_VALUE", "JSON_QUERY") and e.args.get("returning") is not None:
        return self._set_type(e, e.args["returning"])
    if spec.startswith("ARG"):
        index = int(spec[3:])
        data_type = args[index].type if index < len(args) else None
        if e.name == "TIMESTAMPADD" and data_type is not None and data_type.this == exp.DType.DATE \
                and args[0].name not in ("DAY", "WEEK", "MONTH", "QUARTER", "YEAR"):
            data_type = exp.DataType.build("TIMESTAMP(3)")
        return self._set_type(e, data_type or exp.DType.UNKNOWN)
    if spec in ("ELEMENT0", "ARRAY0"):
        data_type = args[0].type if args else None
        if spec == "ELEMENT0":
            nested = data_type.expressions if data_type is not None and data_type.this == exp.DType.ARRAY else []
            return self._set_type(e, nested[0] if nested else exp.DType.UNKNOWN)
        return self._set_type(e, exp.DataType(this=exp.DType.ARRAY, expressions=[data_type], nested=True)
                              if data_type is not None and data_type.this != exp.DType.UNKNOWN else exp.DType.UNKNOWN)
    from streamsql.dialect.flink import Flink

    if spec == "ROW":
        fields = [exp.ColumnDef(this=exp.to_identifier(f"EXPR${i}"), kind=a.type or exp.DataType.build("UNKNOWN"))
                  for i, a in enumerate(args)]
        return self._set_type(e, exp.DataType(this=exp.DType.STRUCT, expressions=fields, nested=True))
    if spec == "MAP":
        known = len(args) >= 2 and all(a.type is not None and a.type.this != exp.DType.UNKNOWN for a in args[:2])
        return self._set_type(e, exp.DataType(this=exp.DType.MAP, expressions=[args[0].type, args[1].type], nested=True)
                              if known else exp.DType.UNKNOWN)
    if spec == "UNKNOWN":
        return self._set_type(e, exp.DType.UNKNOWN)
    return self._set_type(e, exp.DataType.build(spec, dialect=Flink))


def time_rounding(node: type, base: dict) -> dict:
    """FLOOR/CEIL(t TO unit) keep t's type; FLOOR/CEIL(x) are typed as sqlglot types them."""
    generic = base.get(node, {})

    def annotator(self, e):
        if e.args.get("to") is not None:
            return self._set_type(e, e.this.type)
        if "annotator" in generic:
            return generic["annotator"](self, e)
        return self._set_type(e, generic.get("returns", exp.DType.UNKNOWN))

    return {"annotator": annotator}


_KEPT = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT, exp.DType.FLOAT)


def average_type(self, e: exp.Expression) -> exp.Expression:
    """AVG, STDDEV_* and VAR_* as Flink types them (LogicalTypeMerging.findAvgAggType): an
    integer or FLOAT argument keeps its type (an integer result truncates), DECIMAL(p, s)
    gives DECIMAL(38, max(6, s)), anything else DOUBLE."""
    arg_type = getattr(average_argument(e), "type", None)
    if arg_type is not None and arg_type.this in _KEPT:
        return self._set_type(e, arg_type)
    if arg_type is not None and arg_type.this == exp.DType.DECIMAL:
        return self._set_type(e, exp.DataType.build(f"DECIMAL(38, {max(6, decimal_scale(arg_type))})"))
    return self._set_type(e, exp.DType.DOUBLE)


def sum_type(self, e: exp.Expression) -> exp.Expression:
    """SUM as Flink types it (LogicalTypeMerging.findSumAggType): DECIMAL(p, s) gives
    DECIMAL(38, s), any other number keeps its type (an INT's sum wraps past 2^31, as
    Flink 2.3 prints it; a FLOAT's is a FLOAT)."""
    arg_type = getattr(average_argument(e), "type", None)
    if arg_type is not None and arg_type.this == exp.DType.DECIMAL:
        return self._set_type(e, exp.DataType.build(f"DECIMAL(38, {decimal_scale(arg_type)})"))
    if arg_type is not None and arg_type.this in (*_KEPT, exp.DType.DOUBLE):
        return self._set_type(e, arg_type)
    return self._annotate_by_args(e, "this", "expressions", promote=True)


def average_argument(e: exp.Expression) -> exp.Expression:
    """The value an AVG, STDDEV_* or VAR_* call takes (a DISTINCT's)."""
    return e.this.expressions[0] if isinstance(e.this, exp.Distinct) and e.this.expressions else e.this


def decimal_scale(data_type: exp.DataType) -> int:
    """A DECIMAL type's scale (0 when not written, as in DECIMAL(10))."""
    params = data_type.expressions
    return int(params[1].name) if len(params) > 1 else 0


AVERAGES = (exp.Avg, exp.StddevPop, exp.StddevSamp, exp.Stddev, exp.VariancePop, exp.Variance)
