"""The agents' long-poll process (trainhub.inventory.longpoll), as wsgi.py is gunicorn's:

    uvicorn trainhub.longpoll_asgi:application --host 0.0.0.0 --port 8001 --loop uvloop --http httptools

(trainhub.longpoll_server has the whole command line make run and the benchmarks use).

Set TRAINHUB_AGENT_LONG_POLL_URL on the web process to the URL agents reach it at.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")
django.setup()

from trainhub.inventory.longpoll import long_poll_app  # noqa: E402 - needs the settings above

application = long_poll_app()
