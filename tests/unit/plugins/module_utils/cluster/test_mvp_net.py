"""Unit tests of module_utils/cluster/mvp_net: the route to the head, and routes refused for Ray/NCCL."""
import subprocess

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_net import parse_route_get, route_problem, route_to


@pytest.mark.parametrize("text, expected", [
    # iproute2 5.x/6.x one-line output (-o), direct and through a gateway
    ("172.18.0.2 dev eth0 src 172.18.0.4 uid 0 \\    cache ", {"dev": "eth0", "src": "172.18.0.4", "via": ""}),
    ("10.1.2.3 via 10.0.0.1 dev ens5 src 10.0.0.17 uid 1000 \\    cache ",
     {"dev": "ens5", "src": "10.0.0.17", "via": "10.0.0.1"}),
    ("", {"dev": "", "src": "", "via": ""}),
])
def test_parse_route_get(text, expected):
    assert parse_route_get(text) == expected


@pytest.mark.parametrize("route, words", [
    ({"dev": "eth0", "src": "172.18.0.4"}, []),
    ({"dev": "eth1", "src": "169.254.3.7"}, ["link-local", "169.254.3.7", "eth1"]),
    ({"dev": "docker0", "src": "172.17.0.1"}, ["docker0", "172.17.0.1"]),
])
def test_route_problem_names_the_interface_and_address(route, words):
    problem = route_problem(route)
    assert (problem == "") == (not words)
    for word in words:
        assert word in problem


def test_route_to_uses_ip_route_get():
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "10.9.0.2 dev ib0 src 10.9.0.5 uid 0 \\    cache\n", "")
    assert route_to("10.9.0.2", run=run) == {"dev": "ib0", "src": "10.9.0.5", "via": ""}
    assert calls == [["ip", "-o", "route", "get", "10.9.0.2"]]


def test_route_to_falls_back_to_a_socket_without_ip():
    """Without the ip binary the source address still comes from the kernel (loopback here)."""
    def missing(argv, **kw):
        raise FileNotFoundError("ip")
    route = route_to("127.0.0.1", run=missing)
    assert route["src"] == "127.0.0.1"
    assert route["dev"] == "lo"


def test_head_network_follows_the_route_unless_an_interface_is_chosen():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_net import head_network

    def run(text):
        return lambda argv, **kw: subprocess.CompletedProcess(argv, 0, text, "")
    docker0 = "172.17.0.2 dev docker0 src 172.17.0.1 uid 0 \\    cache\n"
    net = head_network("10.9.0.2", run=run("10.9.0.2 dev ib0 src 10.9.0.5 uid 0 \\    cache\n"))
    assert (net["problem"], net["ifname"], net["node_ip"]) == ("", "ib0", "10.9.0.5")
    assert net["env"] == {"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "ib0"}
    bad = head_network("172.17.0.2", run=run(docker0))
    assert bad["problem"] == route_problem(bad["route"]) and "docker0" in bad["problem"]
    chosen = head_network("172.17.0.2", socket_ifname="eth1", run=run(docker0))
    assert (chosen["problem"], chosen["ifname"], chosen["node_ip"]) == ("", "eth1", "")
