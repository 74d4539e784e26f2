"""Several health checks per real server, the HTTP digest, and notify_stop, as lvs_director resolves, checks and
writes them.

keepalived.conf(5) of keepalived 2.2.7 (Debian 12's package), real_server: "healthcheckers. Can be multiple of each
type"; keepalived counts a real server up only while none of its checkers has failed (check_data.h,
real_server_t.num_failed_checkers). url: "healthcheck needs digest or status_code and digest", the digest computed
with genhash. vrrp_instance and vrrp_sync_group: notify_stop, "executed when stopping vrrp". The oracle tests run the
real `keepalived --config-test` on what the template writes (skipped where keepalived is absent).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from lvs_role_files import KEEPALIVED, keepalived_config_test

from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

VIP = "198.18.0.100"
KEY = f"lvs_director_virtual_servers[{VIP}:80]"
TCP = {"type": "TCP_CHECK"}
HEALTH = {"type": "HTTP_GET", "url_path": "/health", "connect_port": 8080}
# The MD5 of a page's body, as genhash prints it.
DIGEST = "9b3a0c85a887a256d6939da88aabd8cd"


def settings(host="dir1", notify_stop=None, **service):
    return {
        "host": host, "interface": "eth0", "state": "MASTER" if host == "dir1" else "BACKUP",
        "priority": 150 if host == "dir1" else 100,
        "own_addresses": ["198.18.0.11" if host == "dir1" else "198.18.0.12"],
        "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP],
                            "notify_stop": notify_stop}],
        "virtual_servers": [{"address": VIP, "port": 80,
                             "real_servers": service.pop("real_servers", [{"address": "198.18.0.21"},
                                                                          {"address": "198.18.0.22"}]),
                             **service}],
    }


def errors_of(**service):
    configs = [lvs_director_resolve(settings(host, **service)) for host in ("dir1", "dir2")]
    return [entry["message"] for entry in lvs_director_problems(configs)["errors"]]


def real_checks(**service):
    return [[check["type"] for check in real["checks"]]
            for real in lvs_director_resolve(settings(**service))["virtual_servers"][0]["real_servers"]]


def test_every_real_server_gets_the_services_checks_unless_it_lists_its_own():
    assert real_checks(checks=[TCP, HEALTH]) == [["TCP_CHECK", "HTTP_GET"], ["TCP_CHECK", "HTTP_GET"]]
    assert real_checks(checks=[TCP, HEALTH], real_servers=[
        {"address": "198.18.0.21"}, {"address": "198.18.0.22", "checks": [{"type": "PING_CHECK"}]},
    ]) == [["TCP_CHECK", "HTTP_GET"], ["PING_CHECK"]]
    # One check, as before: a real server's check changes the service's.
    server = lvs_director_resolve(settings(check=HEALTH, real_servers=[
        {"address": "198.18.0.21", "check": {"retry": 5}}]))["virtual_servers"][0]
    assert [(c["type"], c["url_path"], c["retry"]) for c in server["real_servers"][0]["checks"]] == [
        ("HTTP_GET", "/health", 5)]


@pytest.mark.parametrize(("service", "message"), [
    ({"check": TCP, "checks": [HEALTH]}, f"{KEY} sets both check and checks; keep one (checks lists several)"),
    ({"checks": []}, f"{KEY}.checks is []; list one or more checks (type none for no check)"),
    ({"checks": [TCP, HEALTH], "real_servers": [{"address": "198.18.0.21", "check": {"retry": 5}}]},
     f"{KEY}.real_servers[198.18.0.21].check would change one of its service's 2 checks; give it a list of its own "
     "in checks"),
])
def test_a_list_of_checks_that_cannot_be_read_is_refused_by_name(service, message):
    with pytest.raises(AnsibleFilterError) as raised:
        lvs_director_resolve(settings(**service))
    assert str(raised.value) == f"lvs_director_resolve: {message}"


def test_each_check_of_a_list_is_checked_and_named_by_its_place():
    assert errors_of(protocol="UDP", checks=[{"type": "UDP_CHECK"}, TCP],
                     real_servers=[{"address": "198.18.0.21"}]) == [
        f"{host}: lvs_director_virtual_servers[{VIP}:80].real_servers[198.18.0.21].checks[1] is TCP_CHECK on a UDP "
        "service, so every real server fails it and leaves the pool; use UDP_CHECK, DNS_CHECK, PING_CHECK or "
        "MISC_CHECK"
        for host in ("dir1", "dir2")
    ]
    assert errors_of(checks=[TCP, {"type": "none"}], real_servers=[{"address": "198.18.0.21"}]) == [
        f"{host}: {KEY}.real_servers[198.18.0.21].checks lists type none beside other checks; drop it (none means "
        "no check at all)"
        for host in ("dir1", "dir2")
    ]


def test_a_misc_check_in_a_list_is_a_script_the_preflight_looks_at():
    resolved = lvs_director_resolve(settings(checks=[TCP, {"type": "MISC_CHECK", "misc_path": "chk --fast"}],
                                             real_servers=[{"address": "198.18.0.21"}]))
    errors = [entry["message"] for entry in lvs_director_problems([resolved])["errors"]]
    assert any(f"{KEY}.real_servers[198.18.0.21].checks[1].misc_path" in error and "chk" in error
               for error in errors), errors


def test_directors_whose_checks_differ_only_in_order_agree():
    configs = [lvs_director_resolve(settings("dir1", checks=[TCP, HEALTH])),
               lvs_director_resolve(settings("dir2", checks=[HEALTH, TCP]))]
    assert lvs_director_problems(configs)["errors"] == []
    configs[1] = lvs_director_resolve(settings("dir2", checks=[TCP]))
    assert any("differs between the directors" in entry["message"]
               for entry in lvs_director_problems(configs)["errors"])


def test_the_template_writes_each_check_in_the_real_server_block(render):
    text = render("lvs_director", "keepalived.conf.j2", lvs_director_global_defs_extra=[],
                  lvs_director_resolved=lvs_director_resolve(settings(checks=[TCP, {**HEALTH, "digest": DIGEST}])))
    real = text[text.index("real_server 198.18.0.21 80 {"):text.index("real_server 198.18.0.22 80 {")]
    assert real.count("TCP_CHECK {") == 1 and real.count("HTTP_GET {") == 1
    assert f"                digest {DIGEST}\n" in real


# Digests as an operator might paste them: genhash's own, in capitals, cut short, too long, not hexadecimal.
DIGESTS = [DIGEST, DIGEST.upper(), DIGEST[:30], DIGEST + "0", "z" * 32]


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
@pytest.mark.parametrize("digest", DIGESTS)
def test_the_preflight_refuses_exactly_the_digests_keepalived_refuses(render, tmp_path, digest):
    service = {"checks": [TCP, {**HEALTH, "digest": digest}]}
    text = render("lvs_director", "keepalived.conf.j2", lvs_director_global_defs_extra=[],
                  lvs_director_resolved=lvs_director_resolve(settings(**service)))
    oracle = keepalived_config_test(text, tmp_path)
    refused = [error for error in errors_of(**service) if ".digest is" in error]
    assert bool(refused) == (oracle.returncode != 0), (oracle.stderr, refused)
    if refused:
        assert refused[0] == (
            f"dir1: {KEY}.real_servers[198.18.0.21].checks[1].digest is {digest!r}, which keepalived refuses; use "
            "the 32 hexadecimal digits of the page's MD5 as keepalived's genhash prints them"
        )


def test_notify_stop_is_written_and_checked_like_the_other_notify_scripts(render):
    text = render("lvs_director", "keepalived.conf.j2", lvs_director_global_defs_extra=[],
                  lvs_director_resolved=lvs_director_resolve(settings(notify_stop="/usr/local/sbin/vip-down stop")))
    assert '    notify_stop "/usr/local/sbin/vip-down stop"\n' in text
    resolved = lvs_director_resolve(settings(notify_stop="vip-down"))
    errors = [entry["message"] for entry in lvs_director_problems([resolved])["errors"]]
    assert any("lvs_director_vrrp_instances[VI_LVS].notify_stop" in error for error in errors), errors


@pytest.mark.skipif(KEEPALIVED is None, reason="keepalived is not installed")
def test_keepalived_accepts_several_checks_a_digest_and_notify_stop(render, tmp_path):
    resolved = lvs_director_resolve(settings(notify_stop="/bin/true stop",
                                             checks=[TCP, {**HEALTH, "digest": DIGEST}, {"type": "PING_CHECK"}]))
    result = keepalived_config_test(render("lvs_director", "keepalived.conf.j2", lvs_director_global_defs_extra=[],
                                           lvs_director_resolved=resolved), tmp_path)
    assert result.returncode == 0, result.stderr
