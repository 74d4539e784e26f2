"""Issue 18: what the LVS roles' task files do, read from the files (the behaviour itself runs in the molecule
scenarios lvs-netns and lvs-uml)."""

from __future__ import annotations

import pytest
from lvs_role_files import ROLES, load_yaml


def tasks(role, name):
    return load_yaml(ROLES / role / name)


def by_name(entries, name):
    (entry,) = [entry for entry in entries if entry["name"] == name]
    return entry


def test_the_port_check_waits_on_the_address_keepalived_checks_and_says_so():  # 11
    task = load_yaml(ROLES / "lvs_realserver" / "tasks" / "check_ports.yml")[0]
    assert task["loop"] == (
        "{{ (lvs_realserver_vip_cidrs + [lvs_realserver_own_address]) | product(lvs_realserver_check_ports) | list }}"
    )
    message = " ".join(task["ansible.builtin.wait_for"]["msg"].split())
    assert "or the VIP" not in message
    assert message.endswith(
        "clients connect to the VIP and the directors' health checks to this host's own address "
        "({{ lvs_realserver_own_address }}), so start the service on this port listening on 0.0.0.0 (or on both "
        "addresses)"
    )


def test_a_reload_that_an_earlier_run_left_pending_is_notified_again():  # 4
    config = tasks("lvs_director", "tasks/config.yml")
    marker = by_name(config, "Look for a reload an earlier run left pending")
    assert marker["ansible.builtin.stat"]["path"] == "{{ lvs_director_reload_marker_path }}"
    write = by_name(config, "Write keepalived.conf (checked with keepalived -t first; a broken file never replaces the "
                            "live one)")
    assert write["notify"] == "Reload keepalived"
    assert write["changed_when"] == ("lvs_director_config.changed or (lvs_director_reload_marker.stat.exists and "
                                     "lvs_director_pids_before.rc == 0)")
    mark = by_name(config, "Mark the reload as pending until a handler has run it")
    assert mark["when"] == "lvs_director_config is changed and lvs_director_pids_before.rc == 0"
    assert config.index(marker) < config.index(write) < config.index(mark)
    forget = by_name(tasks("lvs_director", "handlers/main.yml"), "Forget the pending reload")
    assert forget["listen"] == ["Reload keepalived", "Restart keepalived"]
    assert forget["ansible.builtin.file"] == {"path": "{{ lvs_director_reload_marker_path }}", "state": "absent"}


def test_restarts_roll_over_the_directors_backups_first_the_master_last():  # 5
    handlers = tasks("lvs_director", "handlers/main.yml")
    rolling = by_name(handlers, "Restart keepalived on one director at a time, backups first, the master last")
    assert rolling["run_once"] is True
    assert rolling["loop"] == "{{ lvs_director_restart_order }}"
    assert rolling["ansible.builtin.include_tasks"] == "restart_one.yml"
    # No handler restarts keepalived on every notified host at once any more.
    assert [h for h in handlers if "restarted" in str(h) or "stopped" in str(h)] == []
    steps = tasks("lvs_director", "tasks/restart_one.yml")
    assert all(step["delegate_to"] == "{{ lvs_director_restart_host }}" for step in steps)
    assert steps[-1]["name"] == "Wait until keepalived runs again here and, on the intended master, holds its VIPs"
    order = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_restart_order"]
    assert "sort(attribute='lvs_director_restart_rank')" in order
    note = by_name(tasks("lvs_director", "tasks/config.yml"),
                   "Note whether this director's keepalived must restart, and its place in the rolling restart")
    assert note["ansible.builtin.set_fact"]["lvs_director_restart_rank"].split() == [
        "{{", "(1000", "if", "lvs_director_master_vips", "|", "length", ">", "0", "else", "0)", "+",
        "(lvs_director_resolved.vrrp_instances", "|", "map(attribute='priority')", "|", "max", "|", "default(0))",
        "}}"]


def test_restart_order_puts_backups_first_by_priority_and_masters_last():  # 5
    import jinja2

    order = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_restart_order"]
    hosts = {
        "dir1": {"inventory_hostname": "dir1", "lvs_director_restart_pending": True, "lvs_director_restart_rank": 1150},
        "dir2": {"inventory_hostname": "dir2", "lvs_director_restart_pending": True, "lvs_director_restart_rank": 100},
        "dir3": {"inventory_hostname": "dir3", "lvs_director_restart_pending": True, "lvs_director_restart_rank": 90},
        "dir4": {"inventory_hostname": "dir4", "lvs_director_restart_pending": False, "lvs_director_restart_rank": 80},
    }
    environment = jinja2.Environment()
    environment.filters["extract"] = lambda name, mapping: mapping[name]
    rendered = environment.from_string(order).render(ansible_play_hosts=list(hosts), hostvars=hosts)
    assert rendered.strip() == "['dir3', 'dir2', 'dir1']"


def test_scripts_are_looked_at_through_links_as_keepalived_does():  # 1
    """/bin is a link (mode 0777) on merged-/usr hosts: its own mode must not count, what it points to does."""
    look = by_name(tasks("lvs_director", "tasks/preflight.yml"),
                   "Look at every program the config makes keepalived run, and at its folder")
    assert look["ansible.builtin.stat"]["follow"] is True
    assert look["loop"] == "{{ lvs_director_resolved | hpc.balance.lvs_director_script_lookups }}"


ADD_VIPS = "Put the missing VIPs on lo (IPv6 with nodad, since lo has no neighbours to detect a duplicate)"
REMOVE_VIPS = "Remove VIPs this role put on lo that are no longer listed"


def test_check_mode_reports_a_vip_missing_on_lo_as_changed_without_adding_it():
    """command runs nothing in check mode; given `removes` it reports changed there instead of skipped."""
    vips = tasks("lvs_realserver", "tasks/vips.yml")
    add = by_name(vips, ADD_VIPS)
    assert add["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/lo"
    assert add["changed_when"] is True
    assert "check_mode" not in add
    assert add["loop"] == "{{ lvs_realserver_vip_plan.add }}"
    read = by_name(vips, "Read the addresses on lo")
    assert read["check_mode"] is False
    plan = by_name(vips, "Work out which VIPs lo lacks and which it holds that are no longer listed")
    assert vips.index(read) < vips.index(plan) < vips.index(add)


def test_check_mode_reports_a_vip_no_longer_listed_as_changed_without_removing_it():
    remove = by_name(tasks("lvs_realserver", "tasks/vips.yml"), REMOVE_VIPS)
    assert remove["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/lo"
    assert remove["changed_when"] is True


def test_check_mode_reports_a_pending_arp_setting_as_changed_without_applying_it():
    apply = by_name(tasks("lvs_realserver", "tasks/sysctl.yml"), "Apply the ARP settings that differ now")
    assert apply["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/all"


def _render_vip_add_argv(item):
    import jinja2

    add = by_name(tasks("lvs_realserver", "tasks/vips.yml"), ADD_VIPS)
    template = jinja2.Environment().from_string(add["ansible.builtin.command"]["argv"])
    return template.render(item=item, lvs_realserver_vip_label="lo:lvs")


@pytest.mark.parametrize(
    ("item", "argv"),
    [
        ("198.18.0.100/32", "['ip', 'addr', 'add', '198.18.0.100/32', 'dev', 'lo', 'label', 'lo:lvs']"),
        ("fd00::100/128", "['ip', 'addr', 'add', 'fd00::100/128', 'dev', 'lo', 'nodad']"),
    ],
    ids=["IPv4 with the label", "IPv6 with nodad, no label"],
)
def test_a_vip_is_added_to_lo_with_the_options_of_its_family(item, argv):
    assert _render_vip_add_argv(item) == argv


@pytest.mark.parametrize(
    ("value", "rp_filter"),
    [("false", False), ("no", False), ("0", False), (False, False), ("true", True), ("yes", True), (True, True)],
)
def test_loose_rp_filter_given_as_text_reads_as_the_boolean_it_spells(value, rp_filter):
    import jinja2
    from ansible.plugins.filter.core import to_bool

    environment = jinja2.Environment()
    environment.filters["bool"] = to_bool
    sysctls = load_yaml(ROLES / "lvs_realserver" / "vars" / "main.yml")["lvs_realserver_sysctls"]
    rendered = environment.from_string(sysctls).render(
        lvs_realserver_loose_rp_filter=value, lvs_realserver_arp_ignore=1, lvs_realserver_arp_announce=2,
        lvs_realserver_sysctl_interface="eth0")
    assert ("net.ipv4.conf.all.rp_filter" in rendered) is rp_filter


def test_the_preflight_passes_the_booleans_and_the_ipv6_switches_to_the_checks():
    preflight = tasks("lvs_realserver", "tasks/preflight.yml")
    read = by_name(preflight, "Read whether IPv6 is on for lo (a v6 VIP needs it; sysctl -e prints nothing when the "
                              "kernel has no IPv6)")
    assert read["ansible.builtin.command"]["argv"] == [
        "sysctl", "-e", "net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.lo.disable_ipv6"]
    assert read["check_mode"] is False
    find = by_name(preflight, "Find mistakes in this real server's settings")
    settings = find["vars"]["lvs_realserver_settings"]
    assert settings["ipv6_sysctls"] == "{{ lvs_realserver_ipv6_switches.stdout }}"
    assert settings["loose_rp_filter"] == "{{ lvs_realserver_loose_rp_filter }}"
