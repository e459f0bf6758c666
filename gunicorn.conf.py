"""gunicorn settings of trainhub's web process: the Dockerfile, docker-compose, the benchmarks and the
chaos drills all start gunicorn with this file (gunicorn also reads it by itself from the current
directory). Command-line flags still override it.

Threaded workers (gunicorn's ``gthread``) keep HTTP connections alive, so an API client that reuses its
connection (Google's client libraries, the trainhub CLI, the benchmark's clients) does not pay a
TCP handshake per request as it does with the ``sync`` workers, which close every connection; and
while one thread waits on the database or Redis, another serves the next request. Python runs one
thread per process at a time, so the process count is what uses the cores: one per core by default.
A kept-alive connection stays with the worker that accepted it, so two busy clients can share one
process while another idles: docker-compose therefore runs one process per web replica
(WEB_CONCURRENCY=1) behind nginx (deploy/nginx), which chooses the least busy replica per request,
and the benchmarks start the same (bench.environment.start_web).
"""

import multiprocessing
import os

#: gunicorn's threaded worker.
worker_class = "gthread"
#: WEB_CONCURRENCY is also what gunicorn itself reads when no config says otherwise.
workers = int(os.environ.get("WEB_CONCURRENCY") or multiprocessing.cpu_count())
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
#: Seconds an idle kept-alive connection stays open (gunicorn's default is 2).
keepalive = 5
