"""Fixtures of the deployment checks, one per session for every module here.

* ``docker_engine``: a private dockerd (docker_engine.py). One per session: its
  data root is locked for the engine's life, so a second engine would wait.
* ``image``: the project's image, built on it by deploy/docker/build.sh
  (minutes on a new machine, seconds after), shared by the image tests and the
  Kubernetes cluster tests.
* ``kube``: a real single-node Kubernetes cluster with that image loaded
  (kube_cluster.py), taken down at the end of the session.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from docker_engine import DockerEngine
from kube_cluster import Kube, running_cluster
from support import REPO

BUILD_SH = REPO / "deploy" / "docker" / "build.sh"


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerEngine]:
    engine = DockerEngine().start()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def image(docker_engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> str:
    log = tmp_path_factory.mktemp("image-build") / "build.log"
    with log.open("wb") as err:
        done = subprocess.run(["bash", str(BUILD_SH)], env=docker_engine.env(),
                              stdout=subprocess.PIPE, stderr=err, timeout=1500, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise AssertionError(f"build.sh exited with {done.returncode}:\n{tail}")
    return done.stdout.decode().strip().splitlines()[-1]


@pytest.fixture(scope="session")
def kube(docker_engine: DockerEngine, image: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with running_cluster(docker_engine.env(), image, tmp_path_factory.mktemp("kube")) as kube:
        yield kube
