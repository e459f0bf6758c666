"""Hot queries whose SQL is built once per process; each call then only runs it.

Building and compiling a queryset costs about 0.5 ms of CPU on a small machine, several times
what the database needs to answer an indexed lookup. Every REST request looks up its bearer token
and its project membership, and a create also reads the project's quota limits: compiled on every
request, those three lookups were most of the server's time per submitted job. A
``CompiledQuery`` keeps what the ORM produced the first time - the SQL, where each argument goes
among its parameters, and the converters that turn database values into Python ones (booleans and
datetimes on SQLite, for instance) - so the rows are exactly what ``values_list`` would return.

The queryset is written as usual by a function of the arguments, and compiled once with distinct
sample values that must appear verbatim among the compiled parameters: exact lookups on ints and
strings, and comparisons with a datetime (located and passed as the backend adapts a DateTimeField's
value: as it is on PostgreSQL, as text on SQLite). A lookup that transforms its value (``contains``,
``iexact``, ``in``) cannot be located and is refused when compiled, as is a sample that collides
with a constant of the query.

A ``CompiledInsert`` does the same for ``Model.save()`` of a new row, which compiles an INSERT each
time: it keeps the statement and only prepares each field's value, as the ORM's compiler would.
``save_with`` inserts a row and one that points at it (a job and its creation event): on
PostgreSQL in one statement, a data-modifying ``WITH``, which commits by itself outside a
transaction - one round trip where two INSERTs in a transaction take four (BEGIN, INSERT,
INSERT, COMMIT). Given a ``Counter`` (a Slurm cluster's next job id), the same statement also
takes the row's number from it: the counter's row is locked only while that statement runs. A
numbered field takes the number itself, or a value counted down from a top (``(name, top)``:
``top`` less the counter's second, countdown column, which such a row adds one to: priority/basic's
FIFO priority, which only the jobs that take one count down).

On PostgreSQL a row's values travel as one JSON parameter that ``json_populate_record`` turns
into the table's row type, not as one parameter per column: psycopg keeps its parse of a
statement only up to 50 parameters, and parsed the Slurm job's 86 anew on every sbatch (250 us,
a tenth of the request's CPU).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import (
    BigIntegerField,
    BooleanField,
    CharField,
    Field,
    FloatField,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    PositiveBigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    QuerySet,
    SmallIntegerField,
    TextField,
)
from django.db.models.signals import post_save, pre_save


#: Fields (of exactly these classes) whose get_db_prep_save returns a value of exactly this type
#: unchanged: _json_row takes such a value as it is, where the call costs a microsecond a field.
_AS_IS = {CharField: str, TextField: str, BooleanField: bool, IntegerField: int, SmallIntegerField: int,
          BigIntegerField: int, PositiveIntegerField: int, PositiveSmallIntegerField: int,
          PositiveBigIntegerField: int, FloatField: float}

#: The name a CompiledInsert's statement gives the row it reads from its JSON parameter, which it
#: names once a column. Kept short: psycopg caches a statement's conversion to PostgreSQL's form only
#: up to 4,096 bytes (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH), and sbatch's job-and-event
#: INSERT, 98 columns with this prefix, went over it with a longer name (and was converted anew each time).
_ROW_ALIAS = "src"

#: A field that a Counter's number sets: its name (it takes the number), or (name, top): it takes
#: ``top`` less the Counter's countdown after the row counted down (a value that falls with every
#: row that has such a field, see Counter.countdown).
Numbered = str | tuple[str, int]


def _numbered_name(numbered: Numbered) -> str:
    return numbered if isinstance(numbered, str) else numbered[0]


def _numbered_value(numbered: Numbered, number: int, countdown: int | None) -> int:
    if isinstance(numbered, str):
        return number
    if countdown is None:
        raise ValueError(f"{numbered[0]} counts down, and the counter has no countdown column")
    return numbered[1] - countdown


def _counts_down(numbered: tuple[Numbered, ...]) -> int:
    """What a row with these numbered fields adds to the counter's countdown: one if any counts down."""
    return int(any(not isinstance(field, str) for field in numbered))


def _numbered_sql(numbered: Numbered) -> str:
    """The field's value in save_with's statement: the number, or a parameter (its top) less the countdown."""
    return "number.value" if isinstance(numbered, str) else "%s - number.countdown"


def _numbered_shape(numbered: tuple[Numbered, ...]) -> tuple[Numbered, ...]:
    """What save_with's statement depends on: the fields and which count down, not their tops."""
    return tuple(field if isinstance(field, str) else (field[0], 0) for field in numbered)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    #: (parameter position, argument index) for every parameter that comes from an argument.
    slots: tuple[tuple[int, int], ...]
    #: (column position, converters, expression), as SQLCompiler.get_converters gives them.
    converters: tuple[tuple[int, tuple[Callable, ...], Any], ...]


@dataclass(frozen=True)
class Counter:
    """An integer column of ``model`` that numbers new rows elsewhere (a Slurm cluster's
    ``next_job_id``): taking numbers adds to it and returns the first taken, in one UPDATE.

    ``countdown``, a second column, counts the rows that take a value counted down from a top
    (Numbered's ``(name, top)``) in the same UPDATE: slurmctld's priority/basic gives a job the
    next FIFO value only where it gives it a priority at all (a held job takes none)."""

    model: type[Model]
    column: str
    countdown: str = ""

    def _sql(self, connection: Any) -> str:
        """The UPDATE that takes numbers and counts down; it returns the first number taken and the
        countdown after it (NULL without one). Its parameters are _params'."""
        quote, meta = connection.ops.quote_name, self.model._meta
        column = quote(meta.get_field(self.column).column)
        countdown = quote(meta.get_field(self.countdown).column) if self.countdown else ""
        also = f", {countdown} = {countdown} + %s" if countdown else ""
        return (f"UPDATE {quote(meta.db_table)} SET {column} = {column} + %s{also} "  # noqa: S608
                f"WHERE {quote(meta.pk.column)} = %s RETURNING {column} - %s AS value, "
                f"{countdown or 'NULL'} AS countdown")

    def _params(self, pk: Any, count: int, down: int = 0) -> list[Any]:
        return [count, *([down] if self.countdown else []), pk, count]

    def take(self, pk: Any, count: int = 1, *, down: int = 0, using: str = DEFAULT_DB_ALIAS) -> tuple[int, int | None]:
        """The first of ``count`` consecutive numbers, and the countdown once ``down`` is added to
        it (None without a countdown column). The UPDATE takes them atomically by itself; inside a
        transaction the counter's row stays locked until it commits."""
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(self._sql(connection), self._params(pk, count, down))
            number, countdown = cursor.fetchone()
            return number, countdown


class CompiledQuery:
    """``build(*args)`` returns a ``values_list`` queryset; ``rows(*args)`` runs it without compiling it."""

    def __init__(self, build: Callable[..., QuerySet], *samples: int | str | dt.datetime) -> None:
        if len(set(samples)) != len(samples):
            raise ValueError("CompiledQuery samples must be distinct")
        self._build = build
        self._samples = samples
        #: by (database alias, vendor): a test database or a second alias compiles its own SQL.
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def _compile(self, alias: str) -> _Compiled:
        queryset = self._build(*self._samples)
        compiler = queryset.query.get_compiler(alias)
        sql, params = compiler.as_sql()
        slots = []
        for index, sample in enumerate(self._samples):
            sample = _adapted(compiler.connection, sample)
            positions = [p for p, value in enumerate(params) if type(value) is type(sample) and value == sample]
            if not positions:
                raise ValueError(f"sample {sample!r} is not a parameter of the compiled query (not an exact lookup?)")
            slots.extend((position, index) for position in positions)
        columns = [selected[0] for selected in compiler.select[: compiler.col_count]]
        converters = tuple((position, tuple(convs), expression)
                           for position, (convs, expression) in compiler.get_converters(columns).items())
        return _Compiled(sql, tuple(params), tuple(slots), converters)

    def rows(self, *args: int | str | dt.datetime, using: str = DEFAULT_DB_ALIAS) -> list[tuple]:
        (rows,) = rows_together((self, args), using=using)
        return rows

    def _sql_and_params(self, connection: Any, using: str, args: tuple) -> tuple[_Compiled, list[Any]]:
        key = (using, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(using)
        params = list(compiled.params)
        for position, index in compiled.slots:
            params[position] = _adapted(connection, args[index])
        return compiled, params

    @staticmethod
    def _converted(compiled: _Compiled, fetched: list, connection: Any) -> list[tuple]:
        if not compiled.converters:
            return [tuple(row) for row in fetched]
        rows = []
        for fetched_row in fetched:
            row = list(fetched_row)
            for position, convs, expression in compiled.converters:
                for converter in convs:
                    row[position] = converter(row[position], expression, connection)
            rows.append(tuple(row))
        return rows


def _adapted(connection: Any, value: Any) -> Any:
    """A sample or argument as the compiled query's parameter: a datetime as the backend adapts a
    DateTimeField's value, anything else as it is."""
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, dt.datetime) else value


@cache
def field_names(model: type[Model]) -> tuple[str, ...]:
    """The attnames of a model's concrete fields, in column order (fixed once the app registry is ready):
    what a compiled query selects to make instances of it (``instances``)."""
    return tuple(field.attname for field in model._meta.concrete_fields)


def instances(row: tuple, *models: type[Model], using: str = DEFAULT_DB_ALIAS) -> list[Model]:
    """One instance of each model from consecutive slices of ``row`` (each model's ``field_names``, in
    order), as the ORM makes them from its rows (``Model.from_db``)."""
    made, start = [], 0
    for model in models:
        names = field_names(model)
        made.append(model.from_db(using, names, row[start: start + len(names)]))
        start += len(names)
    return made


def rows_together(*calls: tuple[CompiledQuery, tuple], using: str = DEFAULT_DB_ALIAS) -> list[list[tuple]]:
    """The rows of each ``(query, args)``, the queries sent together: on PostgreSQL in one round
    trip (psycopg's pipeline mode: each statement is sent without waiting for the one before's
    answer), elsewhere one after the other."""
    connection = connections[using]
    statements = [query._sql_and_params(connection, using, args) for query, args in calls]
    pipelined = connection.vendor == "postgresql" and len(statements) > 1
    if pipelined:
        connection.ensure_connection()
    cursors = []
    try:
        # The pipeline's errors surface when it ends, outside the cursors' wrapping into Django's.
        with connection.wrap_database_errors, connection.connection.pipeline() if pipelined else nullcontext():
            for compiled, params in statements:
                cursors.append(connection.cursor())
                cursors[-1].execute(compiled.sql, params)
        return [CompiledQuery._converted(compiled, cursor.fetchall(), connection)
                for (compiled, _), cursor in zip(statements, cursors, strict=True)]
    finally:
        for cursor in cursors:
            cursor.close()


class CompiledInsert:
    """``obj.save()`` of a new ``model`` instance, the INSERT built once per database.

    It does what save() does for a new row of a model without parents, in the same order: the
    pre_save signal, each field's ``pre_save`` (``auto_now``...) and ``get_db_prep_save``, one
    ``INSERT ... RETURNING`` the primary key, the instance marked saved, the post_save signal. Field
    values must be plain values, not expressions, and no field may have a database default.
    """

    def __init__(self, model: type[Model]) -> None:
        self._model = model
        #: by (database alias, vendor), as for CompiledQuery: the fields and the statement.
        self._compiled: dict[tuple[str, str], tuple[list[Field], str]] = {}
        #: save_with's statements, by (database alias, dependent model, counter and the fields it
        #: numbers): its link, the dependent's fields and the WITH statement.
        self._with_compiled: dict[tuple, tuple[ForeignKey, list[Field], str]] = {}
        encoders = {field.encoder for field in model._meta.local_concrete_fields if isinstance(field, JSONField)}
        if len(encoders) > 1:
            raise ValueError(f"CompiledInsert cannot insert {model._meta.label}: its JSON fields' encoders differ")
        #: the encoder of the model's JSON fields, which _json_row writes the whole row with.
        self._json_encoder = encoders.pop() if encoders else None

    def _compile(self, connection: Any) -> tuple[list[Field], str]:
        meta = self._model._meta
        fields = [field for field in meta.local_concrete_fields if field is not meta.auto_field]
        unsupported = [field.name for field in fields
                       if field.generated or field.has_db_default() or hasattr(field, "get_placeholder")]
        if meta.parents or unsupported or not connection.features.can_return_columns_from_insert:
            raise ValueError(f"CompiledInsert cannot insert {meta.label} (fields {unsupported}) on {connection.vendor}")
        returning, _ = connection.ops.return_insert_columns([meta.pk])
        return fields, f"{self._insert_sql(connection, fields, self._row_source(connection, fields))} {returning}"

    def _insert_sql(self, connection: Any, fields: list[Field], source: str) -> str:
        """``INSERT INTO table (every field's column) source``."""
        quote = connection.ops.quote_name
        return (f"INSERT INTO {quote(self._model._meta.db_table)} "
                f"({', '.join(quote(field.column) for field in fields)}) {source}")

    def _row_source(self, connection: Any, fields: list[Field], taken: dict[str, str] | None = None,
                    joined: str = "") -> str:
        """What an INSERT of ``fields`` takes its one row from: the row's values (``_prepare``'s
        parameters). On PostgreSQL the fields ``taken`` names by attname take that SQL expression
        over the FROM items ``joined`` instead."""
        if connection.vendor != "postgresql":
            return f"VALUES ({', '.join(['%s'] * len(fields))})"
        quote, taken = connection.ops.quote_name, taken or {}
        values = ", ".join(taken.get(field.attname, f"{_ROW_ALIAS}.{quote(field.column)}") for field in fields)
        return (f"SELECT {values} FROM {joined + ', ' if joined else ''}"
                f"json_populate_record(NULL::{quote(self._model._meta.db_table)}, %s::json) AS {_ROW_ALIAS}")

    def _statement(self, connection: Any, using: str) -> tuple[list[Field], str]:
        key = (using, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(connection)
        return compiled

    def _prepare(self, obj: Model, fields: list[Field], connection: Any, using: str) -> list[Any]:
        """What save() does before its INSERT: the pre_save signal, each field's pre_save and
        database value; the parameters ``_row_source`` takes them as."""
        if obj.pk is not None or not obj._state.adding:
            raise ValueError(f"{obj!r} is already saved")
        pre_save.send(sender=type(obj), instance=obj, raw=False, using=using, update_fields=None)
        if connection.vendor != "postgresql":
            return [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
        return [self._json_row(obj, fields, connection)]

    def _json_row(self, obj: Model, fields: list[Field], connection: Any) -> str:
        """The row as one JSON object by column, which ``json_populate_record`` reads as the table's
        row type: a JSON column's document as JSONField writes it (its encoder's), numbers, booleans
        and strings as themselves, other values (datetimes, non-finite floats) as the text
        PostgreSQL's input for their type reads."""
        row = {}
        for field in fields:
            value = field.pre_save(obj, True)
            if value is None or (type(value) is _AS_IS.get(type(field)) and (
                    type(value) is not float or math.isfinite(value))):
                row[field.column] = value
                continue
            if isinstance(field, JSONField):
                value = field.get_prep_value(value)
            else:
                value = field.get_db_prep_save(value, connection)
                if not isinstance(value, (bool, int, str)) and not (isinstance(value, float) and math.isfinite(value)):
                    value = _text_input(value)
            row[field.column] = value
        return json.dumps(row, cls=self._json_encoder)

    @staticmethod
    def _saved(obj: Model, pk: Any, using: str) -> None:
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = using
        post_save.send(sender=type(obj), instance=obj, created=True, update_fields=None, raw=False, using=using)

    def save(self, obj: Model, *, numbered_by: tuple[Counter, Any, tuple[Numbered, ...]] | None = None,
             using: str = DEFAULT_DB_ALIAS) -> None:
        """Insert ``obj``; ``numbered_by`` as save_with's, the number taken in the same transaction."""
        connection = connections[using]
        fields, sql = self._statement(connection, using)
        with transaction.atomic(using=using, savepoint=False) if numbered_by else nullcontext():
            if numbered_by:
                counter, counter_pk, numbered = numbered_by
                number, countdown = counter.take(counter_pk, down=_counts_down(numbered), using=using)
                for field in numbered:
                    setattr(obj, _numbered_name(field), _numbered_value(field, number, countdown))
            params = self._prepare(obj, fields, connection, using)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                (pk,) = connection.ops.fetch_returned_insert_columns(cursor, [])
        self._saved(obj, pk, using)

    def save_with(self, obj: Model, dependent: Model, dependent_insert: "CompiledInsert", *,
                  numbered_by: tuple[Counter, Any, tuple[Numbered, ...]] | None = None,
                  using: str = DEFAULT_DB_ALIAS) -> None:
        """Insert ``obj`` and ``dependent``, whose foreign key points at it, both or neither.

        ``numbered_by`` = (counter, the counter row's primary key, fields of ``obj``, see Numbered):
        those fields take the counter's next number (or their top less its countdown, which any
        such field counts down by one), set on ``obj`` too.

        On PostgreSQL it is one statement (``WITH [number AS (UPDATE ... RETURNING)] parent AS
        (INSERT ... RETURNING pk) INSERT ... SELECT parent.pk ...``); elsewhere the number's UPDATE
        and two INSERTs in one transaction.
        """
        connection = connections[using]
        counter, counter_pk, numbered = numbered_by or (None, None, ())
        if connection.vendor != "postgresql":
            link = dependent_insert._link_to(self._model)
            with transaction.atomic(using=using):
                self.save(obj, numbered_by=numbered_by, using=using)
                setattr(dependent, link.name, obj)
                dependent_insert.save(dependent, using=using)
            return
        fields, _ = self._statement(connection, using)
        key = (using, dependent_insert._model, counter, _numbered_shape(numbered))
        compiled = self._with_compiled.get(key)
        if compiled is None:
            compiled = self._with_compiled[key] = self._compile_with(connection, using, dependent_insert, counter,
                                                                     numbered)
        link, dependent_fields, statement = compiled
        by_name = {_numbered_name(field): field for field in numbered}
        # a field counted down from a top takes that top as its parameter, in the statement's field order
        tops = [by_name[field.attname][1] for field in fields
                if field.attname in by_name and not isinstance(by_name[field.attname], str)]
        params = tops + self._prepare(obj, fields, connection, using) + dependent_insert._prepare(
            dependent, dependent_fields, connection, using)
        with connection.cursor() as cursor:
            cursor.execute(statement, (counter._params(counter_pk, 1, _counts_down(numbered))
                                       if counter is not None else []) + params)
            pk, dependent_pk, number, countdown = cursor.fetchone()
        for field in numbered:
            setattr(obj, _numbered_name(field), _numbered_value(field, number, countdown))
        self._saved(obj, pk, using)
        setattr(dependent, link.name, obj)
        self._saved(dependent, dependent_pk, using)

    def _compile_with(self, connection: Any, using: str, dependent_insert: "CompiledInsert", counter: Counter | None,
                      numbered: tuple[Numbered, ...]) -> tuple[ForeignKey, list[Field], str]:
        link = dependent_insert._link_to(self._model)
        fields, _ = self._statement(connection, using)
        dependent_fields, _ = dependent_insert._statement(connection, using)
        quote = connection.ops.quote_name
        pk = quote(self._model._meta.pk.column)
        dependent_pk = quote(dependent_insert._model._meta.pk.column)
        number = ""
        if counter is not None:
            number = f"number AS ({counter._sql(connection)}), "
        parent_source = self._row_source(connection, fields, {_numbered_name(spec): _numbered_sql(spec) for spec in numbered},
                                         "number" if number else "")
        child_source = dependent_insert._row_source(connection, dependent_fields, {link.attname: f"parent.{pk}"},
                                                    "parent")
        statement = (f"WITH {number}"
                     f"parent AS ({self._insert_sql(connection, fields, parent_source)} RETURNING {pk}), "
                     f"child AS ({dependent_insert._insert_sql(connection, dependent_fields, child_source)} "
                     f"RETURNING {dependent_pk}) "
                     f"SELECT parent.{pk}, child.{dependent_pk}, "
                     f"{'number.value, number.countdown' if number else 'NULL, NULL'} "
                     f"FROM parent, child{', number' if number else ''}")
        return link, dependent_fields, statement

    def _link_to(self, model: type[Model]) -> ForeignKey:
        """This model's one foreign key to ``model``."""
        links = [field for field in self._model._meta.local_concrete_fields
                 if isinstance(field, ForeignKey) and field.related_model is model]
        if len(links) != 1:
            raise ValueError(f"{self._model._meta.label} needs exactly one foreign key to {model._meta.label}")
        return links[0]


def _text_input(value: Any) -> str:
    """A database value that JSON has no type for, as the text PostgreSQL's input reads it: a
    non-finite float, a date or time, a Decimal or UUID. Any other (bytes, a timedelta, whose str()
    PostgreSQL would misread) is refused."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (Decimal, UUID)):
        return str(value)
    raise TypeError(f"CompiledInsert cannot send a {type(value).__name__} in a JSON row")
