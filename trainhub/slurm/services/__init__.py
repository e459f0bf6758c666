"""Every write to Slurm clusters, accounting and jobs happens in this package.

clusters: create / delete clusters, config keys, prolog/epilog scripts, partitions, node resume.
jobs: sbatch, scancel, hold / release, nice. lifecycle: what the agent and the scheduler report
as a job runs (allocation, prolog, batch script, epilog, requeue). accounting: sacctmgr commands.
passes: the scheduler pass. usage: fair-share usage accrual and decay.
"""
