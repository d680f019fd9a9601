"""Validated plans for statements: every name resolved and every column typed.

The planner works against a staged copy of the catalog, so a whole script is checked
(tables created, then queried) before Spark starts and before anything is stored.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from streamsql.catalog import Catalog
from streamsql.catalog_files import reported_at
from streamsql.dialect.flink import PYTHON_FUNCTION, UDF_TYPE, Flink
from streamsql.dialect.functions import PythonAggregate
from streamsql.dialect.script import Statement, StatementSet
from streamsql.errors import StreamsqlError, ValidationError
from streamsql.plan import time_zone
from streamsql.plan.grouping import check_grouping, group_ids
from streamsql.plan.binding import (check_stars_have_tables, expand_row_stars, group_window_time, labels, merge,
                                    name_projections, replace_relation, resolution_error, time_attribute,
                                    values_as_select)
from streamsql.plan.builtins import check_functions, unknown_function
from streamsql.plan.changelog_functions import changelog_call_of, changelog_relation
from streamsql.plan.alter import altered, resolve_like, table_as_select
from streamsql.plan.commands import command_text, set_step, stop_job
from streamsql.plan.connectors import CONNECTORS, check_source_path
from streamsql.plan.define import define
from streamsql.plan.fingerprint import plan_fingerprint
from streamsql.plan.inserts import insert_sources
from streamsql.plan.objects import (
    uniquify_names,
    Column,
    FunctionDef,
    ObjectName,
    TableDef,
    ViewDef,
    identifier_position,
)
from streamsql.plan.steps import (  # noqa: F401 (the runtime imports the steps from here)
    DefineStep,
    DropStep,
    ExplainStep,
    InsertStep,
    JobsStep,
    QueryPlan,
    QueryStep,
    ResultStep,
    SetStep,
    StatementSetStep,
    Step,
    StopJobStep,
    spark_name,
)
from streamsql.plan.state_ttl import read_hints
from streamsql.plan.temporal import check_temporal_joins, lookup_only
from streamsql.plan.typecheck import check_types
from streamsql.plan import unnest
from streamsql.plan.positions import start_position
from streamsql.plan.table_functions import check_scalar_use, unnest_table_calls
from streamsql.plan.udfs import argument_error, load_function
from streamsql.plan.argmax_join import rewrite_argmax_joins
from streamsql.plan.sink_materialize import WAITS_FOR_WATERMARK
from streamsql.plan.inline import hoist_window_inputs
from streamsql.plan.windows import (
    WindowRelation,
    check_time_attribute,
    rewrite_group_windows,
    tvf_of,
    window_parameters,
)


class Planner:
    """Turns parsed statements into steps, tracking the catalog as the script changes it."""

    def __init__(self, catalog: Catalog, base_dir=None, settings=None):
        self.catalog = catalog
        self.base_dir = base_dir
        self.settings = settings  # the session's (SET): what a query means depends on some ('table.local-time-zone')
        self._view_plans: dict[ObjectName, QueryPlan] = {}
        # Derived relations (window TVFs) are numbered per planner, not per query: a query
        # includes its views' plans, and two windows must never share a Spark name.
        self._derived_count = 0
        self._inline_views: dict[ObjectName, ViewDef] = {}  # subqueries and CTEs a window reads (plan.inline)
        # Paths an INSERT planned earlier in this script writes: reading them later is fine
        # even if they do not exist yet (the INSERT runs first).
        self._written: set[str] = set()
        self._zone_planned = "UTC"

    def _time_zone(self) -> str:
        return (self.settings.get("table.local-time-zone") if self.settings is not None else None) or "UTC"

    def plan(self, statement: Statement) -> Step:
        zone = self._time_zone()
        if zone != self._zone_planned:  # a view planned in another time zone means something else now
            self._view_plans.clear()
            self._zone_planned = zone
        try:
            return self._plan(statement.expression)
        except StreamsqlError as error:
            if error.position is None:
                error.position = statement.position
            raise

    def _plan(self, node: exp.Expression) -> Step:
        from streamsql.plan.statements import plan_catalog_statement

        answer = plan_catalog_statement(node, self.catalog)
        if answer is not None:
            return answer
        if isinstance(node, exp.Describe) and not isinstance(node.this, exp.Table):
            inner = self._plan(node.this)
            if not isinstance(inner, (QueryStep, InsertStep)):
                raise ValidationError("EXPLAIN takes a SELECT or an INSERT")
            return ExplainStep(inner)
        if isinstance(node, StatementSet):
            return StatementSetStep([self._insert(insert) for insert in node.expressions])
        if isinstance(node, exp.Command) and node.name.upper() == "STOP":
            return stop_job(node)
        if isinstance(node, exp.Command) and node.name.upper() == "RESET":
            key = command_text(node).strip().strip("'") or None
            return SetStep(key, None) if key else SetStep("__all__", None)
        if isinstance(node, exp.Alter) or (isinstance(node, exp.Command) and node.name.upper() == "ALTER"):
            return self._alter(node)
        if isinstance(node, exp.Create) and node.kind == "TABLE" and isinstance(node.expression, exp.Query):
            return self._create_table_as(node)
        if isinstance(node, exp.Create) and node.find(exp.LikeProperty):
            like = node.find(exp.LikeProperty)
            source = self._relation(like.this.this if isinstance(like.this, exp.Schema) else like.this)
            if not isinstance(source, TableDef):
                raise ValidationError(f"CREATE TABLE ... LIKE needs a table, '{source.name}' is a view")
            node = resolve_like(node, source)
        if isinstance(node, exp.Create):
            return self._define(node)
        if isinstance(node, exp.Drop):
            return self._drop(node)
        if isinstance(node, exp.Set):
            return set_step(node)
        if isinstance(node, exp.Insert):
            return self._insert(node)
        if isinstance(node, exp.Query):
            return QueryStep(self.plan_query(node))
        raise ValidationError(f"Unsupported statement: {node.key.upper()}")

    def _define(self, node: exp.Create) -> DefineStep:
        """CREATE [OR REPLACE] [TEMPORARY] TABLE/VIEW/FUNCTION [IF NOT EXISTS] ..."""
        if_not_exists, replace = bool(node.args.get("exists")), bool(node.args.get("replace"))
        self.catalog.prepare(node)
        obj = define(node, self.catalog.current_database, self.base_dir, self.catalog.current_catalog)
        if isinstance(obj, ViewDef):
            obj.columns = self.plan_query(obj.query).columns
        elif isinstance(obj, FunctionDef):
            load_function(obj)
        self.catalog.create(obj, if_not_exists=if_not_exists, replace=replace)
        self._view_plans.clear()  # a view planned before may read what just changed
        return DefineStep(obj, if_not_exists, replace)

    def _create_table_as(self, node: exp.Create) -> StatementSetStep:
        """CREATE TABLE t WITH (...) AS SELECT: define t from the query's columns, then fill it."""
        plan = self.plan_query(node.expression)
        definition = table_as_select(node, plan.columns)
        self._plan(definition)
        table = self.catalog.get(self.catalog.name_of(definition.this.this))
        self._written.add(table.options.get("path"))
        fingerprint = plan_fingerprint(node.expression, table, self.catalog)
        return StatementSetStep([InsertStep(table, plan, overwrite=False, sources=insert_sources(table, None, plan),
                                            fingerprint=fingerprint)])

    def _alter(self, node: exp.Expression) -> ResultStep:
        if isinstance(node, exp.Command):  # ALTER TABLE t RESET ('k', ...)
            match = re.fullmatch(r"\s*TABLE\s+(.+?)\s+RESET\s*\((.*)\)\s*", command_text(node), re.I | re.S)
            if not match:
                raise ValidationError("Expected ALTER TABLE t SET (...), RESET (...) or RENAME TO u")
            table_node, action = exp.to_table(match.group(1), dialect=Flink), match.group(2)
        else:
            table_node, action = node.this, node.args["actions"][0]
        table = self._relation(table_node)
        if not isinstance(table, TableDef) or table.temporary:
            raise ValidationError(f"ALTER TABLE works on (persistent) tables; '{table.name}' is not one")
        definition = altered(table, action)
        new = define(definition, table.name.database, self.base_dir)
        self.catalog.alter(table.name, new)
        return ResultStep([], [])

    def _drop(self, node: exp.Drop) -> DropStep:
        kind = "function" if node.kind == "FUNCTION" else "relation"
        name = self.catalog.name_of(node.args["tables"][0])
        temporary = bool(node.args.get("temporary"))
        step = DropStep(name, kind, bool(node.args.get("exists")), temporary)
        self.catalog.drop(name, kind, step.if_exists, temporary)
        return step

    def _insert(self, node: exp.Insert) -> InsertStep:
        target = node.this
        columns = None
        if isinstance(target, exp.Schema):
            columns = list(target.expressions)
            target = target.this
        table = self._relation(target)
        if not isinstance(table, TableDef):
            raise ValidationError(f"Cannot INSERT INTO view '{table.name}'", identifier_position(target))
        if not CONNECTORS[table.options["connector"]].as_sink:
            raise ValidationError(f"Table '{table.name}' (connector '{table.options['connector']}') cannot be written to")
        self.catalog.check_write(table)
        plan = self.plan_query(values_as_select(node.expression))
        sources = insert_sources(table, columns, plan)
        self._written.add(table.options.get("path"))
        fingerprint = plan_fingerprint(node, table, self.catalog)
        conflict = node.args.get("conflict")
        strategy = conflict.args["action"].name.split()[-1] if conflict else None
        plan.sink_waits = strategy in WAITS_FOR_WATERMARK
        return InsertStep(table, plan, bool(node.args.get("overwrite")), sources, fingerprint, strategy)

    # -- queries -----------------------------------------------------------------------

    def plan_query(self, query: exp.Query) -> QueryPlan:
        """Resolve tables, views, windows, functions and columns; name the output as Flink does."""
        query = query.copy()
        plan = QueryPlan(query, [])
        schema: dict[str, dict[str, str]] = {}
        relations: dict[str, list[Column]] = {}
        versioned: dict[int, TableDef | ViewDef] = {}  # FROM items with FOR SYSTEM_TIME AS OF
        hoist_window_inputs(query, self._inline_view)
        rewrite_group_windows(query)
        query = rewrite_argmax_joins(query, self._view_query)
        plan.query = query
        for select in list(query.find_all(exp.Select)):
            if select.args.get("match") is not None:
                self._bind_match(select, plan, schema, relations)
        for table in list(query.find_all(exp.Table)):
            if tvf_of(table) is not None:
                self._bind_window(table, tvf_of(table), plan, schema, relations)
        for table in list(query.find_all(exp.Table)):
            if changelog_call_of(table) is not None:
                self._bind_changelog(table, changelog_call_of(table), plan, schema, relations)
        ctes = {cte.alias for cte in query.find_all(exp.CTE)}
        for table in list(query.find_all(exp.Table)):
            if (table.name in ctes and not table.db) or table.name in plan.derived:
                continue
            self._bind_relation(table, plan, schema, relations, versioned)
        read_hints(query)
        if self._function("GROUP_ID") is None:
            group_ids(query)
        self._bind_functions(query, plan)
        name_projections(query)
        check_stars_have_tables(query)
        unnest.normalize(query)
        try:
            qualified = qualify(
                query, schema=schema, dialect=Flink, quote_identifiers=False,
                validate_qualify_columns=True,
            )
        except OptimizeError as error:
            raise resolution_error(error) from None
        group_window_time(qualified)
        check_temporal_joins(qualified, versioned, relations, plan.derived)
        typed = annotate_types(qualified, schema=schema, dialect=Flink)
        unnest.check(typed)
        check_types(typed)
        check_grouping(typed)
        expand_row_stars(typed)
        check_functions(typed, self.catalog.current_database)
        time_zone.mark(typed, self._time_zone())
        plan.query = typed
        plan.lookups = lookup_only(typed, plan.derived)
        plan.columns = [Column(s.alias_or_name, s.type, time_attribute=time_attribute(s, relations))
                        for s in typed.selects]
        uniquify_names(plan.columns)
        plan.labels = labels(typed, [c.name for c in plan.columns])
        return plan

    def _bind_relation(self, table: exp.Table, plan: QueryPlan, schema: dict, relations: dict, versioned: dict) -> None:
        obj = self._relation(table)
        name = spark_name(obj.name)
        columns = self._input_columns(obj, plan, table)
        version = table.args.get("version")
        bound = replace_relation(table, name, table.alias or table.name, columns, schema, relations)
        if version is not None:  # checked (and dropped) once names are resolved: plan.temporal
            bound.set("version", version)
            versioned[id(bound)] = obj

    def _input_columns(self, obj: TableDef | ViewDef, plan: QueryPlan, reference: exp.Table) -> list[Column]:
        """Register a table or view (and what the view reads) with the plan; its columns."""
        if isinstance(obj, ViewDef):
            with reported_at(reference):  # a broken table the view reads: show where the view is used
                view_plan = self._view_plan(obj)
            merge(plan.tables, view_plan.tables)
            plan.derived.update(view_plan.derived)
            plan.derived[spark_name(obj.name)] = view_plan.query
            merge(plan.functions, view_plan.functions)
            return view_plan.columns
        check_source_path(obj, self._written)
        merge(plan.tables, [obj])
        return obj.columns

    def _bind_window(self, wrapper: exp.Table, tvf, plan: QueryPlan, schema: dict, relations: dict) -> None:
        argument = tvf.args["table"]
        source = self._relation(argument.this)
        columns = self._input_columns(source, plan, argument.this)
        time_column = check_time_attribute(tvf, columns)
        clashes = [c.name for c in columns if c.name in ("window_start", "window_end", "window_time")]
        if clashes:
            raise ValidationError(
                f"{tvf.kind}: the input already has column(s) {', '.join(clashes)}, which the window adds;"
                " rename them in the input (e.g. window_time AS rowtime)"
            )
        partition_by = [c.name for c in argument.args.get("partition_by") or []]
        unknown = [p for p in partition_by if p not in {c.name for c in columns}]
        if unknown:
            raise ValidationError(f"SESSION: PARTITION BY column(s) {', '.join(unknown)} not in the input")
        self._derived_count += 1
        name = f"__window_{self._derived_count}"
        late_source = None
        if isinstance(source, TableDef) and source.watermark and source.watermark.column == time_column.name:
            late_source = source
        window = WindowRelation(
            name=name, kind=tvf.kind, input_name=spark_name(source.name), input_columns=columns,
            time_column=time_column.name, parameters=window_parameters(tvf), partition_by=partition_by,
            proctime=time_column.time_attribute == "proctime", late_source=late_source,
        )
        if late_source is not None and "late-rows.table" in late_source.options:
            window.late_table = self._late_table(late_source)
        plan.derived[name] = window
        replace_relation(wrapper, name, wrapper.alias or argument.this.name, window.columns, schema, relations)

    def _bind_changelog(self, wrapper: exp.Table, call, plan: QueryPlan, schema: dict, relations: dict) -> None:
        """TO_CHANGELOG / FROM_CHANGELOG: a derived relation (plan.changelog_functions) read by name."""
        argument = call.args["table"]
        source = self._relation(argument.this)
        columns = self._input_columns(source, plan, argument.this)
        self._derived_count += 1
        name = f"__changelog_{self._derived_count}"
        relation = changelog_relation(call, name, spark_name(source.name), columns, wrapper.args.get("alias"))
        plan.derived[name] = relation
        replace_relation(wrapper, name, wrapper.alias or call.kind.lower(), relation.columns, schema, relations)

    def _bind_match(self, select: exp.Select, plan: QueryPlan, schema: dict, relations: dict) -> None:
        """FROM t MATCH_RECOGNIZE (...): a derived relation (plan.match_recognize) read by name."""
        from streamsql.plan.match_recognize import bind_match

        self._derived_count += 1
        bind_match(self, select, f"__match_{self._derived_count}", plan,
                   lambda table, name, alias, columns: replace_relation(table, name, alias, columns, schema, relations))

    def _late_table(self, source: TableDef) -> TableDef:
        """The table named by 'late-rows.table': it takes the source's physical columns."""
        target = self._relation(exp.to_table(source.options["late-rows.table"], dialect=Flink))
        wanted = len(source.physical_columns)
        if not isinstance(target, TableDef) or len(target.physical_columns) != wanted:
            raise ValidationError(
                f"Table '{source.name.name}': 'late-rows.table' must name a table with the same"
                f" {wanted} physical columns, to receive its late rows"
            )
        return target

    def _view_plan(self, view: ViewDef) -> QueryPlan:
        if view.name not in self._view_plans:
            # A view's unqualified names are in the view's own database (Flink expands them
            # when the view is created), whatever database is current now.
            current = self.catalog.current_catalog, self.catalog.current_database
            self.catalog.current_catalog, self.catalog.current_database = view.name.catalog, view.name.database
            try:
                self._view_plans[view.name] = self.plan_query(view.query)
            finally:
                self.catalog.current_catalog, self.catalog.current_database = current
            view.columns = self._view_plans[view.name].columns
        return self._view_plans[view.name]

    def _view_query(self, table: exp.Table) -> exp.Query | None:
        """The query of the view ``table`` names (not resolved: its text as defined), else None."""
        if tvf_of(table) is not None or not table.name:
            return None
        try:
            name = self.catalog.name_of(table)
            found = self._inline_views.get(name) or self.catalog.get(name)
        except StreamsqlError:
            return None
        return found.query if isinstance(found, ViewDef) else None

    def _inline_view(self, body: exp.Query) -> str:
        """A subquery or CTE a window reads, as a view of this planner's own (its name)."""
        self._derived_count += 1
        name = ObjectName(self.catalog.current_database, f"__inline_{self._derived_count}", self.catalog.current_catalog)
        self._inline_views[name] = ViewDef(name, body.copy(), temporary=True)
        return name.name

    def _relation(self, table: exp.Table) -> TableDef | ViewDef:
        name = self.catalog.name_of(table)
        if name in self._inline_views:
            return self._inline_views[name]
        with reported_at(table):
            obj = self.catalog.get(name)
        if obj is None:
            known = ", ".join(o.name.name for o in self.catalog.objects(name.database, catalog=name.catalog)) or "none"
            raise ValidationError(
                f"Object '{table.name}' not found in {name.database} (tables and views: {known})",
                identifier_position(table.this),
            )
        return obj

    def _bind_functions(self, query: exp.Query, plan: QueryPlan) -> None:
        loaded: dict[str, object] = {}  # each function loaded once, registered once, whatever its calls

        def function_of(name: str):
            if name not in loaded:
                loaded[name] = self._function(name)
            return loaded[name]

        unnest_table_calls(query, function_of)
        for call in list(query.find_all(exp.Anonymous)):
            function = function_of(call.name)
            if function is None:
                raise unknown_function(call)
            check_scalar_use(call, function)
            call.set("this", function.name)
            call.meta[UDF_TYPE] = function.result_type
            bound = call
            if function.aggregate:  # an aggregate call from here on (GROUP BY, windows, OVER)
                bound = PythonAggregate(this=function.name, expressions=call.expressions)
                bound.meta.update(call.meta)
                bound.meta[PYTHON_FUNCTION] = function
            wrong = argument_error(function, len(bound.arguments if function.aggregate else call.expressions))
            if wrong:
                raise ValidationError(wrong, start_position(call))
            if bound is not call:
                call.replace(bound)
            merge(plan.functions, [function])

    def _function(self, name: str):
        """The registered Python function of that name (as written, or in lower case), or None."""
        for written in (name, name.lower()):
            definition = self.catalog.get(
                ObjectName(self.catalog.current_database, written, self.catalog.current_catalog), "function")
            if definition is not None:
                return load_function(definition)
        return None
