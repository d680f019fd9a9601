"""The Flink SQL dialect for sqlglot: tokens, parser and generator.

Flink SQL (Calcite) differs from sqlglot's default dialect in ways that change meaning,
not just spelling: identifiers are case-sensitive and quoted with backticks, string
literals escape a quote by doubling it (a backslash is an ordinary character),
``TIMESTAMP`` has no time zone, and ``ROW<...>`` is a struct type. Functions whose
Flink semantics differ from the generic ones parse into the nodes in ``functions``.
"""

from __future__ import annotations

import logging

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.generator import Generator
from sqlglot.parser import Parser
from sqlglot.tokens import Tokenizer, TokenType
from sqlglot.trie import new_trie

from streamsql.dialect import builtins as B
from streamsql.dialect import changelog_functions as CL
from streamsql.dialect import catalogs as C
from streamsql.dialect import decimals
from streamsql.dialect import functions as F
from streamsql.dialect import match_recognize as M
from streamsql.dialect import windows as W
from streamsql.dialect.reserved import ReservedWordsParser
from streamsql.dialect.strict import StrictParser, closed


# sqlglot warns on stderr when it falls back to a raw command; streamsql reports those itself.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

SHOW_LISTS = ("CATALOGS", "DATABASES", "TABLES", "VIEWS", "FUNCTIONS", "CURRENT DATABASE", "CURRENT CATALOG")


# Listings that take Flink's [FROM|IN db] and [NOT] LIKE|ILIKE 'pattern'.
SHOW_FILTERED = ("TABLES", "VIEWS", "FUNCTIONS", "DATABASES", "COLUMNS")


class Show(exp.Expression):
    """SHOW TABLES [FROM db] [NOT LIKE 'p'], SHOW CREATE TABLE t, ...: ``this`` is what to
    show, ``target`` the table (SHOW CREATE, SHOW COLUMNS) or the database (FROM/IN)."""

    arg_types = {"this": True, "target": False, "like": False, "negated": False, "ilike": False}


def parse_show_listing(parser: Parser, kind: str) -> Show:
    """SHOW TABLES|VIEWS|FUNCTIONS [FROM|IN db], SHOW DATABASES, SHOW COLUMNS FROM|IN t; then
    an optional [NOT] LIKE|ILIKE 'pattern'."""
    target = None
    if kind == "COLUMNS":
        if not parser._match_set((TokenType.FROM, TokenType.IN)):
            parser.raise_error("Expected FROM or IN and a table name after SHOW COLUMNS")
        target = parser._parse_table_parts()
    elif kind != "DATABASES" and parser._match_set((TokenType.FROM, TokenType.IN)):
        target = parser._parse_table_parts()
    negated = parser._match(TokenType.NOT)
    like = ilike = None
    if parser._match_set((TokenType.LIKE, TokenType.ILIKE)):
        ilike = parser._prev.token_type == TokenType.ILIKE
        like = parser._parse_string()
        if like is None:
            parser.raise_error("Expected a quoted pattern after LIKE, e.g. LIKE 'bid%'")
    elif negated:
        parser.raise_error("Expected LIKE or ILIKE after NOT")
    return parser.expression(Show(this=exp.var(kind), target=target, like=like, negated=negated or None,
                                  ilike=ilike or None))


def show_sql(generator: Generator, show: Show) -> str:
    text = f"SHOW {show.this.name}"
    if show.args.get("target"):
        text += f"{' FROM' if show.this.name in SHOW_FILTERED else ''} {generator.sql(show, 'target')}"
    if show.args.get("like"):
        text += f"{' NOT' if show.args.get('negated') else ''} {'ILIKE' if show.args.get('ilike') else 'LIKE'} "
        text += generator.sql(show, "like")
    return text


class MetadataColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    """``METADATA [FROM 'key'] [VIRTUAL]``: a column read from the connector's metadata
    (Kafka's offset, partition, timestamp, ...); ``this`` is the key when it differs from
    the column's name."""

    arg_types = {"this": False, "virtual": False}


def _parse_metadata(parser: Parser) -> MetadataColumnConstraint:
    key = None
    if parser._match(TokenType.FROM):
        key = parser._parse_string()
        if key is None:
            parser.raise_error("Expected the metadata key as a string after METADATA FROM", parser._prev)
    virtual = parser._match_text_seq("VIRTUAL")
    return parser.expression(MetadataColumnConstraint(this=key, virtual=virtual or None))


def _metadata_sql(generator: Generator, node: MetadataColumnConstraint) -> str:
    key = f" FROM {generator.sql(node, 'this')}" if node.this else ""
    return f"METADATA{key}" + (" VIRTUAL" if node.args.get("virtual") else "")


def _unnest_sql(generator: Generator, e: exp.Unnest) -> str:
    """UNNEST as written; its ordinality kept among the alias's columns (plan.unnest)."""
    if not e.args.get("ordinality"):
        return Generator.unnest_sql(generator, e)
    return f"UNNEST({generator.expressions(e, flat=True)}) WITH ORDINALITY AS {generator.sql(e, 'alias')}"


_BRACKET = Dialect.EXPRESSION_METADATA[exp.Bracket]["annotator"]
UDF_TYPE = "udf_type"  # the meta key of a bound Python UDF call's Flink result type (plan.planner)
PYTHON_FUNCTION = "python_function"  # the meta key of a bound Python aggregate call's function (plan.udfs)


def _annotate_call(annotator, e: exp.Anonymous):
    """A Python UDF's call typed as its declared result; another unknown call as sqlglot does."""
    declared = e.meta.get(UDF_TYPE)
    return annotator._set_type(e, declared.copy() if declared is not None else annotator.schema.get_udf_type(e))


def _annotate_bracket(annotator, e: exp.Bracket):
    """``v['key']`` / ``v[i]`` of a VARIANT is a VARIANT; an ARRAY's or MAP's as sqlglot types it."""
    if e.this.type is not None and e.this.type.is_type(exp.DType.VARIANT):
        return annotator._set_type(e, exp.DType.VARIANT)
    return _BRACKET(annotator, e)


def _annotate_unnest(annotator, e):
    from streamsql.plan.unnest import annotate

    return annotate(annotator, e)


class Flink(Dialect):
    """Apache Flink SQL, as documented for Flink 1.20 / 2.x."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE
    # Flink: 5 / 2 = 2 for integers.
    TYPED_DIVISION = True
    SAFE_DIVISION = False
    # Result types of Flink's own function nodes, for type inference (sink schemas, DESCRIBE).
    EXPRESSION_METADATA = {
        **Dialect.EXPRESSION_METADATA,
        F.RegexpExtractGroup: {"returns": exp.DType.VARCHAR},
        F.SplitIndex: {"returns": exp.DType.VARCHAR},
        F.FlinkDateFormat: {"returns": exp.DType.VARCHAR},
        F.FlinkCall: {"annotator": B.annotate},
        exp.Anonymous: {"annotator": _annotate_call},
        F.PythonAggregate: {"annotator": _annotate_call},
        F.FlinkAggCall: {"annotator": B.annotate},
        exp.Extract: {"returns": exp.DType.BIGINT},
        # Flink's CURRENT_TIMESTAMP is an instant, as NOW() is (shown in 'table.local-time-zone')
        exp.CurrentTimestamp: {"annotator": lambda self, e: self._set_type(e, exp.DataType.build("TIMESTAMP_LTZ(3)"))},
        exp.JSONObject: {"returns": exp.DType.VARCHAR},
        exp.JSONObjectAgg: {"returns": exp.DType.VARCHAR},
        **{node: {"annotator": B.average_type} for node in B.AVERAGES},
        exp.Sum: {"annotator": B.sum_type},
        exp.Literal: {"annotator": decimals.literal(Dialect.EXPRESSION_METADATA[exp.Literal]["annotator"])},
        **{node: {"annotator": decimals.arithmetic(Dialect.EXPRESSION_METADATA[node]["annotator"])}
           for node in (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)},
        exp.Floor: B.time_rounding(exp.Floor, Dialect.EXPRESSION_METADATA),
        exp.Ceil: B.time_rounding(exp.Ceil, Dialect.EXPRESSION_METADATA),
        exp.Unnest: {"annotator": lambda self, e: _annotate_unnest(self, e)},
        exp.Bracket: {"annotator": _annotate_bracket},
    }

    class Tokenizer(Tokenizer):
        QUOTES = ["'"]
        IDENTIFIERS = ["`"]
        STRING_ESCAPES = ["'"]
        KEYWORDS = {
            **Tokenizer.KEYWORDS,
            "STRING": TokenType.TEXT,
            "BYTES": TokenType.VARBINARY,
            "ROW": TokenType.STRUCT,
            "TIMESTAMP_LTZ": TokenType.TIMESTAMPLTZ,
            "MULTISET": TokenType.ARRAY,
            # EXPLAIN <statement> parses like DESCRIBE <statement>; DESCRIBE <table> stays.
            "EXPLAIN": TokenType.DESCRIBE,
            "RESET": TokenType.COMMAND,
            "STOP": TokenType.COMMAND,
            "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE,
        }
        # SHOW is parsed (SHOW_PARSERS below), not swallowed as a raw command.
        COMMANDS = Tokenizer.COMMANDS - {TokenType.SHOW}
        # Flink has no '#'/'$' parameters or '{' placeholders; keep them as errors.
        COMMENTS = ["--", ("/*", "*/")]

    class Parser(ReservedWordsParser, StrictParser, Parser):
        FUNC_TOKENS = {*Parser.FUNC_TOKENS, TokenType.SESSION}

        FUNCTIONS = {
            **Parser.FUNCTIONS,
            "REGEXP_EXTRACT": F.RegexpExtractGroup.from_arg_list,
            "SPLIT_INDEX": F.SplitIndex.from_arg_list,
            "DATE_FORMAT": F.FlinkDateFormat.from_arg_list,
            "PROCTIME": F.Proctime.from_arg_list,
            "SUBSTR": exp.Substring.from_arg_list,
            "CHAR_LENGTH": exp.Length.from_arg_list,
            "CHARACTER_LENGTH": exp.Length.from_arg_list,
            **B.FUNCTIONS,
        }

        NO_PAREN_FUNCTION_PARSERS = {**Parser.NO_PAREN_FUNCTION_PARSERS, **B.NO_PAREN}

        # Each must be closed by its ')', which sqlglot would let go missing.
        FUNCTION_PARSERS = {name: closed(parse) for name, parse in {
            **{k: v for k, v in Parser.FUNCTION_PARSERS.items() if k not in B.FUNCTIONS},
            **B.FUNCTION_PARSERS,
            **{kind: (lambda k: lambda self: W.parse_window_call(self, k))(kind) for kind in W.TVF_PARAMETERS},
            **{kind: (lambda k: lambda self: CL.parse_changelog_call(self, k))(kind) for kind in CL.KINDS},
            **{
                f"{kind}_{prop}": (lambda k, p: lambda self: W.parse_group_window_property(self, k, p))(kind, prop)
                for kind in W.GROUP_WINDOW_PARAMETERS
                for prop in W.GROUP_WINDOW_PROPERTIES
            },
        }.items()}

        CONSTRAINT_PARSERS = {
            **Parser.CONSTRAINT_PARSERS,
            "WATERMARK": lambda self: self.expression(
                exp.WatermarkColumnConstraint(
                    this=self._match(TokenType.FOR) and self._parse_column(),
                    expression=self._match(TokenType.ALIAS) and self._parse_disjunction(),
                )
            ),
        }

        QUERY_MODIFIER_PARSERS = {
            **Parser.QUERY_MODIFIER_PARSERS,
            TokenType.MATCH_RECOGNIZE: lambda self: ("match", M.parse_match_recognize(self)),
        }
        CONSTRAINT_PARSERS["METADATA"] = _parse_metadata

        SCHEMA_UNNAMED_CONSTRAINTS = {*Parser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}

        STATEMENT_PARSERS = {**Parser.STATEMENT_PARSERS, TokenType.SHOW: lambda self: self._parse_show()}

        SHOW_PARSERS = {
            **{kind: (lambda k: lambda self: self.expression(Show(this=exp.var(k))))(kind) for kind in SHOW_LISTS},
            **{kind: (lambda k: lambda self: parse_show_listing(self, k))(kind) for kind in SHOW_FILTERED},
            # SHOW JOBS [ALL]: each job's latest run, or every run (the trie stops at JOBS)
            "JOBS": lambda self: self.expression(Show(this=exp.var("JOBS ALL" if self._match_text_seq("ALL") else "JOBS"))),
            "CREATE TABLE": lambda self: self.expression(Show(this=exp.var("CREATE TABLE"), target=self._parse_table_parts())),
            "CREATE VIEW": lambda self: self.expression(Show(this=exp.var("CREATE VIEW"), target=self._parse_table_parts())),
            "CREATE CATALOG": lambda self: self.expression(Show(this=exp.var("CREATE CATALOG"), target=self._parse_table_parts())),
        }
        SHOW_TRIE = new_trie(key.split(" ") for key in SHOW_PARSERS)

        def _parse_show(self):
            """sqlglot's SHOW trie walks past the end of ``SHOW CREATE`` / ``SHOW CURRENT`` (an IndexError)."""
            try:
                return super()._parse_show()
            except IndexError:
                self.raise_error("Incomplete SHOW: expected SHOW CATALOGS, DATABASES, TABLES, VIEWS, FUNCTIONS, COLUMNS,"
                                 " JOBS, CURRENT CATALOG, CURRENT DATABASE or CREATE TABLE|VIEW|CATALOG", self._prev)

        def _parse_create(self):
            return C.parse_create_catalog(self) if C.at_catalog(self) else super()._parse_create()

        def _parse_drop(self, exists: bool = False, kind: str | None = None):
            return C.parse_drop_catalog(self) if kind is None and C.at_catalog(self) else super()._parse_drop(exists, kind)

        def _parse_json_key_value(self) -> exp.JSONKeyValue | None:
            """[KEY] key VALUE value: Flink's key is any string expression (k || '_x')."""
            self._match_text_seq("KEY")
            key = self._parse_bitwise()
            self._match_text_seq("VALUE")
            value = self._parse_bitwise()
            if not key and not value:
                return None
            return self.expression(exp.JSONKeyValue(this=key, expression=value))

    class Generator(Generator):
        """Writes Flink SQL back (used to persist catalog objects and in SHOW CREATE)."""

        TYPE_MAPPING = {
            **Generator.TYPE_MAPPING,
            exp.DType.TEXT: "STRING",
            exp.DType.VARBINARY: "BYTES",
            exp.DType.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
            exp.DType.STRUCT: "ROW",
        }
        PROPERTIES_LOCATION = {
            **Generator.PROPERTIES_LOCATION,
            exp.PartitionedByProperty: exp.Properties.Location.POST_SCHEMA,
        }
        TRANSFORMS = {
            **Generator.TRANSFORMS,
            exp.Unnest: _unnest_sql,
            exp.WatermarkColumnConstraint: lambda self, e: (
                f"WATERMARK FOR {self.sql(e, 'this')} AS {self.sql(e, 'expression')}"
            ),
            F.RegexpExtractGroup: lambda self, e: self.func(
                "REGEXP_EXTRACT", e.this, e.expression, e.args.get("group")
            ),
            F.SplitIndex: lambda self, e: self.func(
                "SPLIT_INDEX", e.this, e.expression, e.args.get("index")
            ),
            F.FlinkDateFormat: lambda self, e: self.func("DATE_FORMAT", e.this, e.expression),
            F.Proctime: lambda self, e: "PROCTIME()",
            F.FlinkCall: B.flink_sql,
            exp.JSONKeyValue: lambda self, e: f"KEY {self.sql(e, 'this')} VALUE {self.sql(e, 'expression')}",
            F.FlinkAggCall: B.flink_sql,
            F.PythonAggregate: lambda self, e: self.func(e.name, *e.expressions),
            MetadataColumnConstraint: _metadata_sql,
            exp.PartitionedByProperty: lambda self, e: f"PARTITIONED BY {self.sql(e, 'this')}",
            W.TableArgument: W.table_argument_sql,
            W.WindowTVF: W.window_tvf_sql,
            CL.ChangelogCall: CL.changelog_call_sql,
            W.GroupWindow: W.group_window_sql,
            W.GroupWindowProperty: W.group_window_property_sql,
            M.MatchRecognize: M.match_recognize_sql,
            Show: show_sql,
        }

        def property_sql(self, expression: exp.Property) -> str:
            """Flink writes table options as 'key' = 'value'."""
            if type(expression) is exp.Property:
                key = expression.name
                return f"{exp.Literal.string(key).sql(self.dialect)} = {self.sql(expression, 'value')}"
            return super().property_sql(expression)
