import logging
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from trainhub.agent.runner import NodeAgent
from trainhub.inventory.selectors import nodes_for_agent


class Command(BaseCommand):
    help = "Run the node agent for the nodes of the given pools (all pools by default)."

    def add_arguments(self, parser):
        parser.add_argument("--pool", action="append", dest="pools", help="node pool name (repeatable)")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks")

    def handle(self, *args, pools, interval, **options):
        nodes = list(nodes_for_agent(pool_names=pools))
        if not nodes:
            raise CommandError("no nodes to serve: create node pools first (make run loads a demo cluster)")
        agent = NodeAgent(nodes=nodes, work_dir=settings.TRAINHUB_WORK_DIR,
                          grace_seconds=settings.TRAINHUB_CANCEL_GRACE_SECONDS)
        lost = agent.recover(now=timezone.now())
        self.stdout.write(f"node agent serving {len(nodes)} node(s); {lost} orphaned replica(s) settled")
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        try:
            while not stopping:
                started = time.monotonic()
                try:
                    agent.tick(now=timezone.now())
                except Exception:  # noqa: BLE001 - one bad tick must not kill the node's agent
                    logging.getLogger(__name__).exception("agent tick failed; retrying")
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            pass
        finally:
            agent.shutdown()
