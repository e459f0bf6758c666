"""sbatch --output/--error/--chdir stay inside the cluster's file system: checked after every %
substitution at submit time, and (jobenv.output_file / cluster_file, for the agent) with symlinks
resolved on the host."""

import pytest

from tests.slurm.conftest import sbatch
from trainhub.slurm.jobenv import OutsideCluster, cluster_file, output_file
from trainhub.slurm.models import SlurmJob

ESCAPE = "/%x/%x/%x/%x/%x/%x/%x/%x/%x/%x/tmp/pwn-%j.txt"


@pytest.mark.parametrize("args", [
    ["-J", "..", f"--output={ESCAPE}", "--wrap", "x"],
    ["-J", "..", f"--error={ESCAPE}", "--wrap", "x"],
    ["-J", "a/../../../b", "-o", "/%x.out", "--wrap", "x"],
    ["-J", "..", "-o", "%x/%x/out", "--wrap", "x"],
])
def test_an_output_path_that_leaves_the_cluster_after_substitution_is_refused(api, accounts, args):
    response = sbatch(api, "uma", *args)
    assert response.status_code == 400, response.content
    assert "the path may not leave the cluster's file system" in response.json()["error"]["message"]
    assert not SlurmJob.objects.exists()


def test_a_job_name_with_dots_is_fine_where_it_makes_no_path_component(api, accounts):
    response = sbatch(api, "uma", "-J", "..", "-o", "/scratch/run-%x-%j.out", "--wrap", "x")
    assert response.status_code == 200, response.content


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "slurm" / "c1"
    (root / "home" / "uma").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return root


def test_cluster_file_maps_absolute_and_relative_paths_under_the_root(root):
    assert cluster_file(root, "/scratch/a.out") == root / "scratch" / "a.out"
    assert cluster_file(root, "a.out", cwd="/home/uma") == root / "home" / "uma" / "a.out"


@pytest.mark.parametrize("path", ["../../outside/x", "/home/../../outside/x", "/a\x00b"])
def test_cluster_file_refuses_dot_dot_and_nul(root, path):
    with pytest.raises(OutsideCluster):
        cluster_file(root, path, cwd="/home/uma")


def test_cluster_file_refuses_a_symlink_that_leads_outside(root, tmp_path):
    (root / "home" / "uma" / "link").symlink_to(tmp_path / "outside")
    (root / "home" / "uma" / "inside").symlink_to(root / "home")
    with pytest.raises(OutsideCluster, match="symlink"):
        cluster_file(root, "/home/uma/link/pwn.txt")
    with pytest.raises(OutsideCluster, match="symlink"):
        cluster_file(root, "link", cwd="/home/uma")
    assert cluster_file(root, "inside/x", cwd="/home/uma") == root / "home" / "uma" / "inside" / "x"


def test_output_file_checks_the_path_after_every_substitution(root):
    names = dict(job_id=7, user="uma", node="a4-0", cwd="/home/uma")
    assert output_file(root, "out-%x-%j-%N.txt", job_name="run", **names) == root / "home" / "uma" / "out-run-7-a4-0.txt"
    with pytest.raises(OutsideCluster):
        output_file(root, ESCAPE, job_name="..", **names)
