# -*- coding: utf-8 -*-
"""Find the network interface and source address a node uses to reach the Ray head.

NCCL and Gloo pick an interface by themselves and often pick the wrong one in
containers (docker0, a link-local or management link); verl's docs tell users to
set ``NCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME``. The route the kernel uses to
reach the head gives the right one: ``ip -o route get <head ip>`` prints one line
such as ``172.18.0.2 dev eth0 src 172.18.0.4 uid 0 \\    cache`` (iproute2's
format: keywords followed by their values). Without ``ip`` the source address comes
from a connected UDP socket and the interface from ``SIOCGIFADDR`` on each name of
``socket.if_nameindex()``.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
import subprocess

SIOCGIFADDR = 0x8915  # linux/sockios.h


def parse_route_get(text):
    """Parse ``ip -o route get`` output.

    :param text: str, the command's stdout.
    :returns: dict with ``dev``, ``src`` and ``via`` (str, '' when absent).
    """
    words = text.replace("\\", " ").split()
    found = {"dev": "", "src": "", "via": ""}
    for i, word in enumerate(words[:-1]):
        if word in found and not found[word]:
            found[word] = words[i + 1]
    return found


def _interface_of(address):
    """Return the name of the interface holding IPv4 ``address``, or ''."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    finally:
        probe.close()
    return ""


def route_to(head_ip, port=6379, run=subprocess.run):
    """Return the route to ``head_ip``: dict dev, src, via.

    :param head_ip: str, IPv4 address of the head.
    :param port: int, any port (the UDP fallback sends nothing).
    :param run: subprocess.run (a parameter for tests).
    :raises RuntimeError: when neither ``ip route get`` nor the socket fallback gives a source address.
    """
    try:
        proc = run(["ip", "-o", "route", "get", head_ip], capture_output=True, text=True, timeout=10, check=False)
        if proc.returncode == 0:
            route = parse_route_get(proc.stdout)
            if route["dev"] and route["src"]:
                return route
    except OSError:
        pass
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect((head_ip, int(port)))
        src = sock.getsockname()[0]
    except OSError as exc:
        raise RuntimeError("no route to the head %s: %s" % (head_ip, exc))
    finally:
        sock.close()
    return {"dev": _interface_of(src), "src": src, "via": ""}


def route_problem(route):
    """Say why a route to the head must not carry Ray and NCCL traffic, or return ''.

    :param route: dict from route_to.
    :returns: str naming the interface and address: a link-local source (169.254.0.0/16,
        fe80::/10), or the ``docker0`` bridge, which other containers and hosts cannot reach.
    """
    try:
        link_local = ipaddress.ip_address(route.get("src") or "0.0.0.0").is_link_local
    except ValueError:
        link_local = False
    if link_local:
        return "the route to the head leaves from link-local address %s on %s" % (route["src"], route.get("dev"))
    if route.get("dev") == "docker0":
        return "the route to the head goes through docker0 (source %s)" % route.get("src")
    return ""


def head_network(head_ip, port=6379, socket_ifname="", run=subprocess.run):
    """How a worker reaches the head: the route, the interface for NCCL and Gloo, and its Ray node IP.

    Used by the ray_worker module and by the docker-host node entrypoint, so both start Ray alike.

    :param head_ip: str, IPv4 address of the head.
    :param port: int, the head's GCS port (see route_to).
    :param socket_ifname: str, the interface to use instead of the route's (ray_worker_socket_ifname);
        then the node IP is left to Ray and an unusable route is not a problem.
    :param run: subprocess.run (a parameter for tests).
    :returns: dict ``route`` (route_to), ``problem`` (route_problem, or '' with *socket_ifname*),
        ``ifname``, ``env`` (``NCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` set to it) and
        ``node_ip`` (the route's source address, or '' with *socket_ifname*).
    :raises RuntimeError: when there is no route to the head (see route_to).
    """
    route = route_to(head_ip, port, run)
    ifname = socket_ifname or route["dev"]
    return {"route": route, "problem": "" if socket_ifname else route_problem(route), "ifname": ifname,
            "env": {"NCCL_SOCKET_IFNAME": ifname, "GLOO_SOCKET_IFNAME": ifname},
            "node_ip": "" if socket_ifname else route.get("src", "")}
