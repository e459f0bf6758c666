import datetime as dt
import json
from pathlib import Path

from django.core.management.base import BaseCommand
from django.utils import timezone

from trainhub.iam.tokens import token_digest
from trainhub.inventory.models import Node, NodeCredential
from trainhub.inventory.services import join_token_create, node_credential_revoke


class Command(BaseCommand):
    help = ("make run: the demo nodes the local agent in --state-dir must (re)join, with a short-lived join "
            "token per pool, as JSON [{node, token}]. A node whose credential that state dir no longer holds "
            "has its old credential revoked first.")

    def add_arguments(self, parser):
        parser.add_argument("--state-dir", type=Path, required=True)

    def handle(self, *args, state_dir, **options):
        now = timezone.now()
        held = set()
        for path in (state_dir / "nodes").glob("*.json"):
            held.add(token_digest(json.loads(path.read_text())["credential"]))
        live = set(NodeCredential.objects.filter(revoked_at__isnull=True).values_list("digest", flat=True))
        to_join: dict = {}
        for node in Node.objects.select_related("pool").order_by("pool__name", "name"):
            digests = set(node.credentials.filter(revoked_at__isnull=True).values_list("digest", flat=True))
            if digests & held & live:
                continue
            if digests:
                node_credential_revoke(node=node, now=now)
            to_join.setdefault(node.pool, []).append(node.name)
        answer = []
        for pool, names in to_join.items():
            _, raw = join_token_create(pool=pool, created_by="make run", now=now, ttl=dt.timedelta(minutes=10),
                                       max_uses=len(names), description="make run's local agent")
            answer += [{"node": name, "token": raw} for name in names]
        self.stdout.write(json.dumps(answer))
