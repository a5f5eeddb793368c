"""Rendering, installing and reading the Helm chart (deploy/helm/connect-runtime).

The value sets the checks run over are the chart's ``ci/*-values.yaml``: each is
linted, rendered, validated and installed (docs/kubernetes.md, "How the chart is
checked").
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kube_apiserver import tool
from support import REPO
from support.workers import WorkerProcess

CHART = REPO / "deploy" / "helm" / "connect-runtime"
VALUE_SETS = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))


def helm(*args: str, kubeconfig: Path | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [tool("helm"), *args]
    if kubeconfig is not None:
        argv += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def values_args(value_set: str | None, sets: dict[str, str] | None = None) -> list[str]:
    args = ["-f", str(CHART / "ci" / value_set)] if value_set else []
    for key, value in (sets or {}).items():
        # Numbers and booleans as YAML would read them; everything else stays a string.
        typed = value.isdigit() or value in ("true", "false")
        args += ["--set-string" if isinstance(value, str) and not typed else "--set",
                 f"{key}={value}"]
    return args


def render(value_set: str | None, sets: dict[str, str] | None = None,
           release: str = "r", namespace: str = "default") -> list[dict[str, Any]]:
    """``helm template`` of the chart: its objects, parsed."""
    out = helm("template", release, str(CHART), "--namespace", namespace,
               *values_args(value_set, sets)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(objects: Sequence[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind
               and o["metadata"]["name"].endswith(suffix)]
    assert len(matches) == 1, f"expected one {kind} named *{suffix}, found {len(matches)}"
    return matches[0]


def config_map(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The workers' ConfigMap (worker.properties and friends), not the connectors' one."""
    matches = [o for o in objects if o["kind"] == "ConfigMap"
               and "worker.properties" in (o.get("data") or {})]
    assert len(matches) == 1, f"expected one ConfigMap with worker.properties, {len(matches)}"
    return matches[0]


def worker_properties(objects: Sequence[dict[str, Any]]) -> str:
    return str(config_map(objects)["data"]["worker.properties"])


def pod_environment(statefulset: dict[str, Any], pod_name: str, namespace: str,
                    secrets: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """The worker container's environment as the kubelet would make it for pod
    ``pod_name``: field references, Secret references (from ``secrets``:
    name -> key -> value) and ``$(VAR)`` expansion of earlier variables."""
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    env: dict[str, str] = {}
    for var in container.get("env", []):
        source = var.get("valueFrom")
        if source is None:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)),
                           str(var.get("value", "")))
        elif "fieldRef" in source:
            value = fields[source["fieldRef"]["fieldPath"]]
        else:
            ref = source["secretKeyRef"]
            value = (secrets or {})[ref["name"]][ref["key"]]
        env[var["name"]] = value
    return env


POD_CONFIG_ROOT = "/etc/connect-runtime/"


def pod_files(objects: Sequence[dict[str, Any]], root: Path,
              secrets: dict[str, dict[str, str]] | None = None) -> Path:
    """Write the files the worker container mounts from the ConfigMap and from
    Secrets (``secrets``: name -> key -> value) under ``root``, as the kubelet
    would mount them (``items``, ``subPath``); returns ``root``.

    Paths under /etc/connect-runtime/ inside the ConfigMap's files (the JAAS
    file's credentials file, say) are moved under ``root`` the same way, so the
    files keep pointing at one another; not in the executor pod template, whose
    paths are the executor pods'.
    """
    config_maps = {o["metadata"]["name"]: o.get("data") or {}
                   for o in objects if o["kind"] == "ConfigMap"}
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    relocated = f"{root}{POD_CONFIG_ROOT}"
    for mount in pod["containers"][0]["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            # The workers' ConfigMap, or the declared connectors' (a directory).
            data = {k: v if k == "executor-pod-template.yaml"
                    else v.replace(POD_CONFIG_ROOT, relocated)
                    for k, v in config_maps[volume["configMap"]["name"]].items()}
        elif "secret" in volume:
            data = (secrets or {})[volume["secret"]["secretName"]]
        else:
            continue  # emptyDir and the like: nothing the chart puts in them
        items = volume.get("configMap", volume.get("secret", {})).get("items")
        files = {i["path"]: data[i["key"]] for i in items} if items else dict(data)
        target = root / mount["mountPath"].lstrip("/")
        if "subPath" in mount:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(files[mount["subPath"]])
            continue
        target.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (target / name).write_text(text)
    return root


def run_exec_probe(probe: dict[str, Any], env: dict[str, str],
                   root: Path) -> subprocess.CompletedProcess[str]:
    """Run an exec probe of the worker container as the kubelet would run it in
    the container: the pod's environment ``env``, its files under ``root``
    (:func:`pod_files`), ``python`` being the image's (here, this one)."""
    command = probe["exec"]["command"]
    assert command[0] == "python", command
    argv = [sys.executable, *(arg.replace(POD_CONFIG_ROOT, f"{root}{POD_CONFIG_ROOT}")
                              for arg in command[1:])]
    return subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=probe.get("timeoutSeconds", 1))


class PodWorker(WorkerProcess):
    """The worker process a pod would run, run on this machine instead, started
    at once: a :class:`~support.workers.WorkerProcess` (spawning, ``wait_healthy``,
    ``stop``: SIGTERM as the kubelet sends it, SIGKILL after 60 s) from the
    pod's files rather than the harness's own worker.properties.

    ``files`` are the properties files in the order the image's entrypoint
    passes them (the ConfigMap's, then overrides); ``env`` the pod's
    environment (:func:`pod_environment`). It listens on 127.0.0.1:``port``;
    its log is ``workdir/worker.log``. An HTTPS worker (``scheme``) is checked
    with ``verify`` (an SSL context trusting its CA, holding a client
    certificate if it requires one).
    """

    def __init__(self, workdir: Path, files: Sequence[Path], env: dict[str, str],
                 port: int, scheme: str = "http",
                 verify: ssl.SSLContext | bool = True) -> None:
        # The files say which broker and group: the harness's settings go unused.
        super().__init__("", "", port, workdir, env=env, scheme=scheme, verify=verify,
                         config_files=files)
        self.log_path = workdir / "worker.log"
        self.start(wait=False)

    def output(self) -> str:
        """The worker's whole log."""
        return self.log_path.read_text(errors="replace")
