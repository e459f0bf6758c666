"""A real rendezvous between replicas on machines with different addresses (127.0.0.2 and
127.0.0.3, two nodes each): rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1 connects from its
own address, they exchange a message. Two such jobs at once do not collide or cross-talk."""

import time

import pytest
from django.test import override_settings

from tests.agent.harness import agents_on
from tests.conftest import container_pool, job_body, later
from trainhub.inventory.models import Node
from trainhub.inventory.services import node_pool_ensure
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, LogLine
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/v1/projects/alpha/locations/us-central1/customJobs"
CHIEF = """
import os, socket
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's TCPStore: a recent run's TIME_WAIT
server.bind((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
server.listen(1)
server.settimeout(120)
conn, peer = server.accept()
message = conn.recv(200).decode()
conn.sendall(("ack " + os.environ["CLOUD_ML_JOB_ID"]).encode())
print("chief of", os.environ["CLOUD_ML_JOB_ID"], "at", os.environ["MASTER_ADDR"], "got:", message, "from", peer[0])
"""
WORKER = """
import json, os, socket, time
spec = json.loads(os.environ["CLUSTER_SPEC"])
mine = spec["cluster"]["workerpool1"][spec["task"]["index"]].rsplit(":", 1)[0]
for _ in range(600):
    try:
        conn = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), timeout=2,
                                        source_address=(mine, 0))
        break
    except OSError:
        time.sleep(0.1)
conn.sendall(("hello from " + os.environ["CLOUD_ML_JOB_ID"]).encode())
print("worker of", os.environ["CLOUD_ML_JOB_ID"], "got:", conn.recv(200).decode())
"""


@override_settings(TRAINHUB_RENDEZVOUS_PORTS="41000-41099")  # clear of other tests' jobs on the default range
def test_two_jobs_rendezvous_across_two_addresses_without_colliding(api, cast, now, tmp_path):
    pool = node_pool_ensure(name="rdv", machine_type="n1-standard-4", node_count=4)
    nodes = list(Node.objects.filter(pool=pool).order_by("name"))
    addresses = {node.name: ("127.0.0.2" if index % 2 == 0 else "127.0.0.3") for index, node in enumerate(nodes)}
    group = agents_on(tmp_path, nodes, addresses=addresses)
    jobs = []
    for name in ("first", "second"):
        body = job_body(container_pool(command=["python3", "-c", CHIEF]),
                        container_pool(command=["python3", "-c", WORKER]), name=name)
        response = api("uma").post(BASE, body, format="json")
        assert response.status_code == 200, response.content
        jobs.append(CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1]))
    moment = now
    for _ in range(1200):
        moment = later(moment, 0.05)
        group.tick(now=moment)
        scheduler_pass(now=moment)
        if all(CustomJob.objects.get(pk=job.pk).state in states.TERMINAL for job in jobs):
            break
        time.sleep(0.05)
    for job in jobs:
        job.refresh_from_db()
        lines = list(LogLine.objects.filter(job=job).values_list("text", flat=True))
        assert job.state == states.SUCCEEDED, (job.error, lines)
        chief = job.replicas.get(pool_index=0)
        worker = job.replicas.get(pool_index=1)
        chief_address, worker_address = addresses[chief.node.name], addresses[worker.node.name]
        assert f"chief of {job.job_id} at {chief_address} got: hello from {job.job_id} from {worker_address}" in lines
        assert f"worker of {job.job_id} got: ack {job.job_id}" in lines
    # Jobs that share a machine's address get two port pairs.
    spans = [{addresses[replica.node.name] for replica in job.replicas.select_related("node")} for job in jobs]
    first, second = (job.replicas.get(pool_index=0) for job in jobs)
    assert spans[0] & spans[1], "the placement did not put the two jobs on a shared address"
    assert first.master_port != second.master_port
