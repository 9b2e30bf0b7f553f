"""Querysets compiled to SQL once and run again with other values: the ORM's SQL, read by field name.

Django builds and compiles a queryset's SQL on every evaluation: for the run page's lookup (the
run, the reader's membership and role, the target, the scenario, the frozen report, the share
links: six joins) that was about 40% of a view's CPU, more than the query's execution. A
``Compiled`` holds a queryset built once by a function of named values; the first time a thread
runs it, Django compiles it with a sentinel for each value, and the positions of the sentinels among
the SQL's parameters are kept with the SQL. Every later run sends that SQL with the values in those
positions and reads the rows through the compiler's own converters, by the names ``values()`` gives
them (or, for a plain model queryset, into model instances as Django makes them). Nothing is read by
column position outside Django's compiler, and nothing is kept but the SQL text of a query of ours:
the rows are read anew on every run.

A value is put in the form the database takes for it by the field given with it (a UUID as text on
SQLite, as a UUID on PostgreSQL). A value that Django would have refused (a malformed UUID) raises
the field's ``ValidationError`` as the queryset would have.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections
from django.db.models import Field, Model, QuerySet
from django.db.models.sql.compiler import SQLCompiler


@dataclass(frozen=True)
class _Plan:
    sql: str
    params: tuple
    slots: tuple[tuple[int, str], ...]  # (parameter index, value name)
    compiler: SQLCompiler
    converters: dict  # the compiler's, by column: the backend's and the fields' from_db_value
    names: tuple[str, ...]  # values(): the row's keys; a model query: the model's attnames
    model: type[Model] | None


class Compiled:
    """``build(**values)`` → a queryset (``values()``, or a plain model queryset without
    ``select_related``), compiled once per thread and database alias; ``fields`` names, for each
    value, the field whose form it takes in SQL."""

    def __init__(self, build: Callable[..., QuerySet], **fields: Field) -> None:
        self.build = build
        self.fields = fields
        self._local = threading.local()

    def _sentinel(self, name: str, field: Field):
        """A value of the field's type no query of ours compares with: found by equality in the
        compiled parameters."""
        if field.get_internal_type() == "UUIDField":
            return uuid.uuid5(uuid.NAMESPACE_URL, f"tollgate:compiled:{id(self)}:{name}")
        return -(2**31) + 7919 + list(self.fields).index(name)  # within every integer field's range

    def _plan(self, alias: str) -> _Plan:
        plans = self._local.__dict__.setdefault("plans", {})
        plan = plans.get(alias)
        if plan is None:
            plan = plans[alias] = self._compile(alias)
        return plan

    def _compile(self, alias: str) -> _Plan:
        connection = connections[alias]
        sentinels = {name: self._sentinel(name, field) for name, field in self.fields.items()}
        queryset = self.build(**sentinels)
        query = queryset.query
        compiler = query.get_compiler(alias)
        sql, params = compiler.as_sql()
        prepared = {name: self.fields[name].get_db_prep_value(v, connection) for name, v in sentinels.items()}
        slots = tuple((i, name) for i, p in enumerate(params) for name, v in prepared.items() if p == v)
        missing = set(sentinels) - {name for _, name in slots}
        if missing:
            raise ValueError(f"the compiled query does not use {sorted(missing)}")
        if queryset._fields is not None:  # values(): the names ValuesIterable gives the columns
            names, model = (*query.extra_select, *query.values_select, *query.annotation_select), None
        else:
            if query.select_related or compiler.annotation_col_map:
                raise ValueError("a compiled model query reads the model's own fields only")
            names, model = tuple(col.target.attname for col, *_ in compiler.select), query.model
        columns = [col for col, *_ in compiler.select[: compiler.col_count]]
        if compiler.has_composite_fields(columns):
            raise ValueError("a compiled query reads no composite field")
        converters = compiler.get_converters(columns)
        return _Plan(sql, tuple(params), slots, compiler, converters, names, model)

    def _run(self, values: dict) -> tuple[_Plan, list]:
        alias = "default"
        plan = self._plan(alias)
        connection = connections[alias]
        params = list(plan.params)
        for i, name in plan.slots:
            params[i] = self.fields[name].get_db_prep_value(values[name], connection)
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            rows = cursor.fetchall()
        width = plan.compiler.col_count
        rows = [row[:width] for row in rows]
        if plan.converters:  # as the compiler's results_iter applies them
            rows = list(plan.compiler.apply_converters(rows, plan.converters))
        return plan, rows

    def rows(self, **values) -> list[dict]:
        """The rows of a ``values()`` queryset, as dicts by its names."""
        plan, rows = self._run(values)
        return [dict(zip(plan.names, row, strict=True)) for row in rows]

    def objects(self, **values) -> list[Model]:
        """The model instances of a plain model queryset."""
        plan, rows = self._run(values)
        return [plan.model.from_db("default", plan.names, row) for row in rows]
