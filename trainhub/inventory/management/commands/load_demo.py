from django.core.management.base import BaseCommand

from trainhub.inventory.demo import demo_load


class Command(BaseCommand):
    help = "Load the demo project, user demo/demo and node pools (idempotent)."

    def handle(self, *args, **options):
        result = demo_load()
        self.stdout.write(f"demo loaded: project {result['project']}, user {result['user']}, {result['pools']} node pools")
