"""The container executor for real: podman (with runc) pulls an image from a registry on
127.0.0.1 and runs each replica in it, as Vertex runs a CustomJob's container. Needs podman,
runc, docker-registry and busybox-static from Debian (.ci/run installs them); skipped, saying so,
where they are missing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.agent.harness import agents_on
from tests.conftest import container_pool, job_body, later
from trainhub.agent.containers import detect_runtime
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, LogLine
from trainhub.scheduling.services import scheduler_pass

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"
RUNC = "/usr/sbin/runc"
TOOLS = ("podman", "docker-registry", "busybox")
missing = [tool for tool in TOOLS if not shutil.which(tool)] + ([] if os.path.exists(RUNC) else [RUNC])
pytestmark = [pytest.mark.skipif(bool(missing), reason=f"container tests need {', '.join(missing)} "
                                                       "(apt-get install podman runc docker-registry busybox-static)"),
              pytest.mark.django_db(transaction=True)]
#: podman on these machines: runc (crun fails with cgroups in hybrid mode) and cgroupfs.
RUNTIME_ARGS = ("--runtime", RUNC, "--cgroup-manager=cgroupfs")
APPLETS = ("sh", "echo", "cat", "id", "sleep", "nc", "ls", "env")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve_registry(root: Path, login: tuple[str, str] | None = None):
    """A CNCF distribution registry on 127.0.0.1 holding a FROM-scratch busybox image whose
    `start` prints its arguments (the seed's config.yaml runs `start port=8500`); with ``login``,
    it answers only that user (htpasswd, bcrypt)."""
    conf = root / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = []\n")
    os.environ["CONTAINERS_CONF"] = str(conf)
    port = _free_port()
    auth = ""
    if login:
        import bcrypt

        (root / "htpasswd").write_text(f"{login[0]}:{bcrypt.hashpw(login[1].encode(), bcrypt.gensalt()).decode()}\n")
        auth = f"auth:\n  htpasswd:\n    realm: trainhub-test\n    path: {root / 'htpasswd'}\n"
    (root / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n{auth}")
    server = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    context = root / "image"
    (context / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("busybox"), context / "bin" / "busybox")
    for applet in APPLETS:
        (context / "bin" / applet).symlink_to("busybox")
    (context / "bin" / "start").write_text('#!/bin/sh\necho "training started: $*"\n')
    (context / "bin" / "start").chmod(0o755)
    (context / "Containerfile").write_text("FROM scratch\nCOPY bin/ /bin/\n")
    address = f"127.0.0.1:{port}"
    image = f"{address}/trainhub-test/busybox:{port}"
    podman = ["podman", *RUNTIME_ARGS]
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["sh", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], capture_output=True).returncode \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run([*podman, "build", "-q", "-t", image, str(context)], check=True, capture_output=True)
        creds = ["--creds", f"{login[0]}:{login[1]}"] if login else []
        subprocess.run([*podman, "push", "--tls-verify=false", *creds, image], check=True, capture_output=True)
        subprocess.run([*podman, "rmi", "-f", image], check=True, capture_output=True)  # the agent must pull it
        yield {"address": address, "image": image}
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    yield from _serve_registry(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="session")
def private_registry(tmp_path_factory):
    yield from _serve_registry(tmp_path_factory.mktemp("private-registry"), login=("robot", "pull-secret-1"))


@pytest.fixture
def agents(registry, private_registry, tmp_path, nodes):
    runtime = detect_runtime("podman", global_args=RUNTIME_ARGS,
                             insecure_registries=(registry["address"], private_registry["address"]))
    return agents_on(tmp_path, runtime=runtime)


def submit(api, *pools):
    response = api("uma").post(BASE, job_body(*pools), format="json")
    assert response.status_code == 200, response.content
    return CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])


def run_to_end(group, job, now, limit=1200):
    moment = now
    for _ in range(limit):
        moment = later(moment, 0.05)
        group.tick(now=moment)
        scheduler_pass(now=moment)
        job.refresh_from_db()
        if job.state in states.TERMINAL:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job stuck in {job.state}")


def texts(job):
    return list(LogLine.objects.filter(job=job).order_by("id").values_list("text", flat=True))


def test_the_seeds_container_job_pulls_its_image_and_succeeds(api, agents, registry, now):
    pool = container_pool(command=["start"], args=["port=8500"])
    pool["containerSpec"]["imageUri"] = registry["image"]
    job = run_to_end(agents, submit(api, pool), now)
    assert job.state == states.SUCCEEDED, (job.error, texts(job))
    assert "training started: port=8500" in texts(job)
    assert any(f"pulling {registry['image']} with podman" in text for text in texts(job))


def test_args_alone_replace_the_images_cmd_and_the_replica_gets_vertex_variables(api, agents, registry, now):
    pool = container_pool(command=["sh", "-c", "echo job=$CLOUD_ML_JOB_ID; id -u"], args=[])
    pool["containerSpec"]["imageUri"] = registry["image"]
    job = run_to_end(agents, submit(api, pool), now)
    assert job.state == states.SUCCEEDED, (job.error, texts(job))
    assert f"job={job.job_id}" in texts(job)


def test_two_replicas_reach_each_other_at_master_addr_and_port(api, agents, registry, now):
    listen = ["sh", "-c", "nc -l -p $MASTER_PORT"]
    # The message is in nc's stdin before it connects (a here-document, not `echo |`): the listener shuts its
    # write side at once (its stdin is empty), and a client whose stdin was still empty would take that EOF
    # as the end of the conversation and exit 0 without sending anything.
    connect = ["sh", "-c", "for i in $(seq 600); do nc $MASTER_ADDR $MASTER_PORT <<EOF && exit 0\n"
                           "hello from rank $RANK\nEOF\nsleep 0.2; done; exit 1"]
    chief, worker = container_pool(command=listen), container_pool(command=connect)
    for pool in (chief, worker):
        pool["containerSpec"]["imageUri"] = registry["image"]
    job = run_to_end(agents, submit(api, chief, worker), now)
    assert job.state == states.SUCCEEDED, (job.error, texts(job))
    assert "hello from rank 1" in texts(job)


def test_a_missing_image_fails_the_job_with_the_registrys_message(api, agents, registry, now):
    pool = container_pool(command=["start"])
    pool["containerSpec"]["imageUri"] = f"{registry['address']}/trainhub-test/no-such-image:1"
    job = run_to_end(agents, submit(api, pool), now)
    assert job.state == states.FAILED
    message = job.error["message"]
    assert message.startswith("The replica workerpool0-0 could not start: the image could not be pulled:")
    assert "manifest unknown" in message or "not found" in message, message


def test_a_private_image_is_pulled_with_the_projects_registry_login(api, agents, private_registry, cast, now):
    from django.utils import timezone

    from trainhub.iam.services import registry_credential_set

    pool = container_pool(command=["start"], args=["private=yes"])
    pool["containerSpec"]["imageUri"] = private_registry["image"]
    refused = run_to_end(agents, submit(api, pool), now)
    assert refused.state == states.FAILED
    assert "could not be pulled" in refused.error["message"]
    assert "unauthorized" in refused.error["message"].lower() or "authentication" in refused.error["message"].lower()
    registry_credential_set(project=cast["alpha"], registry=private_registry["address"], username="robot",
                            password="pull-secret-1", actor="test", now=timezone.now())
    job = run_to_end(agents, submit(api, pool), now)
    assert job.state == states.SUCCEEDED, (job.error, texts(job))
    assert "training started: private=yes" in texts(job)


def test_cancel_stops_the_container_through_the_runtime(api, agents, registry, now):
    pool = container_pool(command=["sh", "-c", "echo up; sleep 600"])
    pool["containerSpec"]["imageUri"] = registry["image"]
    job = submit(api, pool)
    moment = now
    for _ in range(1200):
        moment = later(moment, 0.05)
        agents.tick(now=moment)
        scheduler_pass(now=moment)
        if "up" in texts(job):
            break
        time.sleep(0.05)
    assert api("uma").post(f"{BASE}/{job.job_id}:cancel", {}, format="json").status_code == 200
    job = run_to_end(agents, job, moment)
    assert job.state == states.CANCELLED
    name = f"trainhub-{job.replicas.get().node.name}-{job.replicas.get().pk}"
    listed = subprocess.run(["podman", *RUNTIME_ARGS, "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert name not in listed
