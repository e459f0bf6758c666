from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from trainhub.iam.services import api_token_get_or_create, api_token_rotate


class Command(BaseCommand):
    help = ("Print a usable API token for USER. Only a digest of a token is stored, so an existing token "
            "cannot be printed again: a new one replaces it (the old one stops working); --rotate always does.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="revoke the current token and print a new one")

    def handle(self, *args, username, rotate, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        token = api_token_rotate(user=user) if rotate else api_token_get_or_create(user=user)
        if token.key is None:
            token = api_token_rotate(user=user)
            self.stderr.write(f"{username} had a token, which cannot be shown (only its digest is stored): "
                              "issued a new one; the previous token no longer works.")
        self.stdout.write(token.key)
