from django.apps import AppConfig


class SlurmConfig(AppConfig):
    name = "trainhub.slurm"
    label = "slurm"
    verbose_name = "Slurm clusters"

    def ready(self) -> None:
        """Slurm clusters on the dashboards: their GPUs on the allocation chart (each cluster seen
        only by its projects' members), sshare's rows on the fair-share chart, and their jobs
        counted with the CustomJobs (queue depth, jobs by state, why jobs wait, the KPIs)."""
        from trainhub.dashboards.sources import (
            register_capacity_source,
            register_fairshare_provider,
            register_job_source,
        )
        from trainhub.slurm.dashboard import SLURM_JOBS
        from trainhub.slurm.selectors import (
            CAPACITY_SOURCE,
            capacity_scopes_for_user,
            cluster_capacity,
            fairshare_rows_for_user,
        )

        register_capacity_source(cluster_capacity, name=CAPACITY_SOURCE, visible_scopes=capacity_scopes_for_user)
        register_fairshare_provider(fairshare_rows_for_user)
        register_job_source(SLURM_JOBS)
