"""Running a replica's container image with podman or docker: the argument lists. Pure Python.

Vertex semantics (CustomJob containerSpec): ``command`` replaces the image's ENTRYPOINT and
``args`` its CMD; with neither the image runs as built. Each replica gets:
- host networking, so peers reach it at its node's address and the job's ports;
- its GPUs: CDI devices ``nvidia.com/gpu=<index>`` where the node has a CDI spec for NVIDIA
  (podman, docker 25+), else docker's ``--gpus device=<indices>``; inside, the container sees
  them from index 0, so CUDA_VISIBLE_DEVICES counts from 0;
- its working directory and output directories bind-mounted at the same paths, and the node's
  bucket directory at /gcs (where Vertex mounts Cloud Storage: /gcs/BUCKET);
- its environment from a file in the replica's directory (not on a command line other users see);
- the unprivileged uid:gid the agent chose, never root.
The image is pulled first (progress and errors go to the replica's log); a registry named in
``insecure_registries`` is reached over plain HTTP (podman's --tls-verify=false).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
GCS_MOUNT = "/gcs"


@dataclass(frozen=True)
class ContainerRuntime:
    #: podman or docker, as found on PATH (or the path given).
    binary: str
    kind: str
    #: Global flags before the subcommand (podman: --runtime /usr/sbin/runc --cgroup-manager=cgroupfs).
    global_args: tuple[str, ...] = ()
    insecure_registries: tuple[str, ...] = ()
    cdi: bool = False

    def base(self) -> list[str]:
        return [self.binary, *self.global_args]

    def _insecure(self, image: str) -> list[str]:
        registry = image.split("/", 1)[0] if "/" in image else ""
        return ["--tls-verify=false"] if self.kind == "podman" and registry in self.insecure_registries else []

    def pull_argv(self, image: str, authfile: str | None = None) -> list[str]:
        auth = ["--authfile", authfile] if authfile and self.kind == "podman" else []
        return [*self.base(), "pull", *self._insecure(image), *auth, image]

    def run_argv(self, *, name: str, image: str, command: list[str], args: list[str], env_file: str,
                 user: str | None, gpu_indices: list[int], mounts: list[tuple[str, str]], workdir: str) -> list[str]:
        argv = [*self.base(), "run", "--rm", "--name", name, "--network", "host", "--env-file", env_file,
                "--workdir", workdir, "--pull", "never"]
        if user:
            argv += ["--user", user]
        for source, target in mounts:
            argv += ["--volume", f"{source}:{target}"]
        argv += self.gpu_args(gpu_indices)
        if command:
            argv += ["--entrypoint", json.dumps(command)]
        return [*argv, image, *args]

    def gpu_args(self, gpu_indices: list[int]) -> list[str]:
        if not gpu_indices:
            return []
        if self.cdi or self.kind == "podman":
            return [flag for index in gpu_indices for flag in ("--device", f"nvidia.com/gpu={index}")]
        return ["--gpus", f"device={','.join(str(index) for index in gpu_indices)}"]

    def signal_argv(self, name: str, signal_name: str) -> list[str]:
        return [*self.base(), "kill", "--signal", signal_name, name]

    def remove_argv(self, name: str) -> list[str]:
        return [*self.base(), "rm", "--force", name]


def has_cdi_gpus(directories: tuple[str, ...] = CDI_SPEC_DIRS) -> bool:
    """A CDI spec for NVIDIA GPUs exists (nvidia-ctk cdi generate writes /etc/cdi/nvidia.yaml)."""
    return any(path.is_file() and "nvidia" in path.name for directory in directories
               if Path(directory).is_dir() for path in Path(directory).iterdir())


def detect_runtime(choice: str, *, global_args: tuple[str, ...] = (), insecure_registries: tuple[str, ...] = ()
                   ) -> ContainerRuntime | None:
    """The runtime ``choice`` names ("podman", "docker", a path, or "auto": podman, else docker);
    None for "subprocess" or when auto finds neither."""
    if choice == "subprocess":
        return None
    candidates = ("podman", "docker") if choice == "auto" else (choice,)
    for candidate in candidates:
        binary = shutil.which(candidate)
        if binary:
            kind = "docker" if "docker" in os.path.basename(binary) else "podman"
            return ContainerRuntime(binary, kind, tuple(global_args), tuple(insecure_registries), has_cdi_gpus())
    if choice != "auto":
        raise FileNotFoundError(f"container runtime {choice!r} not found on PATH")
    return None


def env_file_text(env: dict[str, str]) -> str:
    """NAME=VALUE lines as --env-file reads them; a value cannot hold a newline there, so it is
    refused rather than silently cut."""
    lines = []
    for name, value in env.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"environment variable {name} holds a line break, which a container's env file cannot carry")
        lines.append(f"{name}={value}")
    return "\n".join(lines) + "\n"


def write_registry_auth(directory: Path, login: dict[str, str]) -> Path:
    """A config.json in the format podman's --authfile and docker's DOCKER_CONFIG read, readable by
    the agent alone; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / "config.json"
    token = base64.b64encode(f"{login['username']}:{login['password']}".encode()).decode()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"auths": {login["registry"]: {"auth": token}}}, handle)
    return path
