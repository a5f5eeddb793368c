"""A private network for the partition suite: a bridge, one namespace per process.

Every process under test (the broker, each worker with its Spark inside, each
Spark daemon host) runs in a network namespace of its own, plugged into a
bridge the suite creates by a veth pair. The test process stays in the root
namespace and reaches every host through the bridge's own address.

Addresses come from 100.74.0.0/16, inside RFC 6598's shared address space,
which no interface of this machine uses (the Kubernetes tests use
100.72.0.0/16): each :class:`Network` takes a /24 of it no other live network
holds. Hosts get a route to their /24 only, no default route: nothing they
send can leave the machine.

Faults are ``iptables`` rules in a host's own namespace, in a chain of ours
(``FAULTS``) that INPUT and OUTPUT jump to first; healing a host flushes it.
DROP rules match every packet, established connections included, as a cable
pulled out would: TCP retransmits until the rule goes, then carries on.

Root's ``FORWARD`` chain sees bridged frames when ``br_netfilter`` is loaded
(Kubernetes needs it; Docker sets the policy to DROP): the network inserts an
ACCEPT for its bridge first, and removes it with the bridge.

Namespaces have no name in ``/run/netns``: each is held by a process of its
own (``unshare --net``, its argv[0] the namespace's name) and entered through
``/proc/<pid>/ns/net``. ``ip netns add`` would bind-mount ``/run/netns`` over
itself the first time, hiding the namespaces containerd already mounted there:
the Kubernetes tests' pods, whose sandboxes then cannot be torn down (seen).

Everything is named ``ptn<hex id>…``, so :func:`sweep` can remove what a killed
test run left behind (its namespaces' processes, bridge, links and FORWARD rule).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ptn"  # every namespace, link and bridge of the suite starts with it
SPACE = ipaddress.ip_network("100.74.0.0/16")
CHAIN = "FAULTS"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; a failure raises with its stderr."""
    done = subprocess.run(args, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited with {done.returncode}: "
                           f"{done.stderr.strip()}")
    return done


def available() -> str | None:
    """Why this machine cannot run the suite, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bridges, iptables)"
    for tool in ("ip", "iptables", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


@dataclass
class Host:
    """One network namespace on the bridge, with one address."""

    network: Network
    name: str  # short name, for messages ("broker", "w1", ...)
    netns: str  # the holder's argv[0]
    holder: subprocess.Popen[bytes]  # the process that keeps the namespace alive
    ip: str
    link: str  # the veth end on the bridge, in the root namespace
    rules: list[list[str]] = field(default_factory=list)  # the FAULTS rules in force

    @property
    def ns_path(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a program inside this host's namespace
        (``nsenter`` execs it: the process started is the program itself)."""
        return ["nsenter", f"--net={self.ns_path}", "--"]

    def pids(self) -> list[int]:
        """Every process in this namespace but the holder."""
        return [pid for pid in _pids_in(_ns_inode(self.ns_path)) if pid != self.holder.pid]

    def holds(self, pid: int) -> bool:
        """Whether process ``pid`` lives in this host's namespace."""
        mine = _ns_inode(self.ns_path)
        return mine is not None and _ns_inode(f"/proc/{pid}/ns/net") == mine

    def iptables(self, *args: str) -> None:
        run(*self.exec_prefix(), "iptables", "-w", *args)

    # -------------------------------------------------------------- faults

    def _add(self, rule: list[str]) -> None:
        self.iptables("-A", CHAIN, *rule)
        self.rules.append(rule)

    def cut_from(self, *peers: Host) -> None:
        """Nothing passes between this host and ``peers``, either way."""
        for peer in peers:
            self._add(["-d", peer.ip, "-j", "DROP"])
            self._add(["-s", peer.ip, "-j", "DROP"])

    def drop_to(self, *peers: Host) -> None:
        """What this host sends to ``peers`` is lost; what they send arrives."""
        for peer in peers:
            self._add(["-d", peer.ip, "-j", "DROP"])

    def drop_from(self, *peers: Host) -> None:
        """What ``peers`` send this host is lost; what it sends them arrives."""
        for peer in peers:
            self._add(["-s", peer.ip, "-j", "DROP"])

    def lose(self, probability: float, *peers: Host) -> None:
        """Each packet between this host and ``peers`` is lost with ``probability``
        (each way, independently: the ``statistic`` match)."""
        for peer in peers:
            for way in ("-d", "-s"):
                self._add([way, peer.ip, "-m", "statistic", "--mode", "random",
                           "--probability", f"{probability:.4f}", "-j", "DROP"])

    def heal(self) -> None:
        """Remove every fault of this host."""
        self.iptables("-F", CHAIN)
        self.rules.clear()


class Network:
    """A bridge and its hosts; a context manager that removes all of it."""

    def __init__(self) -> None:
        self.id = secrets.token_hex(3)
        self.bridge = f"{PREFIX}{self.id}br"
        self.subnet = _free_subnet()
        hosts = self.subnet.hosts()
        self.gateway = str(next(hosts))  # the bridge's own address: the test process
        self._addresses = hosts
        self.hosts: list[Host] = []
        self._up = False

    def __enter__(self) -> Network:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self._up = True
        run("ip", "addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        run("iptables", "-w", "-I", "FORWARD", "1", *self._forward_rule())

    def _forward_rule(self) -> list[str]:
        return ["-i", self.bridge, "-o", self.bridge, "-m", "comment", "--comment",
                self.bridge, "-j", "ACCEPT"]

    def add_host(self, name: str) -> Host:
        """A new namespace on the bridge, with loopback up and the next address."""
        index = len(self.hosts)
        netns = f"{PREFIX}{self.id}{name}"
        outside, inside = f"{PREFIX}{self.id}h{index}", f"{PREFIX}{self.id}n{index}"
        ip = str(next(self._addresses))
        holder = subprocess.Popen(["unshare", "--net", "--", "bash", "-c",
                                   f"exec -a {netns} sleep infinity"],
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        host = Host(self, name, netns, holder, ip, outside)
        self.hosts.append(host)
        deadline = time.monotonic() + 10
        while _ns_inode(host.ns_path) == _ns_inode("/proc/self/ns/net"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"unshare --net for {netns} made no namespace")
            time.sleep(0.01)
        inner = [*host.exec_prefix(), "ip"]
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", inside, "netns", str(holder.pid))
        run("ip", "link", "set", outside, "master", self.bridge, "up")
        run(*inner, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", inside)
        run(*inner, "link", "set", inside, "up")
        run(*inner, "link", "set", "lo", "up")
        host.iptables("-N", CHAIN)
        host.iptables("-I", "INPUT", "1", "-j", CHAIN)
        host.iptables("-I", "OUTPUT", "1", "-j", CHAIN)
        return host

    def heal(self) -> None:
        for host in self.hosts:
            if host.rules:
                host.heal()

    def stop(self) -> None:
        """Kill whatever still runs in the namespaces, then remove them, their links,
        the bridge and its FORWARD rule."""
        for host in self.hosts:
            run("ip", "link", "del", host.link, check=False)  # its peer goes with it
            for pid in host.pids():  # nothing may outlive its namespace
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            host.holder.kill()
            host.holder.wait()
        self.hosts.clear()
        if self._up:
            run("iptables", "-w", "-D", "FORWARD", *self._forward_rule(), check=False)
            run("ip", "link", "del", self.bridge, check=False)
            self._up = False


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of SPACE no interface of this machine is in."""
    used = set()
    for line in run("ip", "-o", "-4", "addr", "show").stdout.splitlines():
        words = line.split()
        if "inet" in words:
            used.add(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    free = [s for s in SPACE.subnets(new_prefix=24)
            if s.network_address.packed[2] != 0 and not any(s.overlaps(u) for u in used)]
    return free[secrets.randbelow(len(free))]


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _pids_in(inode: int | None) -> list[int]:
    """Every process whose network namespace is ``inode``."""
    if inode is None:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(f"/proc/{entry}/ns/net") == inode:
            found.append(int(entry))
    return found


def _holders() -> dict[int, str]:
    """pid -> name of every namespace holder of the suite on this machine."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, UnicodeDecodeError):
            continue
        if argv0.startswith(PREFIX):
            out[int(entry)] = argv0
    return out


def leftovers() -> dict[str, list[str]]:
    """What of the suite exists on this machine now: namespaces, links, FORWARD rules."""
    links = [line.split(":")[1].strip().split("@")[0]
             for line in run("ip", "-o", "link", "show").stdout.splitlines()
             if line.split(":")[1].strip().startswith(PREFIX)]
    rules = [line for line in run("iptables", "-w", "-S", "FORWARD").stdout.splitlines()
             if f"-i {PREFIX}" in line and "--comment" in line]
    return {"namespaces": sorted(_holders().values()), "links": links, "forward rules": rules}


def sweep() -> None:
    """Remove everything :func:`leftovers` lists (a killed run's remains)."""
    for pid in _holders():
        for inside in _pids_in(_ns_inode(f"/proc/{pid}/ns/net")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(inside, signal.SIGKILL)
    found = leftovers()
    for link in found["links"]:
        run("ip", "link", "del", link, check=False)
    for rule in found["forward rules"]:
        run("iptables", "-w", *rule.replace("-A FORWARD", "-D FORWARD", 1).split(), check=False)
