"""A one-node pod network made of network namespaces, and the SIG Network agent enforcing on it.

Everything lives in namespaces this module creates (names `gtn<pid>-<hex>-...`): a "node" namespace
that routes between veth pairs, and one namespace per endpoint (a pod, or an outside address such
as an egress CIDR, the API server, the node-local DNS cache or the metadata endpoint). The host's
firewall, routes and interfaces are never touched; veths are created inside the node namespace
with their peer placed straight into the endpoint's, and every address is routed only there.

The node forwards new connections (conntrack state NEW) to NFQUEUE 100 with the xtables target
(`iptables-legacy`), without `--queue-bypass`: with no agent bound to the queue the kernel drops
them (fail-closed). This kernel cannot queue from nftables (no CONFIG_NFT_QUEUE), so the agent's
own nftables programming fails; the agent logs it and retries, and its verdicts on the queue are
what enforce. The agent reads in-cluster credentials only: it runs in the node namespace inside a
private mount namespace whose own tmpfs on /run holds the ServiceAccount token and CA, with
KUBERNETES_SERVICE_HOST/PORT pointing at a relay in the node namespace's loopback that forwards to
the API server on the host's loopback (the only path between the two).
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import itertools
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from tools.control_plane import REPO_ROOT
from tools.lanes import tool_versions

QUEUE = 100                       # the agent's default --nfqueue-id
UDP_RESEND = 0.5                  # seconds between datagrams of one UDP probe
NODE_NAME = "gpu-tenancy-dataplane"
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)   # setns(2): Python 3.11 has no os.setns
T = TypeVar("T")

REQUIRED_COMMANDS = ("ip", "iptables-legacy", "ip6tables-legacy", "nft", "conntrack", "unshare", "mount", "setpriv")
# New forwarded connections to the agent's queue, without --queue-bypass (no reader = drop).
STEER_RULE = ("-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW", "-j", "NFQUEUE", "--queue-num", str(QUEUE))


AGENT = "kube-network-policies"


def agent_binary() -> Path:
    """Where `tools/build.sh network` puts the agent (the same override as tools/go-env.sh).

    >>> agent_binary().name
    'kube-network-policies'
    """
    override = os.environ.get("GPU_TENANCY_NETWORK_BIN_DIR")
    if override:
        return Path(override) / AGENT
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")
    return cache / AGENT / tool_versions()["KUBE_NETWORK_POLICIES_VERSION"] / AGENT


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def in_netns(name: str, make: Callable[[], T]) -> T:
    """Run `make` in a short-lived thread that entered network namespace `name` (sockets created
    there stay in it); the calling thread never changes namespace.

    >>> listener = in_netns("gtn4242-1a2b-node", lambda: socket.create_server(("127.0.0.1", 0)))  # doctest: +SKIP
    """
    box: dict[str, object] = {}

    def enter() -> None:
        fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            if _libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {name}")
            box["value"] = make()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter, name=f"netns-{name}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def kernel_unavailable_reason() -> str:
    """Why this machine cannot host the lane ("" if it can): root, the commands, veth pairs and
    the xtables NFQUEUE target, tried in a scratch namespace that is deleted again.

    >>> isinstance(kernel_unavailable_reason(), str)
    True
    """
    if os.geteuid() != 0:
        return "network dataplane lane: needs root (network namespaces, veth pairs, netfilter)"
    missing = [c for c in REQUIRED_COMMANDS if shutil.which(c) is None]
    if missing:
        return (f"network dataplane lane: {', '.join(missing)} not installed; "
                "`apt-get install -y nftables iptables conntrack` (make e2e-network does it)")
    scratch = f"gtn{os.getpid()}-{uuid.uuid4().hex[:4]}-check"
    try:
        _run("ip", "netns", "add", scratch)
        _run("ip", "-n", scratch, "link", "add", "name", "probe0", "type", "veth", "peer", "name", "probe1")
        for tables in ("iptables-legacy", "ip6tables-legacy"):
            _run("ip", "netns", "exec", scratch, tables, *STEER_RULE)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"network dataplane lane: the kernel lacks a feature the lane needs: {exc}"
    finally:
        _run("ip", "netns", "del", scratch, check=False)
    return ""


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET


def remove_stale_namespaces() -> list[str]:
    """Delete the namespaces of lane runs whose process is gone (a run killed before its teardown);
    their names carry the pid (`gtn<pid>-...`), so a run still going keeps its own.

    >>> remove_stale_namespaces()  # doctest: +SKIP
    ['gtn4242-1a2b-node', 'gtn4242-1a2b-e0']
    """
    removed = []
    for line in _run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        pid = name[3:].split("-", 1)[0]
        if name.startswith("gtn") and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _run("ip", "netns", "del", name, check=False)
            removed.append(name)
    return removed


@dataclass(frozen=True)
class Site:
    """An endpoint's namespace: its name, addresses and the node-side veth."""

    label: str        # the endpoint's name in the plan (what its servers answer)
    netns: str
    addresses: tuple[str, ...]
    node_side: str


class Topology:
    """The node namespace, one namespace per endpoint, and servers answering on every probed port."""

    def __init__(self) -> None:
        remove_stale_namespaces()
        self.prefix = f"gtn{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.node = f"{self.prefix}-node"
        self.sites: dict[str, Site] = {}
        self._namespaces: list[str] = []
        self._sockets: list[socket.socket] = []
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._server: threading.Thread | None = None
        self._add_namespace(self.node)
        _run("ip", "-n", self.node, "link", "set", "lo", "up")
        self._sysctl(self.node, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")

    def _add_namespace(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._namespaces.append(name)
        # Interfaces created later copy `default`: no duplicate address detection, so IPv6
        # addresses are usable at once (nothing else is on these links).
        self._sysctl(name, "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")

    @staticmethod
    def _sysctl(netns: str, *settings: str) -> None:
        _run("ip", "netns", "exec", netns, "sysctl", "-qw", *settings)

    def add_site(self, label: str, addresses: Iterable[str]) -> Site:
        """A namespace holding each address as a host route on eth0, routed back by the node.

        IPv4: an on-link default route, the node answering ARP for every other address (proxy ARP,
        no delay). IPv6: a default route via fe80::1, which every node-side veth holds."""
        index = len(self.sites)
        site = Site(label, f"{self.prefix}-e{index}", tuple(addresses), f"v{index}")
        self._add_namespace(site.netns)
        _run("ip", "-n", self.node, "link", "add", "name", site.node_side, "type", "veth",
             "peer", "name", "eth0", "netns", site.netns)
        _run("ip", "-n", site.netns, "link", "set", "lo", "up")
        _run("ip", "-n", site.netns, "link", "set", "eth0", "up")
        self._sysctl(self.node, f"net.ipv4.conf.{site.node_side}.proxy_arp=1",
                     f"net.ipv4.neigh.{site.node_side}.proxy_delay=0")
        _run("ip", "-n", self.node, "addr", "add", "fe80::1/64", "dev", site.node_side)
        _run("ip", "-n", self.node, "link", "set", site.node_side, "up")
        for address in site.addresses:
            v6 = ipaddress.ip_address(address).version == 6
            _run("ip", "-n", site.netns, "addr", "add", f"{address}/{128 if v6 else 32}", "dev", "eth0")
            _run("ip", "-n", self.node, "route", "add", f"{address}/{128 if v6 else 32}", "dev", site.node_side)
        _run("ip", "-n", site.netns, "-4", "route", "add", "default", "dev", "eth0", "scope", "link")
        _run("ip", "-n", site.netns, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
        self.sites[label] = site
        return site

    def steer_new_connections_to_queue(self) -> None:
        """Every new forwarded connection to the agent's queue; no bypass, so no agent = drop."""
        for tables in ("iptables-legacy", "ip6tables-legacy"):
            _run("ip", "netns", "exec", self.node, tables, *STEER_RULE)

    def queue_drops(self) -> dict[str, int]:
        """The kernel's counters of the agent's queue (/proc/net/netfilter/nfnetlink_queue of the
        node namespace): packets it dropped because the queue was full (`queue_dropped`) or the
        agent's netlink socket could not take them (`user_dropped`): drops no policy decided.

        >>> Topology().queue_drops()  # doctest: +SKIP
        {'queue_dropped': 0, 'user_dropped': 0}
        """
        text = _run("ip", "netns", "exec", self.node, "cat", "/proc/net/netfilter/nfnetlink_queue").stdout
        for line in text.splitlines():
            fields = line.split()
            if fields and fields[0] == str(QUEUE):
                return {"queue_dropped": int(fields[5]), "user_dropped": int(fields[6])}
        raise RuntimeError(f"queue {QUEUE} is not bound in {self.node}: {text!r}")

    def node_state(self) -> str:
        """The node's netfilter state (rules with counters, nftables tables, conntrack), for reports."""
        parts = []
        for argv in (("iptables-legacy", "-L", "FORWARD", "-v", "-n"), ("ip6tables-legacy", "-L", "FORWARD", "-v", "-n"),
                     ("nft", "list", "tables"), ("conntrack", "-C")):
            done = _run("ip", "netns", "exec", self.node, *argv, check=False)
            parts.append(f"$ {' '.join(argv)}\n{done.stdout.strip()}{done.stderr.strip()}")
        return "\n".join(parts)

    # ---- servers -------------------------------------------------------------------------

    def serve(self, probes: Iterable[tuple[str, int]]) -> None:
        """In every site, listen on each (protocol, port) and answer with the site's label."""
        probes = list(probes)
        for site in self.sites.values():
            def listeners(site: Site = site) -> list[socket.socket]:
                out = []
                for (protocol, port), address in itertools.product(probes, site.addresses):
                    kind = socket.SOCK_STREAM if protocol == "TCP" else socket.SOCK_DGRAM
                    s = socket.socket(_family(address), kind)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((address, port))
                    if kind == socket.SOCK_STREAM:
                        s.listen(128)
                    s.setblocking(False)
                    out.append(s)
                return out

            for s in in_netns(site.netns, listeners):
                self._sockets.append(s)
                self._selector.register(s, selectors.EVENT_READ, site.label.encode())
        self._server = threading.Thread(target=self._answer, name="dataplane-servers", daemon=True)
        self._server.start()

    def _answer(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                sock, tag = key.fileobj, key.data
                try:
                    if sock.type == socket.SOCK_STREAM:
                        conn, _ = sock.accept()
                        with conn:
                            conn.setblocking(True)
                            conn.settimeout(1)
                            conn.sendall(tag)
                    else:
                        _, peer = sock.recvfrom(512)
                        sock.sendto(tag, peer)
                except OSError:
                    continue

    # ---- probes --------------------------------------------------------------------------

    def probe(self, cells: list[tuple[str, str, str, int]], timeout: float = 2.0,
              window: int = 256) -> list[str | None]:
        """For each (source label, destination address, protocol, port): the label that answered
        (allowed), None if nothing answered within `timeout` (denied), or "error:<reason>".

        At most `window` probes are in flight: the kernel drops what the agent's netlink socket
        cannot take (512 at once on these cores lost 1,667 packets, `user_dropped`), and fail-closed
        such a drop reads as "denied"; `queue_drops` tells."""
        results: list[str | None] = []
        for start in range(0, len(cells), window):
            results += self._probe_batch(cells[start:start + window], timeout)
        return results

    def _probe_batch(self, cells: list[tuple[str, str, str, int]], timeout: float) -> list[str | None]:  
        by_source: dict[str, list[int]] = {}
        for i, (src, *_rest) in enumerate(cells):
            by_source.setdefault(src, []).append(i)
        sockets: dict[int, socket.socket] = {}
        for src, indices in by_source.items():
            def open_all(indices: list[int] = indices) -> dict[int, socket.socket]:
                out = {}
                for i in indices:
                    _, address, protocol, port = cells[i]
                    kind = socket.SOCK_STREAM if protocol == "TCP" else socket.SOCK_DGRAM
                    s = socket.socket(_family(address), kind)
                    s.setblocking(False)
                    if kind == socket.SOCK_STREAM:
                        s.connect_ex((address, port))
                    else:
                        s.connect((address, port))
                        s.send(b"probe")
                    out[i] = s
                return out
            sockets.update(in_netns(self.sites[src].netns, open_all))

        results: list[str | None] = [None] * len(cells)
        selector = selectors.DefaultSelector()
        for i, s in sockets.items():   # readable: the answer, or the error of a connect or send
            selector.register(s, selectors.EVENT_READ, i)
        deadline = time.monotonic() + timeout
        pending = set(sockets)
        # TCP retransmits its SYN by itself; a datagram lost before the queue (a neighbour entry
        # still resolving under load) is sent again, as a UDP client such as a resolver does.
        resend_at = time.monotonic() + UDP_RESEND
        try:
            last_look = False
            while pending and not last_look:
                # Past the deadline, one more look without waiting: an answer that arrived while
                # this process was not scheduled (2 busy cores) still counts.
                last_look = time.monotonic() >= deadline
                if time.monotonic() >= resend_at and not last_look:
                    for i in pending:
                        if sockets[i].type == socket.SOCK_DGRAM:
                            try:
                                sockets[i].send(b"probe")
                            except OSError:
                                pass   # an ICMP error: the receive below reports it
                    resend_at += UDP_RESEND
                wake = 0.0 if last_look else min(deadline, resend_at) - time.monotonic()
                for key, _ in selector.select(timeout=max(0.0, wake)):
                    s, i = key.fileobj, key.data
                    try:
                        data = s.recv(512)
                    except OSError as exc:
                        data, results[i] = b"", f"error:{errno.errorcode.get(exc.errno, exc.errno)}"
                    if data:
                        results[i] = data.decode(errors="replace")
                    elif results[i] is None:
                        results[i] = "error:closed without an answer"
                    selector.unregister(s)
                    pending.discard(i)
        finally:
            selector.close()
            for s in sockets.values():
                s.close()
        return results

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.join(5)
        self._selector.close()
        for s in self._sockets:
            s.close()
        for name in reversed(self._namespaces):
            _run("ip", "netns", "del", name, check=False)
        self._namespaces.clear()


class Relay:
    """127.0.0.1:<port> in the node namespace, forwarded to the API server on the host's loopback."""

    def __init__(self, node_netns: str, target: tuple[str, int]) -> None:
        self.target = target

        def listen() -> socket.socket:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            return s

        self._listener = in_netns(node_netns, listen)
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="apiserver-relay", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                inner, _ = self._listener.accept()
            except OSError:
                return
            try:
                outer = socket.create_connection(self.target, timeout=10)   # from the host namespace
            except OSError:
                inner.close()
                continue
            outer.settimeout(None)
            self._conns += [inner, outer]
            for a, b in ((inner, outer), (outer, inner)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for s in self._conns:
            s.close()


class Agent:
    """kube-network-policies in the node namespace, with in-cluster credentials on a private /run."""

    def __init__(self, binary: Path, node_netns: str, api_port: int, credentials: Path, log: Path) -> None:
        self.log = log
        script = ('set -e; mount -t tmpfs -o size=1m,mode=0755 gpu-tenancy-run /run; '
                  'sa=/run/secrets/kubernetes.io/serviceaccount; mkdir -p "$sa"; cp "$1"/* "$sa"/; '
                  'shift; exec "$@"')
        # setpriv: the agent gets SIGKILL when pytest dies without teardown (no preexec_fn: the
        # relay and server threads run while we fork).
        argv = ["setpriv", "--pdeathsig", "KILL", "--",
                "ip", "netns", "exec", node_netns, "unshare", "--mount", "--propagation", "private", "--",
                "/bin/sh", "-c", script, "sh", str(credentials), str(binary),
                f"--hostname-override={NODE_NAME}", f"--nfqueue-id={QUEUE}", "--fail-open=false",
                "--disable-nri", "--metrics-bind-address=127.0.0.1:9080", "-v=2"]
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api_port)}
        self._log = open(log, "wb")
        self.popen = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self._log.close()

