"""sqlglot's own nodes whose Spark spelling means something else than Flink's.

EXTRACT returns BIGINT (whole seconds for SECOND, seconds included for MILLISECOND);
FLOOR/CEIL(t TO unit) round a time point and keep a DOUBLE a DOUBLE; `array[i]` is
1-based and NULL out of range; SIMILAR TO is a Java regular expression; OVERLAPS takes
(start, end or interval) pairs; DATE_FORMAT refuses week-based pattern letters; INTERVAL
'n' QUARTER (DECADE, ...) is in months (years); WEEK(d) is the ISO week; LN, LOG, LOG2 and LOG10 are
Java's Math.log (-Infinity at 0, NaN below it, where Spark's are NULL); a CAST into a
narrower integer wraps and one into a too small DECIMAL is NULL; SUBSTRING of a negative
length is NULL.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.decimals import precision_scale
from streamsql.spark import variants
from streamsql.spark.function_support import unsupported
from streamsql.spark.over_spreads import BITS

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
        raise unsupported(e, f"EXTRACT({unit} FROM ...) is not supported (units: {units})")
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
            raise unsupported(e, f"{function}(... TO {name}) is not supported (units: {', '.join(_TRUNCATE_UNITS)})")
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
    if variants.is_variant(e.this):
        return variants.bracket_sql(self, e)
    return f"TRY_ELEMENT_AT({self.sql(e, 'this')}, {self.sql(e.expressions[0])})"


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
        raise unsupported(e, "SIMILAR TO needs a literal pattern here")
    return f"{self.sql(e, 'this')} RLIKE {exp.Literal.string(_sql_regex(pattern.this)).sql(dialect='spark')}"


def overlaps_sql(self, e: exp.Overlaps) -> str:
    """(s1, e1) OVERLAPS (s2, e2), an end being a time point or an interval after the start."""
    periods = []
    for pair in (e.this, e.expression):
        if not isinstance(pair, exp.Tuple) or len(pair.expressions) != 2:
            raise unsupported(e, "OVERLAPS takes two (start, end or interval) pairs")
        start, end = pair.expressions
        start_sql = self.sql(start)
        end_sql = f"{start_sql} + {self.sql(end)}" if isinstance(end, exp.Interval) else self.sql(end)
        periods.append((f"LEAST({start_sql}, {end_sql})", f"GREATEST({start_sql}, {end_sql})"))
    (s1, e1), (s2, e2) = periods
    return f"({e1} >= {s2} AND {e2} >= {s1})"


# SimpleDateFormat letters that Spark's formatter refuses (week-based fields, day number of week).
_WEEK_LETTERS = set("YwWu")


def check_pattern(e: exp.Expression, pattern: exp.Expression | None) -> None:
    """Spark's datetime patterns are Java SimpleDateFormat's but for the week-based fields."""
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        unquoted = "".join(part for i, part in enumerate(pattern.this.split("'")) if i % 2 == 0)
        refused = sorted(set(unquoted) & _WEEK_LETTERS)
        if refused:
            raise unsupported(e, f"pattern letter(s) {', '.join(refused)} (week-based fields) are not supported")


def date_format_sql(self, e: exp.Expression) -> str:
    """DATE_FORMAT(timestamp, format); Flink's DATE_FORMAT(string, format) reads the string as a
    timestamp and gives NULL for one that is none, where Spark's cast fails the query."""
    check_pattern(e, e.expression)
    value = self.sql(e, "this")
    if e.this.type is not None and e.this.type.this in exp.DataType.TEXT_TYPES:
        value = f"TRY_TO_TIMESTAMP({value})"
    return self.func("DATE_FORMAT", value, e.expression)


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


_NEGATIVE_INFINITY, _NAN = "CAST('-Infinity' AS DOUBLE)", "CAST('NaN' AS DOUBLE)"


def java_divide(dividend: str, divisor: str) -> str:
    """A DOUBLE quotient as Java computes it in Flink's generated code: by zero it is
    ±Infinity (NaN for 0 / 0) and the query goes on, where Spark's ANSI division fails it."""
    return f"IF({divisor} = 0, {dividend} * CAST('Infinity' AS DOUBLE), {dividend} / {divisor})"


def java_log(function: str, x: str) -> str:
    """``function(x)`` (LN, LOG10) as Java's Math.log gives it, which Flink calls: Spark's is
    NULL at or below 0, Java's -Infinity at 0 and NaN below it (NULL stays NULL)."""
    return (f"COALESCE({function}({x}), CASE WHEN {x} = 0 THEN {_NEGATIVE_INFINITY}"
            f" WHEN {x} < 0 THEN {_NAN} END)")


def log_sql(self, e: exp.Ln | exp.Log) -> str:
    """LN(x), LOG(x) and LOG(b, x) (LOG2(x) is LOG(2, x)) as Flink computes them:
    Math.log(x), and Math.log(x) / Math.log(b) in Java's double arithmetic (by 0: ±Infinity,
    NaN for 0 / 0), where Spark gives NULL for a base or a value at or below 0."""
    if isinstance(e, exp.Ln) or e.expression is None:
        return java_log("LN", self.sql(e, "this"))
    base, x = self.sql(e, "this"), self.sql(e, "expression")
    return f"COALESCE(LOG({base}, {x}), {java_divide(java_log('LN', x), java_log('LN', base))})"


_NUMERIC = {*BITS, exp.DType.DECIMAL, exp.DType.FLOAT, exp.DType.DOUBLE}


def numeric_cast(self, e: exp.Cast) -> str | None:
    """CAST between numbers as Flink's generated code casts, where Spark's ANSI cast fails
    the query on a value out of the target's range: an integer into a narrower integer type
    wraps (Java's narrowing: CAST(300 AS TINYINT) is 44), a DOUBLE or FLOAT into an integer
    type is NaN → 0 and saturates as Java's (int) and (long) do, a number into a DECIMAL it
    overflows is NULL (Flink's DecimalData). None: Spark's own cast means Flink's."""
    source, target = getattr(e.this, "type", None), e.to
    if source is None or target is None or source.this not in _NUMERIC:
        return None
    if target.this == exp.DType.DECIMAL:
        return f"TRY_CAST({self.sql(e, 'this')} AS {self.sql(target)})" if _may_overflow(source, target) else None
    bits = BITS.get(target.this)
    if bits is None:
        return None
    value, to = self.sql(e, "this"), self.sql(target)
    if source.this in (exp.DType.FLOAT, exp.DType.DOUBLE):  # Java: NaN is 0, the rest saturates at an int's
        wide = max(bits, 32)                               # (a long's) range, then narrows as an int does
        half = 2 ** (wide - 1)
        value = f"CAST(LEAST(GREATEST(NANVL({value}, 0), {-half}D), {half - 1}D) AS {'BIGINT' if wide == 64 else 'INT'})"
        if wide == bits:
            return value
    elif source.this not in BITS or BITS[source.this] <= bits:
        return None
    half = 2 ** (bits - 1)  # the low bits, read as two's complement (no intermediate overflows)
    return f"CAST(((({value}) & {2 * half - 1}) ^ {half}) - {half} AS {to})"


def _may_overflow(source: exp.DataType, target: exp.DataType) -> bool:
    """Whether a ``source`` number can have more integer digits than DECIMAL ``target`` holds."""
    source_digits, target_digits = precision_scale(source), precision_scale(target)
    if source_digits is None or target_digits is None:
        return True  # FLOAT, DOUBLE
    return source_digits[0] - source_digits[1] > target_digits[0] - target_digits[1]


def substring_sql(self, e: exp.Substring) -> str:
    """Flink's SUBSTRING (BinaryStringDataUtil.substringSQL): a negative length is NULL (Spark's
    is ''), and a start further back than the string's first character (``pos <
    -CHAR_LENGTH(s)``) is '' (Spark's starts at the first character and counts the length
    from the position before it). Otherwise the two agree; a start of 0 is the first
    character in both."""
    value, start, length = self.sql(e, "this"), e.args.get("start"), e.args.get("length")
    plain = self.func("SUBSTRING", e.this, start, length)
    cases = []
    if length is not None and not _literal_at_least(length, 0):
        cases.append(f"WHEN {self.sql(length)} < 0 THEN NULL")
    if start is not None and not _literal_at_least(start, 0):
        cases.append(f"WHEN {self.sql(start)} < -LENGTH({value}) THEN SUBSTRING({value}, 1, 0)")
    return f"CASE {' '.join(cases)} ELSE {plain} END" if cases else plain


def _literal_at_least(node: exp.Expression, least: int) -> bool:
    return isinstance(node, exp.Literal) and node.is_int and int(node.this) >= least
