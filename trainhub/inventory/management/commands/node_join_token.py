import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from trainhub.inventory.models import NodePool
from trainhub.inventory.services import join_token_create


class Command(BaseCommand):
    help = "Create a join token for a node pool and print it (shown once): trainhub-agent join --token TOKEN."

    def add_arguments(self, parser):
        parser.add_argument("--pool", required=True, help="the node pool new machines join")
        parser.add_argument("--ttl-hours", type=float, default=24.0, help="hours until it expires (default 24)")
        parser.add_argument("--max-uses", type=int, help="how many machines may join with it (default: any)")
        parser.add_argument("--description", default="", help="a note for the Nodes page")

    def handle(self, *args, pool, ttl_hours, max_uses, description, **options):
        node_pool = NodePool.objects.filter(name=pool).first()
        if node_pool is None:
            raise CommandError(f"no node pool {pool!r}; pools: {', '.join(NodePool.objects.values_list('name', flat=True))}")
        try:
            _, raw = join_token_create(pool=node_pool, created_by="manage.py node_join_token", now=timezone.now(),
                                       ttl=dt.timedelta(hours=ttl_hours), max_uses=max_uses, description=description)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(raw)
