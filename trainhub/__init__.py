"""trainhub: a self-hosted control plane for GPU training clusters.

This package's init imports nothing: the CLI (trainhub.cli) and the node agent import the package
too and must start fast, without Celery or Django. The Celery app lives in trainhub.celery;
`celery -A trainhub` finds it there, and every Django process (web, worker, beat, manage.py,
tests) loads it from SchedulingConfig.ready() so that the apps' shared tasks bind to it.
"""
