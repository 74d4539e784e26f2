"""lvs_realserver_ports_to_wait against the lines of the real ss (iproute2) on sockets this test opens: a pair is
skipped only when a socket listens on its address or on its family's wildcard."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import lvs_realserver_ports_to_wait

SS = shutil.which("ss") or shutil.which("ss", path="/usr/sbin:/sbin")
needs_ss = pytest.mark.skipif(SS is None, reason="ss is not installed (apt-get install iproute2)")


def ss_lines():
    return subprocess.run([SS, "-Hltn"], capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()


@pytest.fixture
def listener():
    """listener(family, address) -> the port of a new listening socket on it (closed after the test)."""
    sockets = []

    def listen(family, address):
        server = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        server.bind((address, 0))
        server.listen()
        sockets.append(server)
        return server.getsockname()[1]

    yield listen
    for server in sockets:
        server.close()


@needs_ss
def test_a_wildcard_ipv4_listener_covers_every_ipv4_address_on_its_port_only(listener):
    port = listener(socket.AF_INET, "0.0.0.0")
    pairs = [["198.18.0.100/32", port], ["127.0.0.1", port], ["127.0.0.1", port + 1 if port < 65535 else 1]]
    assert lvs_realserver_ports_to_wait(pairs, ss_lines()) == [pairs[2]]


@needs_ss
def test_a_listener_on_one_address_covers_that_address_only(listener):
    port = listener(socket.AF_INET, "127.0.0.1")
    assert lvs_realserver_ports_to_wait([["127.0.0.1/32", port], ["127.0.0.2", port]], ss_lines()) == [
        ["127.0.0.2", port]]


@needs_ss
def test_an_ipv6_only_wildcard_covers_ipv6_pairs_and_never_ipv4_ones(listener):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this kernel")
    try:
        port = listener(socket.AF_INET6, "::")
    except OSError as error:
        pytest.skip(f"cannot listen on [::]: {error}")
    pairs = [["fd00::100/128", port], ["198.18.0.100", port]]
    assert lvs_realserver_ports_to_wait(pairs, ss_lines()) == [pairs[1]]


def test_ss_any_family_wildcard_and_an_ipv6_spelling_in_brackets():
    lines = ["LISTEN 0 4096 *:9100 *:*", "LISTEN 0 128 [fd00::100]:80 [::]:*"]
    pairs = [["198.18.0.153", 9100], ["FD00:0::100/128", 80], ["fd00::101", 80]]
    assert lvs_realserver_ports_to_wait(pairs, lines) == [["fd00::101", 80]]


def test_nothing_read_means_every_pair_is_waited_on():
    pairs = [["198.18.0.100/32", 80], ["not-an-address", 80]]
    assert lvs_realserver_ports_to_wait(pairs, []) == pairs
    assert lvs_realserver_ports_to_wait(pairs, ["garbage", "LISTEN 0 128 0.0.0.0:http 0.0.0.0:*"]) == pairs
