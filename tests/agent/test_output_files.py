"""How the supervisor opens a batch script's --output/--error files (supervisor.open_append): once, never
through a symlink (in any component, issue 18), and a file it creates for a script that runs as another uid belongs to that uid."""

import errno
import os

import pytest

from trainhub.agent.supervisor import open_append

OWNER = {"uid": 4242, "gid": 4343}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")


@needs_root
def test_a_file_it_creates_belongs_to_the_user_the_script_runs_as(tmp_path):
    os.close(open_append(str(tmp_path / "slurm-1.out"), OWNER))
    stat = (tmp_path / "slurm-1.out").stat()
    assert (stat.st_uid, stat.st_gid, stat.st_mode & 0o777) == (4242, 4343, 0o644)


@needs_root
def test_a_file_that_existed_keeps_its_owner(tmp_path):
    existing = tmp_path / "shared.log"
    existing.write_text("before\n")
    os.chown(existing, 777, 778)
    fd = open_append(str(existing), OWNER)
    os.write(fd, b"after\n")
    os.close(fd)
    assert (existing.stat().st_uid, existing.stat().st_gid) == (777, 778)
    assert existing.read_text() == "before\nafter\n"


def test_without_an_owner_the_file_is_the_openers(tmp_path):
    os.close(open_append(str(tmp_path / "out")))
    assert (tmp_path / "out").stat().st_uid == os.geteuid()


def test_a_symlink_is_refused_and_its_target_left_alone(tmp_path):
    target = tmp_path / "host-file"
    target.write_text("precious\n")
    (tmp_path / "slurm-1.out").symlink_to(target)
    with pytest.raises(OSError) as caught:
        open_append(str(tmp_path / "slurm-1.out"), OWNER)
    assert caught.value.errno == errno.ELOOP
    assert target.read_text() == "precious\n" and target.stat().st_uid == os.geteuid()


@pytest.mark.parametrize("swapped", ["dir", "dir/sub"])
def test_a_directory_swapped_for_a_symlink_after_the_check_is_refused(tmp_path, swapped):
    # The agent resolved and checked cluster/dir/sub/slurm-1.out; the job then made one of its
    # directories a symlink to a host directory before the supervisor opened the file.
    host = tmp_path / "host"
    host.mkdir()
    checked = tmp_path / "cluster" / "dir" / "sub"
    checked.mkdir(parents=True)
    (tmp_path / "cluster" / swapped).rename(tmp_path / "moved")
    (tmp_path / "cluster" / swapped).symlink_to(host if swapped == "dir/sub" else tmp_path / "decoy")
    if swapped == "dir":
        (tmp_path / "decoy" / "sub").mkdir(parents=True)
    with pytest.raises(OSError) as caught:
        open_append(str(checked / "slurm-1.out"), OWNER)
    assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR) and caught.value.filename == str(checked / "slurm-1.out")
    assert list(host.iterdir()) == [] and not (tmp_path / "decoy" / "sub" / "slurm-1.out").exists()


def test_a_path_without_symlinks_opens_through_every_directory(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    fd = open_append(str(tmp_path / "a" / "b" / "out"))
    os.write(fd, b"x\n")
    os.close(fd)
    assert (tmp_path / "a" / "b" / "out").read_text() == "x\n"
