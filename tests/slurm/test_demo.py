"""The demo's Slurm cluster: the seed's example, loaded idempotently, and usable by the demo user."""

from django.core.management import call_command

from trainhub.inventory.models import Node
from trainhub.slurm.demo import SEED_SLURM_SPEC
from trainhub.slurm.models import Account, Association, Partition, Qos, SlurmCluster


def test_the_demo_cluster_is_the_seeds_example_and_loads_twice(db):
    call_command("load_demo")
    counts = [model.objects.count() for model in (SlurmCluster, Partition, Account, Association, Qos)]
    call_command("load_demo")
    assert [model.objects.count() for model in (SlurmCluster, Partition, Account, Association, Qos)] == counts
    cluster = SlurmCluster.objects.get()
    assert cluster.config == SEED_SLURM_SPEC["config"]
    assert cluster.prolog_scripts == SEED_SLURM_SPEC["prolog_bash_scripts"]
    assert cluster.epilog_scripts == SEED_SLURM_SPEC["epilog_bash_scripts"]
    assert cluster.default_partition == "a4" and cluster.login_pool.name == "slurm-login"
    assert set(Node.objects.filter(dedicated_to=cluster.owner_key).values_list("pool__name", flat=True)) == {
        "slurm-a4", "slurm-login"}
    assert set(Account.objects.values_list("name", flat=True)) == {"root", "ml", "research"}
    assert Association.objects.filter(user="demo").count() == 2


def test_the_demo_user_submits_to_the_demo_cluster(db):
    from django.contrib.auth import get_user_model

    from trainhub.slurm.services.jobs import Submission, job_submit

    call_command("load_demo")
    job = job_submit(cluster=SlurmCluster.objects.get(), user=get_user_model().objects.get(username="demo"),
                     submission=Submission(argv=("-A", "research", "-q", "high", "--gres=gpu:8", "--wrap", "x")))
    assert (job.account, job.qos, job.partition) == ("research", "high", "a4")


def test_the_demo_cluster_page_shows_no_placeholder_and_no_python_text(client, db):
    from trainhub.slurm.demo import DEMO_HOME

    call_command("load_demo")
    cluster = SlurmCluster.objects.get()
    client.login(username="demo", password="demo")
    page = client.get(f"/slurm/projects/demo/locations/us-central1/clusters/{cluster.cluster_id}/").content.decode()
    assert DEMO_HOME in page and "PROJECT_ID" not in page and "FILESTORE_INSTANCE_ID" not in page
    assert "{&#x27;" not in page and "[&#x27;" not in page  # no Python dict or list text in the change log
    assert "config=(AccountingStorageEnforce=associations,limits,qos" in page and "partitions=a4,a4-urgent" in page
