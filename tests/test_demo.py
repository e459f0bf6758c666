from django.core.management import call_command

from trainhub.iam.models import Membership
from trainhub.inventory.models import Node
from trainhub.resources.models import PersistentResource
from trainhub.resources.services import persistent_resources_advance
from trainhub.scheduling.models import Quota


def test_the_demo_loads_twice_without_duplicating_anything(db):
    call_command("load_demo")
    counts = (Node.objects.count(), Quota.objects.count(), Membership.objects.count(),
              PersistentResource.objects.count())
    call_command("load_demo")
    assert (Node.objects.count(), Quota.objects.count(), Membership.objects.count(),
            PersistentResource.objects.count()) == counts
    assert counts == (21, 4, 1, 1)
    assert Membership.objects.get().role == "admin"


def test_the_demo_resource_takes_one_cpu_pool_node_and_leaves_the_rest_shared(db, now):
    call_command("load_demo")
    persistent_resources_advance(now=now)
    resource = PersistentResource.objects.get(resource_id="demo-pool")
    assert list(Node.objects.filter(dedicated_to=resource.owner).values_list("pool__name", flat=True)) == ["cpu-pool"]
    assert Node.objects.filter(pool__name="cpu-pool", dedicated_to="").count() == 3
