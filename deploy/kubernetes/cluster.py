"""A real single-node Kubernetes cluster on this machine, for trying the chart
and for the tests that run it (tests/deploy/).

    cluster.sh up                 start it (and a Kafka broker the pods reach)
    cluster.sh load-image IMAGE   copy IMAGE from the docker engine at DOCKER_HOST into the node
    cluster.sh env                print KUBECONFIG=... and the broker's address, for eval
    cluster.sh status             what runs, by pid
    cluster.sh down               stop everything and remove what it made

What runs, every piece a real one (docs/kubernetes.md, "A cluster on one
machine"): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kube-proxy (iptables) as host processes; a kubelet on Debian's containerd (CRI
plugin, overlayfs) and runc; pods on a bridge (CNI ``bridge`` + ``host-local``);
CoreDNS as a pod behind the ``kube-dns`` Service; a Kafka broker on the
bridge's gateway address. The binaries come from ``tools.sh`` (built once per
machine, cached by version under ~/.cache/connect-runtime).

Nothing leaves the machine: pods (``POD_CIDR``) and Services
(``SERVICE_CIDR``) live in 100.72.0.0/16, inside the shared address space of
RFC 6598, which no interface of the host may use; pods get a route to that /16
only (no default route), nothing is masqueraded, a FORWARD rule drops any
packet of those ranges that would cross another interface, and CoreDNS answers
for cluster.local alone (no upstream resolver).

Two things a host may need that a usual node does not. Both are done on every
host: where they are not needed, pods merely lose the negative OOM score the
kubelet asks for, and ``failCgroupV1`` has no effect on cgroup v2:

* on a host that refuses a negative ``oom_score_adj`` even to root, no pod would
  start, since the kubelet asks -998 for every pod sandbox (and -997 for
  Guaranteed pods): containerd calls runc through a wrapper that clamps
  ``process.oomScoreAdj`` to 0 first;
* on a host with cgroup v1, a kubelet from 1.35 on starts only with
  ``failCgroupV1: false`` (cgroup v1 is in maintenance; v1.37.2 is the version
  the project already builds, and one version for every binary keeps one build).

One cluster per machine at a time (fixed addresses and iptables chains): ``up``
holds a lock for the cluster's life. ``down`` leaves no process, mount, network
namespace, bridge, iptables rule, cgroup or folder of the cluster behind, and
says what it had to remove by force.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import gzip
import hashlib
import io
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TOOLS_SH = HERE / "tools.sh"
KAFKA_SH = REPO / "deploy" / "kafka.sh"
CACHE = Path(os.environ.get("CONNECT_RUNTIME_CACHE", Path.home() / ".cache" / "connect-runtime"))
STATE = Path(os.environ.get("CONNECT_RUNTIME_CLUSTER_DIR", "/tmp/connect-runtime-cluster"))

# The addresses. 100.64.0.0/10 is RFC 6598's shared address space: no
# interface here uses it, and nothing routes it off the machine.
CLUSTER_RANGE = "100.72.0.0/16"
POD_CIDR = "100.72.0.0/24"
GATEWAY = "100.72.0.1"          # the bridge's address: API server, kubelet, Kafka
SERVICE_CIDR = "100.72.16.0/24"
KUBERNETES_SERVICE_IP = "100.72.16.1"
DNS_SERVICE_IP = "100.72.16.10"
BRIDGE = "crk0"
NODE = "crk-node"
API_PORT = 6443
KUBELET_PORT = 10250
KAFKA_PORT = 9092
CLUSTER_DOMAIN = "cluster.local"
COREDNS_IMAGE = "localhost/connect-runtime/coredns:{version}"
PAUSE_IMAGE = "localhost/connect-runtime/pause:{version}"
ISOLATE_CHAIN = "CRK-ISOLATE"
# Chains the kubelet, kube-proxy and this script add: removed by down.
CHAIN_PREFIXES = ("KUBE-", "CNI-", "CRK-")
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1",
           "net/bridge/bridge-nf-call-ip6tables": "1"}
PROCESS_ORDER = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                 "containerd", "kubelet", "kube-proxy"]


def log(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


class ClusterError(Exception):
    """A step of up or down failed; the message says which and why."""


@functools.cache
def tool(name: str) -> str:
    """The path of a tool, built or installed once per machine by tools.sh."""
    done = subprocess.run(["bash", str(TOOLS_SH), name], stdout=subprocess.PIPE, text=True,
                          check=False, timeout=3600)
    if done.returncode != 0:
        raise ClusterError(f"tools.sh {name} failed (exit {done.returncode})")
    return done.stdout.strip().splitlines()[-1]


def run(*argv: str, check: bool = True, input: bytes | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(list(argv), input=input.decode() if input is not None else None,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as e:
        raise ClusterError(f"{argv[0]}: not installed ({e})") from e
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(argv)}: exit {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()}")
    return done


def wait_for(condition: Callable[[], Any], timeout: float, what: str,
             interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the state folder ------------------------------------------------------------


@dataclass
class State:
    """What up made, written to ``state.json`` so down (from another process)
    can undo it."""

    dir: Path
    pids: dict[str, int] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)   # the values before up
    admin_token: str = ""
    etcd_port: int = 0
    kafka: str = ""

    @property
    def file(self) -> Path:
        return self.dir / "state.json"

    def save(self) -> None:
        self.file.write_text(json.dumps({
            "pids": self.pids, "sysctls": self.sysctls, "admin_token": self.admin_token,
            "etcd_port": self.etcd_port, "kafka": self.kafka}, indent=1))

    @classmethod
    def load(cls, directory: Path) -> State:
        state = cls(directory)
        with contextlib.suppress(FileNotFoundError, ValueError):
            raw = json.loads(state.file.read_text())
            state.pids = {k: int(v) for k, v in raw.get("pids", {}).items()}
            state.sysctls = dict(raw.get("sysctls", {}))
            state.admin_token = str(raw.get("admin_token", ""))
            state.etcd_port = int(raw.get("etcd_port", 0))
            state.kafka = str(raw.get("kafka", ""))
        return state

    # paths
    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def containerd_sock(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.dir / "kubelet"

    def log_file(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"


LOCK_FILE = CACHE / "cluster.lock"
LAST_LOGS = CACHE / "cluster-logs"


def hold_lock() -> int:
    """An exclusive lock for the cluster's life, held by the first daemon
    started (it inherits the descriptor): a second ``up`` fails at once."""
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ClusterError(f"another cluster is up on this machine ({LOCK_FILE} is held); "
                           f"'cluster.sh down' stops it") from None
    os.set_inheritable(fd, True)
    return fd


# -- certificates ----------------------------------------------------------------


def openssl(*args: str) -> None:
    run("openssl", *args)


def make_control_plane_pki(pki: Path) -> None:
    """The control plane's keys and certificates, made with openssl: one CA for
    the cluster; the API server's serving certificate (its names include the
    kubernetes Service's IP and DNS names, which pods use); the client
    certificate the API server presents to the kubelet; the service account
    signing key."""
    pki.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
            "-subj", "/CN=connect-runtime-cluster-ca", "-keyout", str(pki / "ca.key"),
            "-out", str(pki / "ca.crt"))

    def issue(name: str, subject: str, extensions: str) -> None:
        ext = pki / f"{name}.ext"
        ext.write_text(extensions)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                "-keyout", str(pki / f"{name}.key"), "-out", str(pki / f"{name}.csr"))
        openssl("x509", "-req", "-in", str(pki / f"{name}.csr"), "-CA", str(pki / "ca.crt"),
                "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "30",
                "-extfile", str(ext), "-out", str(pki / f"{name}.crt"))

    names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{CLUSTER_DOMAIN}", "localhost"]
    alt = ",".join([f"DNS:{n}" for n in names]
                   + [f"IP:{ip}" for ip in (GATEWAY, KUBERNETES_SERVICE_IP, "127.0.0.1")])
    issue("apiserver", "/CN=kube-apiserver",
          f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\n")
    issue("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
          "extendedKeyUsage=clientAuth\n")
    openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
    openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def kubeconfig(path: Path, ca: Path, user: str, token: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "connect-runtime",
        "clusters": [{"name": "connect-runtime", "cluster": {
            "server": f"https://{GATEWAY}:{API_PORT}", "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "connect-runtime",
                      "context": {"cluster": "connect-runtime", "user": user}}],
    }, indent=1))
    path.chmod(0o600)


# -- images ----------------------------------------------------------------------


def oci_archive(name: str, files: dict[str, tuple[bytes, int]], entrypoint: list[str],
                user: str = "", env: list[str] | None = None) -> bytes:
    """An OCI image archive (what ``ctr images import`` reads) of one layer
    holding ``files`` (path -> (content, mode)), named ``name``."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as tar:
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))
    diff_id = "sha256:" + hashlib.sha256(layer_tar.getvalue()).hexdigest()
    layer = gzip.compress(layer_tar.getvalue(), mtime=0)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user, "Env": env or []},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    blobs: dict[str, bytes] = {}

    def blob(data: bytes, media_type: str) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config, "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")]}).encode()
    descriptor = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    descriptor["annotations"] = {"io.containerd.image.name": name,
                                 "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}
    index = json.dumps({"schemaVersion": 2, "manifests": [descriptor]}).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        entries = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index}
        entries |= {f"blobs/sha256/{d}": data for d, data in blobs.items()}
        for path, data in entries.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def ctr(state: State, *args: str, input: bytes | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run("ctr", "--address", str(state.containerd_sock), "--namespace", "k8s.io", *args,
               input=input, timeout=timeout)


def import_archive(state: State, archive: Path) -> None:
    ctr(state, "images", "import", "--no-unpack=false", str(archive))


def import_static_images(state: State) -> tuple[str, str]:
    """The pause image (the sandbox) and CoreDNS's, each one static binary."""
    kubernetes_version = Path(tool("kubelet")).parent.name.removeprefix("kubernetes-")
    coredns = Path(tool("coredns"))
    coredns_version = coredns.parent.name.removeprefix("coredns-")
    pause_name = PAUSE_IMAGE.format(version=kubernetes_version)
    coredns_name = COREDNS_IMAGE.format(version=coredns_version)
    for name, binary, entry, user in (
            (pause_name, Path(tool("pause")), "/pause", "65535:65535"),
            (coredns_name, coredns, "/coredns", "65532:65532")):
        archive = state.dir / "images" / (binary.name + ".tar")
        archive.parent.mkdir(exist_ok=True)
        archive.write_bytes(oci_archive(name, {binary.name: (binary.read_bytes(), 0o755)},
                                        [entry], user))
        import_archive(state, archive)
    return pause_name, coredns_name


def load_image(state: State, image: str) -> None:
    """``docker save IMAGE`` from the engine at DOCKER_HOST, imported into the
    node's containerd under the name the CRI looks up (docker.io/library/... for
    a bare name), so no pod ever pulls it."""
    archive = state.dir / "images" / "loaded.tar"
    archive.parent.mkdir(exist_ok=True)
    started = time.monotonic()
    with archive.open("wb") as out:
        done = subprocess.run(["docker", "save", image], stdout=out, stderr=subprocess.PIPE,
                              timeout=900, check=False)
    if done.returncode != 0:
        raise ClusterError(f"docker save {image}: {done.stderr.decode().strip()}")
    try:
        import_archive(state, archive)
    finally:
        archive.unlink()
    log(f"loaded {image} into the node in {time.monotonic() - started:.0f}s")


# -- processes ---------------------------------------------------------------------


def spawn(state: State, name: str, argv: list[str], lock_fd: int | None = None,
          env: dict[str, str] | None = None) -> None:
    log_path = state.log_file(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})},
                                pass_fds=(lock_fd,) if lock_fd is not None else ())
    state.pids[name] = proc.pid
    state.save()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours is not alive.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return False


def check_alive(state: State, name: str) -> bool:
    """Raises, with the end of its log, if ``name`` has exited; else False (so
    that ``check_alive(...) or ready()`` reads as a wait condition)."""
    pid = state.pids.get(name)
    if pid is None or not alive(pid):
        tail = "\n".join(state.log_file(name).read_text(errors="replace").splitlines()[-30:])
        raise ClusterError(f"{name} exited:\n{tail}")
    return False


def terminate(pid: int, grace: float) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` seconds; True if it needed the KILL."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def cmdline(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def processes_naming(folder: Path) -> list[int]:
    """Processes (but this one) with ``folder`` on their command line."""
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc")
            if p.isdigit() and int(p) != me and str(folder) in cmdline(int(p))]


def mounts_under(folder: Path) -> list[str]:
    """Mount points at or below ``folder``, deepest first (from /proc/self/mountinfo)."""
    prefix = str(folder)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # Field 5 is the mount point, with spaces and the like octal-escaped.
            point = line.split()[4].encode().decode("unicode_escape")
            if point == prefix or point.startswith(prefix + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


# -- the network -------------------------------------------------------------------


def read_sysctl(key: str) -> str:
    return Path("/proc/sys", key).read_text().strip()


def write_sysctl(key: str, value: str) -> None:
    Path("/proc/sys", key).write_text(value)


def setup_network(state: State) -> None:
    if not Path("/proc/sys/net/bridge").is_dir():
        raise ClusterError("no /proc/sys/net/bridge: the kernel needs bridge netfilter "
                           "(br_netfilter) for pod-to-Service traffic on one bridge")
    for key, value in SYSCTLS.items():
        state.sysctls[key] = read_sysctl(key)
        write_sysctl(key, value)
    state.save()
    if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "replace", f"{GATEWAY}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # The host reaches Service IPs (kube-proxy rewrites them in OUTPUT) through
    # the bridge; without this route an unmatched one would follow the default
    # route off the machine.
    run("ip", "route", "replace", CLUSTER_RANGE, "dev", BRIDGE, "metric", "1000")
    # Nothing of the cluster's ranges crosses any other interface: forwarded
    # packets stay on the bridge (pod to Service to pod) or are dropped.
    # In mangle, which runs before filter's FORWARD, where kube-proxy puts its
    # own rules first (accepting what it forwards).
    iptables = tool("iptables")
    run(iptables, "-w", "-t", "mangle", "-N", ISOLATE_CHAIN)
    for rule in (["-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN"],
                 ["-s", CLUSTER_RANGE, "-j", "DROP"], ["-d", CLUSTER_RANGE, "-j", "DROP"]):
        run(iptables, "-w", "-t", "mangle", "-A", ISOLATE_CHAIN, *rule)
    run(iptables, "-w", "-t", "mangle", "-I", "FORWARD", "1", "-j", ISOLATE_CHAIN)


def remove_iptables_rules() -> list[str]:
    """Every rule jumping to, and every chain named, KUBE-*, CNI-*, CRK-*, in
    each table of iptables and ip6tables; returns what it removed."""
    removed: list[str] = []
    for binary in ("iptables", "ip6tables"):
        if shutil.which(binary) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            listing = run(binary, "-w", "-t", table, "-S", check=False)
            if listing.returncode != 0:
                continue
            chains: list[str] = []
            for line in listing.stdout.splitlines():
                words = line.split()
                if words[:1] == ["-N"] and words[1].startswith(CHAIN_PREFIXES):
                    chains.append(words[1])
                elif words[:1] == ["-A"] and not words[1].startswith(CHAIN_PREFIXES) \
                        and any(w.startswith(CHAIN_PREFIXES) for w in words[2:]):
                    run(binary, "-w", "-t", table, "-D", *words[1:], check=False)
                    removed.append(f"{binary} -t {table} {line}")
            for chain in chains:
                run(binary, "-w", "-t", table, "-F", chain, check=False)
            for chain in chains:
                run(binary, "-w", "-t", table, "-X", chain, check=False)
                removed.append(f"{binary} -t {table} chain {chain}")
    return removed


def write_cni_config(state: State) -> Path:
    conf_dir = state.dir / "cni"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "10-connect-runtime.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": "connect-runtime", "plugins": [{
            "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
            "hairpinMode": True,
            "ipam": {"type": "host-local", "dataDir": str(state.dir / "cni-ipam"),
                     "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                     # The cluster's /16 only: no default route out of a pod.
                     "routes": [{"dst": CLUSTER_RANGE}]}}]}, indent=1))
    return conf_dir


# -- up ------------------------------------------------------------------------------


def write_runc_wrapper(state: State) -> Path:
    runc = tool("runc")
    wrapper = state.dir / "runc-clamp-oom"
    wrapper.write_text(f"""#!/bin/sh
# A host may refuse a negative oom_score_adj even to root; the kubelet asks
# for one (-998 for a pod sandbox, -997 for a Guaranteed pod). Clamp it to 0 in
# the bundle's config.json (and an exec's process file), then run runc.
clamp='s/"oomScoreAdj":-[0-9]+/"oomScoreAdj":0/'
prev=""
for arg in "$@"; do
  case "$prev" in
    --bundle|-b) [ -f "$arg/config.json" ] && sed -i -E "$clamp" "$arg/config.json" ;;
    --process|-p) [ -f "$arg" ] && sed -i -E "$clamp" "$arg" ;;
  esac
  prev="$arg"
done
exec {runc} "$@"
""")
    wrapper.chmod(0o755)
    return wrapper


def write_containerd_config(state: State, pause_image: str) -> Path:
    wrapper = write_runc_wrapper(state)
    conf_dir = write_cni_config(state)
    root = state.dir / "containerd"
    config = state.dir / "containerd.toml"
    config.write_text(f"""version = 2
root = "{root}/root"
state = "{root}/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{state.containerd_sock}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{wrapper}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{tool('cni-plugins')}"
    conf_dir = "{conf_dir}"
""")
    return config


def start_control_plane(state: State, lock_fd: int, tokens: dict[str, str]) -> None:
    d, pki = state.dir, state.pki
    state.etcd_port = free_port()
    peer = free_port()
    spawn(state, "etcd", [
        tool("etcd"), "--name", "node", "--data-dir", str(d / "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{state.etcd_port}",
        "--advertise-client-urls", f"http://127.0.0.1:{state.etcd_port}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"node=http://127.0.0.1:{peer}"], lock_fd=lock_fd)
    (d / "tokens.csv").write_text("".join(
        f"{token},{user},{user}" + (f",{group}" if group else "") + "\n"
        for user, (token, group) in {
            "admin": (tokens["admin"], "system:masters"),
            f"system:node:{NODE}": (tokens["kubelet"], "system:nodes"),
            "system:kube-controller-manager": (tokens["controller-manager"], ""),
            "system:kube-scheduler": (tokens["scheduler"], ""),
            "system:kube-proxy": (tokens["proxy"], ""),
        }.items()))
    spawn(state, "kube-apiserver", [
        tool("kube-apiserver"), "--etcd-servers", f"http://127.0.0.1:{state.etcd_port}",
        "--bind-address", GATEWAY, "--advertise-address", GATEWAY,
        "--secure-port", str(API_PORT),
        "--tls-cert-file", str(pki / "apiserver.crt"),
        "--tls-private-key-file", str(pki / "apiserver.key"),
        "--client-ca-file", str(pki / "ca.crt"),
        "--kubelet-client-certificate", str(pki / "apiserver-kubelet-client.crt"),
        "--kubelet-client-key", str(pki / "apiserver-kubelet-client.key"),
        "--token-auth-file", str(d / "tokens.csv"),
        "--authorization-mode", "Node,RBAC",
        # The node's IP, never its name: a name would be looked up in the
        # host's resolver, off the machine.
        "--kubelet-preferred-address-types", "InternalIP",
        "--enable-admission-plugins", "NodeRestriction",
        "--service-account-issuer", f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        "--service-account-key-file", str(pki / "sa.pub"),
        "--service-account-signing-key-file", str(pki / "sa.key"),
        "--service-cluster-ip-range", SERVICE_CIDR,
        "--allow-privileged=false",
        "--audit-policy-file", str(write_audit_policy(d)),
        "--audit-log-path", str(d / "logs" / "audit.log")], lock_fd=lock_fd)
    kubeconfig(state.kubeconfig, pki / "ca.crt", "admin", tokens["admin"])
    wait_for(lambda: check_alive(state, "kube-apiserver") or api_ready(state), 120,
             "kube-apiserver to answer /readyz")
    for name, token_key, user in (
            ("kube-controller-manager", "controller-manager", "system:kube-controller-manager"),
            ("kube-scheduler", "scheduler", "system:kube-scheduler"),
            ("kubelet", "kubelet", f"system:node:{NODE}"),
            ("kube-proxy", "proxy", "system:kube-proxy")):
        kubeconfig(d / f"{name}.kubeconfig", pki / "ca.crt", user, tokens[token_key])
    spawn(state, "kube-controller-manager", [
        tool("kube-controller-manager"),
        "--kubeconfig", str(d / "kube-controller-manager.kubeconfig"),
        "--authentication-kubeconfig", str(d / "kube-controller-manager.kubeconfig"),
        "--authorization-kubeconfig", str(d / "kube-controller-manager.kubeconfig"),
        "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
        "--leader-elect=false", "--use-service-account-credentials",
        "--service-account-private-key-file", str(pki / "sa.key"),
        "--root-ca-file", str(pki / "ca.crt"),
        "--cluster-signing-cert-file", str(pki / "ca.crt"),
        "--cluster-signing-key-file", str(pki / "ca.key"),
        "--service-cluster-ip-range", SERVICE_CIDR,
        "--cluster-cidr", POD_CIDR], lock_fd=lock_fd)
    spawn(state, "kube-scheduler", [
        tool("kube-scheduler"), "--kubeconfig", str(d / "kube-scheduler.kubeconfig"),
        "--authentication-kubeconfig", str(d / "kube-scheduler.kubeconfig"),
        "--authorization-kubeconfig", str(d / "kube-scheduler.kubeconfig"),
        "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
        "--leader-elect=false"], lock_fd=lock_fd)


def write_audit_policy(d: Path) -> Path:
    policy = d / "audit-policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n"
                      "  - level: None\n    users: [\"system:kube-proxy\", "
                      f"\"system:node:{NODE}\", \"system:kube-scheduler\"]\n"
                      "  - level: Metadata\n")
    return policy


def api_request(state: State, method: str, path: str, body: Any = None,
                timeout: float = 10) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(state.pki / "ca.crt"))
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"https://{GATEWAY}:{API_PORT}{path}", data=data, method=method,
        headers={"Authorization": f"Bearer {state.admin_token}",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            return response.status, _body(response.read())
    except urllib.error.HTTPError as e:
        return e.code, _body(e.read())


def _body(raw: bytes) -> Any:
    """JSON when it is (API objects), else the text (/readyz says "ok")."""
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")


def api_ready(state: State) -> bool:
    try:
        return api_request(state, "GET", "/readyz", timeout=3)[0] == 200
    except (OSError, ValueError):
        return False


def start_node(state: State, lock_fd: int, pause_image: str) -> None:
    d = state.dir
    resolv = d / "resolv.conf"
    # The pods' resolv.conf gets the cluster DNS and search domains; none of
    # the host's resolvers.
    resolv.write_text("")
    config = d / "kubelet.yaml"
    config.write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": GATEWAY, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(state.pki / "ca.crt")}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "oomScoreAdj": 0,
        "containerRuntimeEndpoint": f"unix://{state.containerd_sock}",
        "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv),
        "podCIDR": POD_CIDR,
        # A shared build machine: the disk is not this node's alone.
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%",
                         "imagefs.available": "2%", "nodefs.inodesFree": "2%"},
        "imageGCHighThresholdPercent": 99, "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False,
        "staticPodPath": "",
        "nodeStatusReportFrequency": "10s",
        "shutdownGracePeriod": "0s",
    }, indent=1))
    spawn(state, "kubelet", [
        tool("kubelet"), "--config", str(config),
        "--kubeconfig", str(d / "kubelet.kubeconfig"),
        "--root-dir", str(state.kubelet_root),
        "--hostname-override", NODE, "--node-ip", GATEWAY,
        "--cert-dir", str(state.kubelet_root / "pki")], lock_fd=lock_fd)
    spawn(state, "kube-proxy", [
        tool("kube-proxy"), "--kubeconfig", str(d / "kube-proxy.kubeconfig"),
        "--proxy-mode", "iptables", "--cluster-cidr", POD_CIDR,
        "--hostname-override", NODE, "--oom-score-adj", "0",
        "--conntrack-max-per-core", "0",
        "--nodeport-addresses", f"{GATEWAY}/32",
        "--metrics-bind-address", f"127.0.0.1:{free_port()}",
        "--healthz-bind-address", f"127.0.0.1:{free_port()}"], lock_fd=lock_fd,
        env={"PATH": f"{Path(tool('iptables')).parent}:{os.environ.get('PATH', '')}"})


def node_ready(state: State) -> bool:
    status, node = api_request(state, "GET", f"/api/v1/nodes/{NODE}")
    if status != 200:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in node.get("status", {}).get("conditions", []))


def apply(state: State, manifest: str) -> None:
    run(tool("kubectl"), "--kubeconfig", str(state.kubeconfig), "apply", "-f", "-",
        input=manifest.encode())


def coredns_manifest(image: str) -> str:
    corefile = (f".:1053 {{\n    errors\n    health :8080\n    ready :8181\n"
                f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
                f"        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n"
                f"    cache 30\n    loadbalance\n}}\n")
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods",
                                                     "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns",
                       "namespace": "kube-system"}]},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": corefile}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "coredns", "namespace": "kube-system",
                      "labels": {"k8s-app": "kube-dns"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                  "template": {
                      "metadata": {"labels": {"k8s-app": "kube-dns"}},
                      "spec": {
                          "serviceAccountName": "coredns", "dnsPolicy": "Default",
                          "securityContext": {"runAsNonRoot": True,
                                              "seccompProfile": {"type": "RuntimeDefault"}},
                          "containers": [{
                              "name": "coredns", "image": image, "imagePullPolicy": "Never",
                              "args": ["-conf", "/etc/coredns/Corefile"],
                              "ports": [{"containerPort": 1053, "protocol": "UDP",
                                         "name": "dns"},
                                        {"containerPort": 1053, "protocol": "TCP",
                                         "name": "dns-tcp"}],
                              "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                            "limits": {"memory": "128Mi"}},
                              "securityContext": {"allowPrivilegeEscalation": False,
                                                  "capabilities": {"drop": ["ALL"]},
                                                  "readOnlyRootFilesystem": True},
                              "livenessProbe": {"httpGet": {"path": "/health",
                                                            "port": 8080}},
                              "readinessProbe": {"httpGet": {"path": "/ready",
                                                             "port": 8181},
                                                 "periodSeconds": 2},
                              "volumeMounts": [{"name": "config",
                                                "mountPath": "/etc/coredns"}]}],
                          "volumes": [{"name": "config",
                                       "configMap": {"name": "coredns"}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system",
                      "labels": {"k8s-app": "kube-dns"}},
         "spec": {"clusterIP": DNS_SERVICE_IP, "selector": {"k8s-app": "kube-dns"},
                  "ports": [{"name": "dns", "port": 53, "targetPort": 1053,
                             "protocol": "UDP"},
                            {"name": "dns-tcp", "port": 53, "targetPort": 1053,
                             "protocol": "TCP"}]}},
    ]
    return "\n---\n".join(json.dumps(o) for o in objects)


def deployment_ready(state: State, namespace: str, name: str) -> bool:
    status, body = api_request(state, "GET",
                               f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    return status == 200 and body.get("status", {}).get("readyReplicas", 0) >= 1


def start_kafka(state: State) -> str:
    env = {**os.environ, "KAFKA_DATA_DIR": str(state.dir / "kafka"),
           "KAFKA_HOST": GATEWAY, "KAFKA_PORT": str(KAFKA_PORT),
           "KAFKA_CONTROLLER_PORT": str(free_port())}
    done = subprocess.run(["bash", str(KAFKA_SH), "start"], env=env, stdout=subprocess.PIPE,
                          text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise ClusterError("deploy/kafka.sh start failed (log in "
                           f"{state.dir / 'kafka'}/broker.log)")
    return done.stdout.strip().splitlines()[-1]


def up(with_kafka: bool) -> State:
    if State.load(STATE).pids:
        raise ClusterError(f"{STATE} holds a cluster's state: 'cluster.sh down' first")
    lock_fd = hold_lock()
    started = time.monotonic()
    shutil.rmtree(STATE, ignore_errors=True)
    STATE.mkdir(parents=True)
    state = State(STATE)
    state.admin_token = secrets.token_hex(16)
    tokens = {"admin": state.admin_token} | {
        k: secrets.token_hex(16) for k in ("kubelet", "controller-manager", "scheduler", "proxy")}
    state.save()
    try:
        log(f"binaries: {', '.join(Path(tool(t)).parent.name for t in ('kubelet', 'coredns'))}")
        make_control_plane_pki(state.pki)
        setup_network(state)
        start_control_plane(state, lock_fd, tokens)
        log(f"control plane up at https://{GATEWAY}:{API_PORT} "
            f"({time.monotonic() - started:.0f}s)")
        containerd_config = write_containerd_config(
            state, PAUSE_IMAGE.format(version=Path(tool("kubelet")).parent.name.removeprefix(
                "kubernetes-")))
        spawn(state, "containerd", [tool("containerd"), "--config", str(containerd_config)],
              lock_fd=lock_fd)
        wait_for(lambda: check_alive(state, "containerd") or state.containerd_sock.exists(),
                 60, "containerd's socket")
        pause_image, coredns_image = import_static_images(state)
        start_node(state, lock_fd, pause_image)
        wait_for(lambda: check_alive(state, "kubelet") or node_ready(state), 120,
                 f"node {NODE} to be Ready")
        log(f"node {NODE} Ready ({time.monotonic() - started:.0f}s)")
        apply(state, coredns_manifest(coredns_image))
        if with_kafka:
            state.kafka = start_kafka(state)
            state.save()
            log(f"Kafka broker at {state.kafka}")
        wait_for(lambda: deployment_ready(state, "kube-system", "coredns"), 120,
                 "CoreDNS to be ready")
        log(f"cluster up in {time.monotonic() - started:.0f}s; "
            f"export KUBECONFIG={state.kubeconfig}")
    except BaseException:
        log(f"up failed; taking down what it started (logs kept in {LAST_LOGS})")
        with contextlib.suppress(ClusterError):
            down()
        raise
    finally:
        os.close(lock_fd)
    return state


# -- down ---------------------------------------------------------------------------


def down() -> list[str]:
    """Stops the cluster of STATE and removes everything it made; returns what
    had to be removed by force (empty when every piece stopped cleanly)."""
    state = State.load(STATE)
    forced: list[str] = []
    if state.kafka:
        subprocess.run(["bash", str(KAFKA_SH), "stop"], check=False, stdout=subprocess.DEVNULL,
                       env={**os.environ, "KAFKA_DATA_DIR": str(state.dir / "kafka")})
    # The kubelet first, so it recreates nothing; then every pod sandbox through
    # the CRI (which runs CNI DEL: veth, IP, network namespace), then the rest.
    for name in ("kube-proxy", "kubelet"):
        if name in state.pids and terminate(state.pids[name], 20):
            forced.append(f"{name} needed SIGKILL")
    if "containerd" in state.pids and alive(state.pids["containerd"]):
        crictl = [tool("crictl"), "--runtime-endpoint", f"unix://{state.containerd_sock}",
                  "--timeout", "60s"]
        run(*crictl, "rmp", "--all", "--force", check=False, timeout=300)
        left = run(*crictl, "pods", "-q", check=False).stdout.split()
        if left:
            forced.append(f"pod sandboxes left after crictl rmp: {left}")
    if "kube-proxy" in state.pids:
        # kube-proxy's own clean-up of its rules.
        run(tool("kube-proxy"), "--cleanup", check=False, timeout=60)
    for name in reversed(PROCESS_ORDER):
        if name in ("kubelet", "kube-proxy") or name not in state.pids:
            continue
        if terminate(state.pids[name], 30):
            forced.append(f"{name} needed SIGKILL")
    # containerd-shims and containers that outlived containerd.
    for pid in processes_naming(state.dir):
        forced.append(f"process {pid} left: {cmdline(pid)[:200]}")
        terminate(pid, 5)
    # The kubelet leaves its root folder (a bind mount it makes) and the pods'
    # volumes (tmpfs for secrets and tokens) mounted when it stops: expected.
    # Anything else mounted had to be left by a container.
    for point in mounts_under(state.dir):
        if not point.startswith(str(state.kubelet_root)):
            forced.append(f"mount {point} left")
        run("umount", "-l", point, check=False)
    for netns in sorted(Path("/var/run/netns").glob("cni-*")):
        forced.append(f"network namespace {netns.name} left")
        run("ip", "netns", "delete", netns.name, check=False)
    for link in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = link.split(":")[1].strip().split("@")[0]
        if name.startswith("veth") and f"master {BRIDGE}" in link:
            forced.append(f"veth {name} left")
            run("ip", "link", "delete", name, check=False)
    run("ip", "route", "del", CLUSTER_RANGE, "dev", BRIDGE, check=False)
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        run("ip", "link", "delete", BRIDGE, check=False)
    remove_iptables_rules()
    forced += remove_kube_cgroups()
    for key, value in state.sysctls.items():
        with contextlib.suppress(OSError):
            write_sysctl(key, value)
    # The logs outlive the cluster, for whoever asks why it failed.
    if (state.dir / "logs").is_dir():
        shutil.rmtree(LAST_LOGS, ignore_errors=True)
        LAST_LOGS.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(state.dir / "logs", LAST_LOGS)
    shutil.rmtree(state.dir, ignore_errors=True)
    for line in forced:
        log(f"down: {line}")
    left = leftovers(state.dir)
    if left:
        raise ClusterError("down left these behind:\n" + "\n".join(left))
    return forced


def iptables_leftovers() -> list[str]:
    found = []
    for binary in ("iptables", "ip6tables"):
        if shutil.which(binary) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            listing = run(binary, "-w", "-t", table, "-S", check=False).stdout
            found += [f"{binary} -t {table} {line}" for line in listing.splitlines()
                      if any(w.startswith(CHAIN_PREFIXES) for w in line.split()[1:])]
    return found


def leftovers(state_dir: Path = STATE) -> list[str]:
    """Anything of a cluster still on the machine: processes naming its folder,
    mounts under it, the folder, the bridge, its iptables chains and rules,
    CNI network namespaces, the kubelet's cgroups."""
    found = [f"process {pid}: {cmdline(pid)[:200]}" for pid in processes_naming(state_dir)]
    found += [f"mount {point}" for point in mounts_under(state_dir)]
    if state_dir.exists():
        found.append(f"folder {state_dir}")
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found.append(f"bridge {BRIDGE}")
    found += iptables_leftovers()
    found += [f"network namespace {n.name}" for n in sorted(Path("/var/run/netns").glob("cni-*"))]
    root = Path("/sys/fs/cgroup")
    found += [f"cgroup {h / 'kubepods'}" for h in (sorted(root.iterdir()) if root.exists() else [])
              if (h / "kubepods").is_dir() and not h.is_symlink()]
    return found


def remove_kube_cgroups() -> list[str]:
    """The kubelet's cgroups (``kubepods`` in each v1 hierarchy), deepest first."""
    left: list[str] = []
    root = Path("/sys/fs/cgroup")
    for hierarchy in sorted(root.iterdir()) if root.exists() else []:
        top = hierarchy / "kubepods"
        if not top.is_dir() or hierarchy.is_symlink():
            continue
        below = sorted((p for p in top.rglob("*") if p.is_dir()),
                       key=lambda p: len(p.parts), reverse=True)
        for folder in [*below, top]:
            try:
                folder.rmdir()
            except OSError as e:
                left.append(f"cgroup {folder}: {e.strerror}")
    return left


# -- the command line ------------------------------------------------------------------


def env_lines(state: State) -> list[str]:
    lines = [f"export KUBECONFIG={state.kubeconfig}",
             f"export PATH={Path(tool('kubectl')).parent}:{Path(tool('helm')).parent}:$PATH"]
    if state.kafka:
        lines.append(f"export KAFKA_BOOTSTRAP={state.kafka}")
    return lines


def status() -> int:
    state = State.load(STATE)
    if not state.pids:
        print("no cluster")
        return 1
    for name, pid in state.pids.items():
        print(f"{name:24} {pid:>8} {'running' if alive(pid) else 'EXITED'}")
    return 0 if all(alive(p) for p in state.pids.values()) else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cluster.sh", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="start the cluster")
    up_parser.add_argument("--no-kafka", action="store_true",
                           help=f"do not start a Kafka broker on {GATEWAY}:{KAFKA_PORT}")
    load = sub.add_parser("load-image", help="copy images from DOCKER_HOST into the node")
    load.add_argument("images", nargs="+")
    sub.add_parser("env", help="print shell exports for kubectl, helm and the broker")
    sub.add_parser("status", help="the cluster's processes")
    sub.add_parser("down", help="stop the cluster and remove what it made")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            state = up(with_kafka=not args.no_kafka)
            print("\n".join(env_lines(state)))
        elif args.command == "load-image":
            state = State.load(STATE)
            if not state.pids:
                raise ClusterError("no cluster is up: 'cluster.sh up' first")
            for image in args.images:
                load_image(state, image)
        elif args.command == "env":
            print("\n".join(env_lines(State.load(STATE))))
        elif args.command == "status":
            return status()
        elif args.command == "down":
            down()
    except ClusterError as e:
        log(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
