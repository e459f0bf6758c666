from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from trainhub.iam.services import api_token_get_or_create, api_token_rotate


class Command(BaseCommand):
    help = "Print USER's API token, creating it if needed (--rotate replaces it)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="revoke the current token and print a new one")

    def handle(self, *args, username, rotate, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        token = api_token_rotate(user=user) if rotate else api_token_get_or_create(user=user)
        self.stdout.write(token.key)
