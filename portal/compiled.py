"""Querysets whose SQL Django makes once and that are run again with other values: the ORM's own SQL,
read by the names ``values()`` gives its columns. Public APIs only.

Django builds and compiles a queryset's SQL on every evaluation: for the run page's state (the run,
the reader's membership and role, the target, the scenario, the frozen report, the share links: six
joins) that took ten times the CPU of running it (1.8 ms against 0.17 on the bench's data). A
``Compiled`` holds a function that builds a queryset from named values. The first time it runs on a
database, it evaluates that queryset with a sentinel for each value inside
``connection.execute_wrapper`` (Django's documented hook around every query) and keeps the SQL Django
sent and where the sentinels sit among its parameters. Every later run sends that SQL through a
plain cursor with the values in those places, and reads each row by the column names of the cursor's
``description``: ``values()`` names each column (``AS "target__name"``), a model query selects the
model's columns in order, made into instances by ``Model.from_db``.

This holds on PostgreSQL, where psycopg returns each column as the Python value Django's field holds
(aware datetimes, UUIDs; tests/test_compiled.py compares the rows with the queryset's own for every
value). Elsewhere (the demo's SQLite) each run evaluates the queryset as Django does.

A value is put in the form the database takes for it by the field given with it; a value Django would
have refused (a malformed UUID) raises the field's ``ValidationError`` as the queryset would have.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections
from django.db.models import Field, Model, QuerySet

ALIAS = "default"


@dataclass(frozen=True)
class _Plan:
    sql: str
    params: tuple
    slots: tuple[tuple[int, str], ...]  # (parameter index, value name)
    model: type[Model]  # a model query's model (its concrete fields are the columns)


class Compiled:
    """``build(**values)`` → a queryset (``values()``, or a plain model queryset without
    ``select_related``) whose SQL is made once per database; ``fields`` names, for each value, the
    field whose form it takes in SQL."""

    def __init__(self, build: Callable[..., QuerySet], **fields: Field) -> None:
        self.build = build
        self.fields = fields
        self._plans: dict[str, _Plan] = {}
        self._names: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def _sentinel(self, name: str, field: Field):
        """A value of the field's type no query of ours compares with: found by equality in the
        parameters Django sends."""
        if field.get_internal_type() == "UUIDField":
            return uuid.uuid5(uuid.NAMESPACE_URL, f"tollgate:compiled:{id(self)}:{name}")
        return -(2**31) + 7919 + list(self.fields).index(name)  # within every integer field's range

    def _plan(self) -> _Plan:
        plan = self._plans.get(ALIAS)
        if plan is None:
            with self._lock:
                plan = self._plans.get(ALIAS) or self._capture()
                self._plans[ALIAS] = plan
        return plan

    def _capture(self) -> _Plan:
        connection = connections[ALIAS]
        sentinels = {name: self._sentinel(name, field) for name, field in self.fields.items()}
        sent: list[tuple[str, tuple]] = []

        def record(execute, sql, params, many, context):
            sent.append((sql, tuple(params or ())))
            return execute(sql, params, many, context)

        queryset = self.build(**sentinels)
        with connection.execute_wrapper(record):
            list(queryset)
        if len(sent) != 1:
            raise ValueError(f"the query ran {len(sent)} statements, not one")
        sql, params = sent[0]
        prepared = {name: self.fields[name].get_db_prep_value(v, connection) for name, v in sentinels.items()}
        slots = tuple((i, name) for i, p in enumerate(params) for name, v in prepared.items() if p == v)
        missing = set(sentinels) - {name for _, name in slots}
        if missing:
            raise ValueError(f"the compiled query does not use {sorted(missing)}")
        return _Plan(sql, params, slots, queryset.model)

    def _fetch(self, values: dict) -> tuple[_Plan, list[str], list[tuple]]:
        plan = self._plan()
        connection = connections[ALIAS]
        params = list(plan.params)
        for i, name in plan.slots:
            params[i] = self.fields[name].get_db_prep_value(values[name], connection)
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            names = self._names.get(plan.sql)
            if names is None:  # the same SQL names the same columns: read once (psycopg builds them)
                names = self._names[plan.sql] = [column[0] for column in cursor.description]
            return plan, names, cursor.fetchall()

    @staticmethod
    def _reused() -> bool:
        return connections[ALIAS].vendor == "postgresql"

    def rows(self, **values) -> list[dict]:
        """The rows of a ``values()`` queryset, as dicts by its names."""
        if not self._reused():
            return list(self.build(**values))
        _, names, rows = self._fetch(values)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def objects(self, **values) -> list[Model]:
        """The model instances of a plain model queryset."""
        if not self._reused():
            return list(self.build(**values))
        plan, names, rows = self._fetch(values)
        model = plan.model
        attnames = [field.attname for field in model._meta.concrete_fields]
        if [field.column for field in model._meta.concrete_fields] != names:
            raise ValueError("a compiled model query reads the model's own columns, in order")
        return [model.from_db(ALIAS, attnames, row) for row in rows]
