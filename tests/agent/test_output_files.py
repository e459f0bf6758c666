"""How the supervisor opens a batch script's --output/--error files (supervisor.open_append): once, never
through a symlink, and a file it creates for a script that runs as another uid belongs to that uid."""

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
