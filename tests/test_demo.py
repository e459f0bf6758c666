from django.core.management import call_command

from trainhub.iam.models import Membership
from trainhub.inventory.models import Node
from trainhub.scheduling.models import Quota


def test_the_demo_loads_twice_without_duplicating_anything(db):
    call_command("load_demo")
    counts = (Node.objects.count(), Quota.objects.count(), Membership.objects.count())
    call_command("load_demo")
    assert (Node.objects.count(), Quota.objects.count(), Membership.objects.count()) == counts
    assert counts[0] == 21 and counts[1] == 4
    assert Membership.objects.get().role == "admin"
