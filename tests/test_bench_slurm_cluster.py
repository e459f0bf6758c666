"""The page benchmark and the Slurm page benchmark each build the bench Slurm cluster in one database."""

from django.utils import timezone

from bench.slurm_pages import slurm_cluster
from trainhub.slurm.models import SlurmCluster


def test_the_bench_slurm_cluster_can_be_built_again_on_the_nodes_of_the_previous_one(db):
    now = timezone.now().replace(microsecond=0)
    slurm_cluster(now)

    second, _, _ = slurm_cluster(now)

    assert list(SlurmCluster.objects.values_list("pk", flat=True)) == [second.pk]


def test_the_bench_slurm_cluster_can_have_a_wider_partition_beside_the_usual_one(db):
    from bench.slurm_pages import NODES
    from trainhub.slurm.snapshot import load_cluster

    now = timezone.now().replace(microsecond=0)
    wide, _, _ = slurm_cluster(now, NODES + 4)
    assert len(load_cluster(wide, now=now).partitions["a4"].node_pks) == NODES + 4

    usual, _, _ = slurm_cluster(now)  # the wider pool is another pool: the usual one keeps its size
    assert len(load_cluster(usual, now=now).partitions["a4"].node_pks) == NODES


def _rows_the_planner_counts(table: str) -> int | None:
    """The row count the database's statistics hold for ``table`` (None: never analysed)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            (rows,) = cursor.fetchone()
            return None if rows < 0 else int(rows)
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if cursor.fetchone() is None:
            return None
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = %s LIMIT 1", [table])
        row = cursor.fetchone()
        return None if row is None else int(row[0].split()[0])


def test_the_bench_pending_queue_is_analysed_once_loaded_as_autovacuum_would(db):
    """Without statistics PostgreSQL wrote each pending job of a Slurm pass through the state index, a
    full scan per row: the first pass over 10,000 took 10 s instead of 1 s."""
    from bench.slurm_pages import slurm_queue
    from trainhub.slurm.models import SlurmJob

    now = timezone.now().replace(microsecond=0)
    cluster, _, users = slurm_cluster(now)

    slurm_queue(cluster, users, 40, now)

    assert _rows_the_planner_counts(SlurmJob._meta.db_table) == 40
