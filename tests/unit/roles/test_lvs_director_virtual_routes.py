"""A VRRP instance's virtual_routes as lvs_director checks and writes them, against two oracles: the real
`keepalived --config-test` (keepalived 2.2.7, Debian 12) on what the template writes, and the real kernel's
`ip route add` in a network namespace of the test's own (root and iproute2 needed; skipped otherwise).

keepalived.conf(5), "virtual_routes": routes added on becoming MASTER and deleted on leaving it; "no_track" keeps the
instance MASTER when the route is deleted. keepalived's config test passes some routes the kernel refuses when the
instance becomes MASTER: the preflight refuses what either of the two refuses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from lvs_role_files import KEEPALIVED, keepalived_config_test

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

VIP = "198.18.0.100"
IP = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
KERNEL = os.geteuid() == 0 and IP is not None


def settings(host="dir1", routes=()):
    return {
        "host": host, "interface": "eth0", "state": "MASTER" if host == "dir1" else "BACKUP",
        "priority": 150 if host == "dir1" else 100, "vrrp_only": True,
        "own_addresses": ["198.18.0.11" if host == "dir1" else "198.18.0.12"], "known_interfaces": ["eth0", "lo"],
        "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                            "virtual_routes": list(routes)}],
    }


def route_errors(*routes):
    resolved = lvs_director_resolve(settings(routes=routes))
    return [entry["message"] for entry in lvs_director_problems([resolved])["errors"]]


def rendered(render, *routes):
    return render("lvs_director", "keepalived.conf.j2", lvs_director_global_defs_extra=[],
                  lvs_director_resolved=lvs_director_resolve(settings(routes=routes)))


def kernel_adds(route, *added_first):
    """Whether the kernel adds ``route`` (its `ip route` spelling) in a fresh namespace whose eth0 holds 198.18.0.11/24
    (a veth: the lab's own prefix, nothing leaves the namespace), after the routes ``added_first``."""
    namespace = f"hb-route-{uuid.uuid4().hex[:8]}"
    subprocess.run([IP, "netns", "add", namespace], check=True, timeout=30)
    try:
        for command in (["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"],
                        ["addr", "add", "198.18.0.11/24", "dev", "eth0"], ["link", "set", "eth0", "up"],
                        ["link", "set", "eth1", "up"], *(["route", "add", *first.split()] for first in added_first)):
            subprocess.run([IP, "-n", namespace, *command], check=True, timeout=30)
        result = subprocess.run([IP, "-n", namespace, "route", "add", *route.split()], capture_output=True,
                                text=True, timeout=30, check=False)
        return result.returncode == 0
    finally:
        subprocess.run([IP, "netns", "delete", namespace], check=False, timeout=30)


def test_the_template_writes_each_route_and_no_track_where_asked(render):
    text = rendered(render, {"to": "198.18.0.224/28", "via": "198.18.0.1", "dev": "eth0", "metric": 5, "table": 100},
                    {"to": "198.18.0.240/28", "blackhole": True, "track": False},
                    {"to": "198.18.0.208/28", "dev": "eth0", "src": VIP})
    assert ("    virtual_routes {\n"
            "        198.18.0.224/28 via 198.18.0.1 dev eth0 metric 5 table 100\n"
            "        blackhole 198.18.0.240/28 no_track\n"
            f"        src {VIP} to 198.18.0.208/28 dev eth0\n"
            "    }\n") in text
    assert "virtual_routes" not in rendered(render)


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_accepts_every_route_the_preflight_passes(render, tmp_path):
    routes = [{"to": "198.18.0.224/28", "via": "198.18.0.1", "dev": "eth0", "metric": 5, "table": 100},
              {"to": "198.18.0.240/28", "blackhole": True, "track": False},
              {"to": "fd00:1::/64", "dev": "eth0"}, {"to": "198.18.0.208/28", "via": "198.18.0.1", "track": False}]
    assert route_errors(*routes) == []
    result = keepalived_config_test(rendered(render, *routes), tmp_path)
    assert result.returncode == 0, result.stderr


# (route, what keepalived's config test says, what the kernel says): each refused by the preflight, with its message.
KEEPALIVED_REFUSES = [
    ({"to": "198.18.0.224/28", "via": "fd00::1", "dev": "eth0"}, "Cannot mix IPv4 and IPv6 addresses for route",
     "virtual_routes[0].via is fd00::1, which is not an address of the family of 198.18.0.224/28"),
    ({"to": "198.18.0.240/28", "blackhole": True}, "cannot track route",
     "virtual_routes[0] has no dev, and keepalived can track only a route with an interface"),
    ({"to": "198.18.0.224/28", "dev": "eth9"}, "Non-existent interface",
     "virtual_routes[0].dev is eth9, which this host does not have (eth0, lo)"),
    ({"to": "198.18.0.224/33", "dev": "eth0"}, "outside range",
     "virtual_routes[0].to is '198.18.0.224/33', which is not an address or a network"),
]


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize(("route", "keepalived_says", "preflight_says"), KEEPALIVED_REFUSES)
def test_the_preflight_refuses_what_keepalived_refuses(render, tmp_path, route, keepalived_says, preflight_says):
    result = keepalived_config_test(rendered(render, route), tmp_path)
    assert result.returncode != 0 and keepalived_says in result.stderr, result.stderr
    assert any(f"dir1: lvs_director_vrrp_instances[VI_LVS].{preflight_says}" in error
               for error in route_errors(route)), route_errors(route)


# Routes keepalived's config test passes and the kernel refuses once the instance becomes MASTER.
KERNEL_REFUSES = [
    ({"to": "198.18.0.225/28", "dev": "eth0"}, "198.18.0.225/28 dev eth0",
     "virtual_routes[0].to is 198.18.0.225/28, which has host bits set"),
    ({"to": "198.18.0.240/28", "blackhole": True, "dev": "eth0", "track": False}, "blackhole 198.18.0.240/28 dev eth0",
     "virtual_routes[0] is a blackhole with dev, which the kernel refuses for a blackhole"),
]


@pytest.mark.skipif(KEEPALIVED is None or not KERNEL, reason="needs keepalived, root and iproute2")
@pytest.mark.parametrize(("route", "spelling", "preflight_says"), KERNEL_REFUSES)
def test_the_preflight_refuses_what_the_kernel_refuses_though_keepalived_passes_it(
        render, tmp_path, route, spelling, preflight_says):
    assert keepalived_config_test(rendered(render, route), tmp_path).returncode == 0
    assert not kernel_adds(spelling)
    assert any(f"dir1: lvs_director_vrrp_instances[VI_LVS].{preflight_says}" in error
               for error in route_errors(route)), route_errors(route)


@pytest.mark.skipif(not KERNEL, reason="needs root and iproute2")
def test_the_kernel_adds_the_routes_the_preflight_passes():
    for spelling in ("198.18.0.224/28 via 198.18.0.1 dev eth0 metric 5 table 100", "blackhole 198.18.0.240/28",
                     "198.18.0.208/28 dev eth0"):
        assert kernel_adds(spelling), spelling


def test_one_route_twice_is_refused_as_the_kernel_refuses_the_second():
    route = {"to": "198.18.0.224/28", "dev": "eth0"}
    assert route_errors(route, route) == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].virtual_routes[1] is 198.18.0.224/28 again (table main, metric 0), "
        "also in lvs_director_vrrp_instances[VI_LVS].virtual_routes[0]: the kernel refuses the second (\"File "
        "exists\"); keep one"
    ]
    assert route_errors(route, {**route, "metric": 5}) == []


@pytest.mark.skipif(not KERNEL, reason="needs root and iproute2")
def test_a_host_route_written_with_and_without_its_prefix_length_is_one_route_to_the_kernel_and_the_preflight():
    assert not kernel_adds("198.18.0.240/32 dev eth0", "198.18.0.240 dev eth0")
    errors = route_errors({"to": "198.18.0.240", "dev": "eth0"}, {"to": "198.18.0.240/32", "dev": "eth0"})
    assert [error.split(" is ")[0] for error in errors] == [
        "dir1: lvs_director_vrrp_instances[VI_LVS].virtual_routes[1]"], errors
    assert "File exists" in errors[0]
    # Peers spelling one route two ways add the same route: not a difference.
    configs = [lvs_director_resolve(settings("dir1", [{"to": "198.18.0.240", "dev": "eth0"}])),
               lvs_director_resolve(settings("dir2", [{"to": "198.18.0.240/32", "dev": "eth0"}]))]
    assert lvs_director_problems(configs)["errors"] == []


def test_peers_that_would_add_different_routes_are_refused():
    configs = [lvs_director_resolve(settings("dir1", [{"to": "198.18.0.224/28", "dev": "eth0"}])),
               lvs_director_resolve(settings("dir2"))]
    assert [entry["message"] for entry in lvs_director_problems(configs)["errors"]] == [
        "lvs_director_vrrp_instances[VI_LVS].virtual_routes differs between peers (dir1: 198.18.0.224/28 dev eth0; "
        "dir2: none), so a failover changes the routes the VIP's holder adds; list the same routes on every director"
    ]


def test_the_crash_cleanup_deletes_the_routes_as_it_deletes_the_vips(render):
    text = render("lvs_director", "vip-cleanup.sh.j2", lvs_director_pid_file="/run/keepalived.pid",
                  lvs_director_daemon_args=[], lvs_director_vrrp_only=True,
                  lvs_director_resolved=lvs_director_resolve(settings(routes=[
                      {"to": "198.18.0.240/28", "blackhole": True, "track": False}])))
    assert ('ip route del blackhole 198.18.0.240/28 2>/dev/null && echo "removed the route blackhole '
            '198.18.0.240/28"\n') in text
