"""The agent is never stuck on a capped log: the control plane accepts every chunk past the cap."""

import pytest

from tests.agent.harness import agents_on
from tests.agent.test_node_agent import step, submit
from tests.conftest import container_pool
from trainhub.inventory.models import Node
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob, LogLine


@pytest.mark.django_db(transaction=True)
def test_a_replica_writing_past_the_cap_finishes_with_its_first_lines_and_the_marker(api, nodes, now, tmp_path,
                                                                                      settings):
    settings.TRAINHUB_REPLICA_LOG_MAX_LINES = 10
    job = submit(api, container_pool(command=["python3", "-c", "for n in range(2500): print('line', n)"]))
    group = agents_on(tmp_path, list(Node.objects.filter(pool=nodes["t4"])))
    step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED, job.error
    replica = job.replicas.get()
    assert replica.log_lines == 2500  # three chunks of the agent's 1,000 lines, every one accepted
    texts = list(LogLine.objects.filter(replica=replica).values_list("text", flat=True))
    assert texts == [f"line {n}" for n in range(10)] + [services.truncation_marker(10)]
