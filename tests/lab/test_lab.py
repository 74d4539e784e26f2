"""Tests of the lab's pure parts and process handling; the molecule scenarios default and lvs-uml boot the real thing.

Run: python3 -m pytest -q -p no:cacheprovider tests/lab
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hpclab import (  # noqa: E402
    guard,
    ssh_probe,
    topology,
    uml_boot,
    uml_guests,
    uml_image,
    uml_inventory,
    uml_process,
    uml_seed,
    uml_state,
)
from hpclab.system import identify, is_alive  # noqa: E402
from hpclab.topology import GUEST_RANGE, HOSTS  # noqa: E402


def test_guest_addresses_are_unique_and_inside_the_guest_range():
    first, last = (ipaddress.IPv4Address(address) for address in GUEST_RANGE)
    addresses = [ipaddress.IPv4Address(guest.address) for guest in topology.GUESTS]
    assert len(set(addresses)) == len(addresses)
    assert all(first <= address <= last for address in addresses)
    topology.check_guest_addresses()


def test_guests_are_named_and_grouped_as_documented():
    assert [(g.name, g.address, g.group) for g in topology.GUESTS] == [
        ("udir1", "198.18.0.151", "lvs_directors"),
        ("udir2", "198.18.0.152", "lvs_directors"),
        ("urs1", "198.18.0.153", "lvs_realservers"),
        ("urs2", "198.18.0.154", "lvs_realservers"),
    ]


def test_tap_names_fit_a_linux_interface_name():
    assert all(len(topology.bridge_port(guest)) <= 15 for guest in topology.GUESTS)


def test_mac_address_is_locally_administered_and_built_from_the_address():
    assert uml_boot.mac_address(topology.GUESTS[0]) == "02:00:c6:12:00:97"
    assert len({uml_boot.mac_address(guest) for guest in topology.GUESTS}) == len(topology.GUESTS)


def test_machine_id_is_stable_per_lab_and_guest():
    udir1, udir2 = topology.GUESTS[:2]
    assert uml_boot.machine_id("hb", udir1) == uml_boot.machine_id("hb", udir1)
    assert uml_boot.machine_id("hb", udir1) != uml_boot.machine_id("hb", udir2)
    assert uml_boot.machine_id("hb", udir1) != uml_boot.machine_id("lv", udir1)
    assert len(uml_boot.machine_id("hb", udir1)) == 32
    int(uml_boot.machine_id("hb", udir1), 16)


def test_kernel_arguments_give_static_lab_addresses_of_both_families_and_no_ipv6_gateway():
    arguments = uml_boot.kernel_arguments("hb", topology.GUESTS[2])
    assert "ip=198.18.0.153::198.18.0.1:255.255.255.0:urs1:vec0:off" in arguments
    # dracut.cmdline(7) syntax, read by systemd-network-generator: IPv6 in brackets, prefix length as netmask.
    assert "ip=[fd6c:8b1e:52a9::153]:::64:urs1:vec0:off" in arguments
    assert "vec0:transport=tap,ifname=to-urs1,mac=02:00:c6:12:00:99,gro=1" in arguments
    assert not [argument for argument in arguments if argument.startswith("ipv6.")]
    assert "systemd.hostname=urs1" in arguments
    assert "root=/dev/ubda" in arguments


def test_the_root_disk_is_copy_on_write_without_a_host_lock_and_the_seed_read_only(tmp_path):
    # A reboot exec()s UML again while the old disk helper may still hold the old lock on root.cow: with a lock the
    # new boot can panic on "already locked". ubd_kern.c: 'c' turns file locking off, 'r' mounts read-only.
    arguments = uml_boot.disk_arguments(tmp_path / "root.cow", tmp_path / "rootfs.img", tmp_path / "seed.img")
    assert arguments == [f"ubd0c={tmp_path}/root.cow,{tmp_path}/rootfs.img", f"ubd1r={tmp_path}/seed.img"]


def test_every_lab_address_has_an_ipv6_twin_in_the_lab_prefix_with_the_same_last_digits():
    prefix = ipaddress.IPv6Network(topology.SUBNET6)
    # RFC 4193: a unique-local prefix is fd00::/8 with a 40-bit global ID, and the lab uses one /64 of it.
    assert prefix.subnet_of(ipaddress.IPv6Network("fd00::/8")) and prefix.prefixlen == topology.PREFIX_LENGTH6 == 64
    twins = [topology.address6(machine.address) for machine in (*HOSTS, *topology.GUESTS)]
    assert all(ipaddress.IPv6Address(twin) in prefix for twin in twins)
    assert len(set(twins)) == len(twins)
    assert topology.address6("198.18.0.153") == "fd6c:8b1e:52a9::153"


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of its own needs root")
def test_the_guard_ruleset_loads_in_nft_and_lets_only_the_lab_prefix_and_link_scope_through():
    text = guard.ruleset()
    assert f"ip6 saddr {{ {topology.SUBNET6}, fe80::/10, :: }}" in text
    assert f"ip6 daddr {{ {topology.SUBNET6}, fe80::/10, ff02::/16 }}" in text
    assert 'ether type ip6 counter name "ipv6_outside_lab" drop' in text
    # nft -c: parse and check against the kernel without loading, in a network namespace of its own.
    checked = subprocess.run(
        ["unshare", "-n", "nft", "-c", "-f", "-"], input=text, text=True, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


def test_down_keeps_each_guests_console_log_beside_the_state_dir_replacing_older_ones(tmp_path):
    state_dir = tmp_path / "lum"
    for guest in topology.GUESTS[:3]:
        uml_state.console_log(state_dir, guest).parent.mkdir(parents=True)
        uml_state.console_log(state_dir, guest).write_text(f"{guest.name} booted\n")
    kept = tmp_path / "lum-consoles"
    kept.mkdir()
    (kept / "udir1.log").write_text("an earlier lab's console\n")

    assert uml_guests.keep_console_logs(state_dir) == kept == uml_state.kept_consoles_dir(state_dir)

    assert sorted(path.name for path in kept.iterdir()) == ["udir1.log", "udir2.log", "urs1.log"]
    assert (kept / "udir1.log").read_text() == "udir1 booted\n"


def test_a_console_log_that_cannot_be_kept_only_warns(tmp_path, capsys):
    state_dir = tmp_path / "lum"
    (tmp_path / "lum-consoles").write_text("a file where the folder would go")

    assert uml_guests.keep_console_logs(state_dir) is None
    assert "could not keep the guests' console logs" in capsys.readouterr().err


def test_guest_named_lists_the_guests_when_the_name_is_unknown():
    with pytest.raises(ValueError, match="no lab guest named 'rs9': the guests are udir1, udir2, urs1, urs2"):
        topology.guest_named("rs9")


def test_hosts_file_starts_with_the_marker_lab_seed_looks_for():
    text = uml_seed.etc_hosts_text(topology.GUESTS[0])
    script = (HERE / "hpclab" / "guest-rootfs" / "usr" / "local" / "sbin" / "lab-seed").read_text(encoding="utf-8")
    assert text.startswith("# lab hosts")
    assert '"# lab hosts"*)' in script
    for host in (*HOSTS, *topology.GUESTS):
        assert f"{host.address}\t{host.name}.lab {host.name}\n" in text


@pytest.fixture
def fake_uml_modules(tmp_path, monkeypatch):
    modules = tmp_path / "modules"
    (modules / "6.1.176").mkdir(parents=True)
    monkeypatch.setattr(uml_image, "UML_MODULES_DIR", modules)
    return modules


def test_recipe_key_is_stable_for_the_same_recipe(fake_uml_modules):
    assert uml_image.recipe_key(uml_image.recipe()) == uml_image.recipe_key(uml_image.recipe())


def test_recipe_key_changes_with_the_package_list(fake_uml_modules, monkeypatch):
    before = uml_image.recipe_key(uml_image.recipe())
    monkeypatch.setattr(uml_image, "GUEST_PACKAGES", (*uml_image.GUEST_PACKAGES, "tcpdump"))
    assert uml_image.recipe_key(uml_image.recipe()) != before


def test_recipe_key_changes_with_the_uml_kernel(fake_uml_modules):
    before = uml_image.recipe_key(uml_image.recipe())
    (fake_uml_modules / "6.1.176").rename(fake_uml_modules / "6.1.177")
    assert uml_image.recipe_key(uml_image.recipe()) != before


def test_recipe_key_changes_with_the_masked_generators(fake_uml_modules, monkeypatch):
    before = uml_image.recipe_key(uml_image.recipe())
    monkeypatch.setattr(uml_image, "MASKED_GENERATORS", uml_image.MASKED_GENERATORS[1:])
    assert uml_image.recipe_key(uml_image.recipe()) != before


def test_mask_generators_links_each_to_dev_null_and_is_repeatable(tmp_path):
    # systemd.generator(7): a same-named link to /dev/null in /etc/systemd/system-generators masks a generator.
    uml_image.mask_generators(tmp_path)
    uml_image.mask_generators(tmp_path)
    folder = tmp_path / "etc/systemd/system-generators"
    assert sorted(path.name for path in folder.iterdir()) == sorted(uml_image.MASKED_GENERATORS)
    assert {str(path.readlink()) for path in folder.iterdir()} == {"/dev/null"}
    assert "systemd-fstab-generator" not in uml_image.MASKED_GENERATORS


def test_guest_cpus_spread_round_robin_over_the_allowed_cpus():
    assert uml_process.guest_cpus(4, {0, 1}) == [0, 1, 0, 1]
    assert uml_process.guest_cpus(3, {5}) == [5, 5, 5]
    assert uml_process.guest_cpus(2, {2, 7, 9}) == [2, 7]
    assert set(uml_process.guest_cpus(4)) <= os.sched_getaffinity(0)


def test_uml_modules_version_needs_exactly_one_kernel(fake_uml_modules):
    (fake_uml_modules / "6.1.177").mkdir()
    with pytest.raises(uml_image.LabError, match=r"exactly one UML kernel module folder .*user-mode-linux"):
        uml_image.uml_modules_version()


def test_apt_sources_are_the_machines_files_that_serve_the_suite(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("# deb http://mirror.invalid/debian bookworm main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "extra.list").write_text("deb http://mirror.invalid/debian bookworm contrib\n")
    (tmp_path / "sources.list.d" / "vendor.sources").write_text("Types: deb\nSuites: nodistro\nComponents: main\n")
    assert uml_image.apt_source_files("bookworm", tmp_path) == [
        str(tmp_path / "sources.list.d" / "extra.list"),
        str(tmp_path / "sources.list.d" / "debian.sources"),
    ]


def test_apt_sources_without_the_suite_are_an_error(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://mirror.invalid/debian trixie main\n")
    with pytest.raises(uml_image.LabError, match="no apt source on this machine serves Debian bookworm"):
        uml_image.apt_source_files("bookworm", tmp_path)


def test_inventory_puts_guests_in_their_groups_and_keeps_the_netns_client_and_gpu_node(tmp_path):
    data = yaml.safe_load(uml_inventory.render("hb", tmp_path))
    children = data["all"]["children"]
    assert sorted(children["lvs_directors"]["hosts"]) == ["udir1", "udir2"]
    assert sorted(children["lvs_realservers"]["hosts"]) == ["urs1", "urs2"]
    assert sorted(children["lvs_clients"]["hosts"]) == ["client"]
    assert sorted(children["gpu_nodes"]["hosts"]) == ["gpu1"]
    assert data["all"]["vars"]["lab_kind"] == "uml"
    urs1 = children["lvs_realservers"]["hosts"]["urs1"]
    assert urs1["ansible_host"] == "198.18.0.153"
    assert urs1["lab_interface"] == "vec0"
    assert 'ProxyCommand="ip netns exec hb-sw nc %h %p"' in urs1["ansible_ssh_common_args"]
    assert "ServerAliveInterval=5" in urs1["ansible_ssh_common_args"]
    assert urs1["ansible_pipelining"] is True
    client = children["lvs_clients"]["hosts"]["client"]
    assert client["lab_interface"] == "eth0"
    assert "ServerAliveInterval" not in client["ansible_ssh_common_args"]


def test_memory_mib_reads_the_allocated_size_of_a_deleted_mapped_file(tmp_path):
    path = tmp_path / "#memory"
    with open(path, "wb") as memory:
        memory.write(b"\1" * 3 * 1024 * 1024)
        memory.flush()
        os.fsync(memory.fileno())
        path.unlink()
        assert uml_process.memory_mib(identify(os.getpid())) == pytest.approx(3.0, abs=0.2)


def test_preload_library_compiles_without_warnings(tmp_path, monkeypatch):
    monkeypatch.setenv(uml_image.CACHE_DIR_VARIABLE, str(tmp_path))
    library = uml_process.preload_library()
    assert library.parent == tmp_path / "uml"
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    assert " T ptrace" in symbols.stdout
    assert uml_process.preload_library() == library  # cached: the same file, not rebuilt


def _fake_guest_programs(tmp_path: Path) -> Path:
    """`linux` (a shell) and `uml_helper` (sleep) in tmp_path, so their comm names look like a guest's."""
    (tmp_path / "linux").symlink_to("/bin/sh")
    (tmp_path / "uml_helper").symlink_to(subprocess.check_output(["which", "sleep"], text=True).strip())
    return tmp_path


def test_stop_ends_a_guest_and_what_is_left_of_its_session_but_nothing_else(tmp_path):
    programs = _fake_guest_programs(tmp_path)
    guest = subprocess.Popen(
        [str(programs / "linux"), "-c", f"{programs / 'uml_helper'} 60 & {programs / 'uml_helper'} 61"],
        start_new_session=True,
    )
    bystander = subprocess.Popen([str(programs / "uml_helper"), "62"])
    try:
        time.sleep(0.3)
        identity = identify(guest.pid)
        helpers = uml_process._session_members(identity)
        assert len(helpers) == 2
        assert uml_process.stop([identity]) == []
        guest.wait(timeout=5)
        assert not any(is_alive(helper) for helper in helpers)
        assert is_alive(identify(bystander.pid))
    finally:
        bystander.kill()
        bystander.wait()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def test_probe_sees_an_ssh_banner(monkeypatch):
    listener = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setattr(ssh_probe, "SSH_PORT", listener.getsockname()[1])

    def answer_once():
        connection = listener.accept()[0]
        connection.sendall(b"SSH-2.0-lab\r\n")
        connection.close()

    server = threading.Thread(target=answer_once, daemon=True)
    server.start()
    try:
        attempt_timeout_s = ssh_probe.GUEST_ATTEMPT_TIMEOUT_S
        ready = ssh_probe.wait_for_ssh(["127.0.0.1"], timeout_s=5.0, attempt_timeout_s=attempt_timeout_s)
        assert ready == {"127.0.0.1": True}
    finally:
        server.join(timeout=1)
        listener.close()


def test_probe_reports_a_silent_port_within_its_timeout(monkeypatch):
    monkeypatch.setattr(ssh_probe, "SSH_PORT", _closed_port())
    started = time.monotonic()
    ready = ssh_probe.wait_for_ssh(["127.0.0.1"], timeout_s=0.5, attempt_timeout_s=ssh_probe.HOST_ATTEMPT_TIMEOUT_S)
    assert ready == {"127.0.0.1": False}
    assert time.monotonic() - started < 3.0


def test_probe_prints_json_and_exits_nonzero_when_a_banner_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(ssh_probe, "SSH_PORT", _closed_port())
    assert ssh_probe.main(["0.2", "1.0", "127.0.0.1"]) == 1
    assert json.loads(capsys.readouterr().out) == {"127.0.0.1": False}


def test_probe_command_runs_this_probe_isolated_in_the_switch_namespace():
    argv = ssh_probe.probe_argv("hb-sw", 20.0, ["198.18.0.10", "198.18.0.151"], ssh_probe.GUEST_ATTEMPT_TIMEOUT_S)
    assert argv[:4] == ["ip", "netns", "exec", "hb-sw"]
    assert argv[5:] == ["-I", ssh_probe.__file__, "20.0", "5.0", "198.18.0.10", "198.18.0.151"]


def test_one_table_names_every_lab_machine_once():
    names = [machine.name for machine in (*HOSTS, *topology.GUESTS)]
    addresses = [machine.address for machine in (*HOSTS, *topology.GUESTS)]
    assert len(set(names)) == len(names) and len(set(addresses)) == len(addresses)


def test_host_sees_the_machines_files_except_under_its_fresh_folders(tmp_path):
    from hpclab.files import FRESH_PATHS, host_sees

    assert host_sees("/work/main/.work/wheelhouse/gpu_moe") and host_sees("/etc/hosts") and host_sees("/optional")
    assert set(FRESH_PATHS) == {"/root", "/opt", "/tmp", "/var/tmp", "/etc/ansible"}
    for inside in FRESH_PATHS:
        assert not host_sees(inside) and not host_sees(f"{inside}/x/.work/wheelhouse")
    # A link from a visible folder into a fresh one is not seen either: the path is resolved first.
    (tmp_path / "link").symlink_to("/root")
    assert not host_sees(tmp_path / "link" / "wheelhouse")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")
def test_a_private_etc_folder_hides_the_machines_own_in_a_real_overlay_mount(tmp_path):
    # The machine's recorded facts (what a playbook test writes to /etc/ansible/facts.d) must not reach a lab host.
    from hpclab.files import PRIVATE_ETC_FOLDERS, host_sees, opaque_folder

    assert not host_sees("/etc/ansible/facts.d/hpc_balance_lvs_weights.fact") and host_sees("/etc/hosts")
    lower, upper, work, merged = (tmp_path / name for name in ("lower", "upper", "work", "merged"))
    (lower / "ansible" / "facts.d").mkdir(parents=True)
    (lower / "ansible" / "facts.d" / "hpc_balance_lvs_weights.fact").write_text('{"198.18.0.21": 1}\n')
    (lower / "hosts").write_text("127.0.0.1 localhost\n")
    for folder in (upper, work, merged):
        folder.mkdir()
    for private in PRIVATE_ETC_FOLDERS:
        opaque_folder(upper / Path(private).relative_to("/etc"))
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}",
                    str(merged)], check=True)
    try:
        assert (merged / "hosts").exists()
        assert (merged / "ansible").is_dir() and list((merged / "ansible").iterdir()) == []
    finally:
        subprocess.run(["umount", str(merged)], check=True)


@pytest.fixture
def spare_lab_namespaces():
    """Every namespace name of a lab with the prefix `hbz`, made for real with `ip netns add`; removed afterwards."""
    names = topology.lab_netns_names("hbz")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if any(name in os.listdir("/run/netns") for name in names) if os.path.isdir("/run/netns") else False:
        pytest.skip("a lab with prefix hbz exists on this machine")
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True)
    yield names
    for name in names:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)


def test_up_removes_the_empty_namespaces_a_killed_run_left_and_refuses_a_live_or_foreign_one(
    spare_lab_namespaces, tmp_path, monkeypatch
):
    # A machine killed mid-run keeps /run/netns/<name> with no process inside; `up` must not refuse forever after.
    from hpclab import netns_up
    from hpclab.system import LabRefused, netns_names

    later_s = time.time() + netns_up.LEFTOVER_AFTER_S + 1
    assert netns_up.leftover_namespaces("hbz", spare_lab_namespaces) == []  # just made: an `up` may be starting them
    assert netns_up.leftover_namespaces("hbz", spare_lab_namespaces, now_s=later_s) == spare_lab_namespaces
    assert netns_up.leftover_namespaces("hbz", [*spare_lab_namespaces, "hbz-extra"], now_s=later_s) == []
    inside = subprocess.Popen(["ip", "netns", "exec", spare_lab_namespaces[1], "sleep", "30"])
    try:
        deadline_s = time.monotonic() + 5
        while not netns_up.netns_pids(spare_lab_namespaces[1]) and time.monotonic() < deadline_s:
            time.sleep(0.05)
        assert netns_up.leftover_namespaces("hbz", spare_lab_namespaces, now_s=later_s) == []
        monkeypatch.setattr(netns_up.time, "time", lambda: later_s)
        with pytest.raises(LabRefused, match="seems to exist"):
            netns_up.check_no_lab("hbz", tmp_path / "absent")
    finally:
        inside.kill()
        inside.wait()
    assert set(spare_lab_namespaces) <= set(netns_names())
    netns_up.check_no_lab("hbz", tmp_path / "absent")
    assert not set(spare_lab_namespaces) & set(netns_names())


def _stand_in_ssh(folder: Path, refusals: int) -> None:
    """An `ssh` on PATH that refuses each guest's first `refusals` logins, as a booting guest's sshd can."""
    folder.mkdir(exist_ok=True)
    script = folder / "ssh"
    script.write_text(
        "#!/bin/sh\n"
        f'tries="{folder}/tries-$5"; echo x >> "$tries"\n'
        f'[ "$(wc -l < "$tries")" -gt {refusals} ] && exit 0\n'
        'echo "Connection closed by UNKNOWN port 65535" >&2; exit 255\n'
    )
    script.chmod(0o755)


def test_wait_for_login_retries_a_guest_that_drops_its_first_sessions_and_names_one_that_never_lets_in(
    tmp_path, monkeypatch, capsys
):
    # The banner probe passed, yet the first ssh session failed and the first task found the guest unreachable
    # (`make demo`, "Data could not be sent to remote host"): a login that ran a command is what `up` waits for.
    monkeypatch.setattr(uml_guests, "LOGIN_RETRY_S", 0.01)
    _stand_in_ssh(tmp_path / "bin", refusals=2)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    tries = uml_guests.wait_for_login(tmp_path, timeout_s=10)
    assert tries == {guest.name: 3 for guest in topology.GUESTS}
    assert "login to urs1 failed on try 1 (rc 255: Connection closed by UNKNOWN port 65535)" in capsys.readouterr().err
    assert uml_guests.login_argv(tmp_path, "urs1")[-2:] == ["urs1", "true"]

    _stand_in_ssh(tmp_path / "never", refusals=10**6)
    monkeypatch.setenv("PATH", f"{tmp_path / 'never'}:{os.environ['PATH']}")
    with pytest.raises(uml_guests.LabError, match="answer ssh but refuse a login after 0.05 s"):
        uml_guests.wait_for_login(tmp_path, timeout_s=0.05)
