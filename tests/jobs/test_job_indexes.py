"""Every index of the job table is written by each submission: none may be redundant."""

from django.db import connection

from trainhub.jobs.models import CustomJob


def job_table_indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, CustomJob._meta.db_table)
    # An index on an expression (upper(display_name)) has no plain columns to compare.
    return {name: info["columns"] for name, info in constraints.items()
            if (info["index"] or info["unique"]) and info["columns"] and None not in info["columns"]}


def test_no_index_is_only_the_leading_columns_of_another(db):
    indexes = job_table_indexes()
    # A partial index covers only its rows: it makes no full index redundant.
    partial = {index.name for index in CustomJob._meta.indexes if index.condition is not None}
    redundant = [(name, other) for name, columns in indexes.items() for other, longer in indexes.items()
                 if other not in partial and len(columns) < len(longer) and longer[:len(columns)] == columns]
    assert redundant == []


def test_job_ids_are_unique_without_a_pattern_index_that_no_query_uses(db):
    indexes = job_table_indexes()
    assert [name for name, columns in indexes.items() if columns == ["job_id"]] == ["job_id_unique"]
    assert not [name for name, columns in indexes.items() if columns == ["owner"]]
