"""Issue 18: what the LVS roles' task files do, read from the files (the behaviour itself runs in the molecule
scenarios lvs-netns and lvs-uml)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import jinja2
import pytest
from lvs_role_files import ROLES, load_yaml

from ansible_collections.hpc.balance.plugins.filter.lvs_realserver import IPV6_SWITCHES

WRITE_STEP = "Write keepalived.conf and the director's other files (every changed file staged before any is replaced)"
AFTER_STEP = ("Reload keepalived if keepalived.conf changed, then check it runs and this intended master holds its "
              "VIPs")


def tasks(role, name):
    return load_yaml(ROLES / role / name)


def by_name(entries, name):
    (entry,) = [entry for entry in entries if entry["name"] == name]
    return entry


def test_the_port_check_waits_on_the_address_keepalived_checks_and_says_so():  # 11
    task = load_yaml(ROLES / "lvs_realserver" / "tasks" / "check_ports.yml")[0]
    # Every VIP and the own address, times the ports, less the pairs a socket listened on when the preflight read.
    assert " ".join(task["loop"].split()) == (
        "{{ (lvs_realserver_vip_cidrs + [lvs_realserver_own_address]) | product(lvs_realserver_check_ports) | list "
        "| hpc.balance.lvs_realserver_ports_to_wait(lvs_realserver_host_reads.reads.listening.stdout_lines "
        "if lvs_realserver_host_reads.reads.listening.rc == 0 else []) }}")
    message = " ".join(task["ansible.builtin.wait_for"]["msg"].split())
    assert "or the VIP" not in message
    assert message.endswith(
        "clients connect to the VIP and the directors' health checks to this host's own address "
        "({{ lvs_realserver_own_address }}), so start the service on this port listening on 0.0.0.0 (or on both "
        "addresses)"
    )


def test_a_reload_that_an_earlier_run_left_pending_is_notified_again():  # 4
    # The preflight reads the marker with the rest of the host's state, before any change.
    read = by_name(tasks("lvs_director", "tasks/preflight.yml"),
                   "Read in one step what this director's checks and changes decide from")
    assert read["register"] == "lvs_director_host_reads"
    assert "'reload_marker': ['test', '-e', lvs_director_reload_marker_path]" in " ".join(
        load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_read_commands"].split())
    config = tasks("lvs_director", "tasks/config.yml")
    write = by_name(config, WRITE_STEP)
    files = " ".join(write["hpc.balance.file_set"]["files"].split())
    # Issue 28, defect 18: each marker is written in the same step as the files it is about and before them, so a run
    # stopped by a peer after that step still leaves the reload (or restart) due.
    order = ["lvs_director_reload_marker if lvs_director_write_config and lvs_director_was_running",
             "lvs_director_restart_marker if not lvs_director_restart_files_current and lvs_director_was_running",
             "'path': lvs_director_config_path", "+ lvs_director_other_files"]
    assert [files.index(part) for part in order] == sorted(files.index(part) for part in order)
    assert write["vars"]["lvs_director_write_config"] == "{{ not lvs_director_config_current }}"
    assert write["register"] == "lvs_director_files"
    reload = by_name(config, "Note that keepalived reloads, for a changed keepalived.conf or a reload an earlier run "
                             "left pending")
    assert config.index(reload) == config.index(write) + 1
    assert "notify" not in reload and reload["register"] == "lvs_director_config"
    assert " ".join(reload["when"].split()) == (
        "lvs_director_config_path in lvs_director_files.changed_paths or "
        "(lvs_director_host_reads.reads.reload_marker.rc == 0 and lvs_director_was_running)")
    # The reload and the marker's removal go in the step that checks keepalived runs after the reload or restart (see
    # the test of its script below), not in handlers of their own: two round trips fewer on each changing run.
    assert [h["name"] for h in tasks("lvs_director", "handlers/main.yml")] == [
        "Restart keepalived on one director at a time, backups first, the master last"]
    role_vars = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")
    assert " ".join(role_vars["lvs_director_reload_now"].split()) == (
        "{{ not ansible_check_mode and lvs_director_was_running and not lvs_director_restart_due "
        "and lvs_director_config is changed }}")
    # The command the service module ran for state=reloaded (ansible.builtin.service: `systemctl reload NAME` with
    # systemd; the init script's `reload` action otherwise), also used by the rolling restart's handover.
    assert role_vars["lvs_director_reload_commands"] == {
        "systemd": "systemctl reload keepalived", "sysv": "/etc/init.d/keepalived reload"}


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
    (restart,) = [step for step in steps if "block" in step]
    inner = [step["name"] for step in restart["block"]]
    # The holder of VIPs hands them over before anything stops, restarts with its priorities still lowered and takes
    # them back only once its IPVS table is loaded; a failed step never leaves the lowered file behind. The next
    # director goes only once this one is BACKUP or MASTER (issue 28, defect 10).
    assert inner[0] == ("Hand this director's VIPs to a backup first, when it holds any "
                        "(priorities lowered through a reload)")
    assert inner[-1] == ("Once this director's checker has loaded the IPVS table, give it its own priorities back "
                         "(a reload)")
    assert [step["name"] for step in restart["always"]] == [
        "Give this director its own keepalived.conf back if a step above failed with its priorities lowered"]
    names = [step["name"] for step in steps]
    # A restart is forgotten only once this director passed its checks: a roll that stopped earlier leaves the
    # marker, and the next run restarts it.
    assert names[-3:] == [
        "Wait until keepalived runs again here and, on the intended master, holds its VIPs",
        "Wait until every VRRP instance here is BACKUP or MASTER, never FAULT, before the next director goes",
        "Forget this director's pending restart (done, and its checks passed)"]
    assert steps[-1]["ansible.builtin.file"] == {"path": "{{ lvs_director_restart_marker_path }}", "state": "absent"}
    order = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_restart_order"]
    assert "sort(attribute='lvs_director_restart_rank')" in order
    note = by_name(tasks("lvs_director", "tasks/config.yml"),
                   "Note whether this director's keepalived must restart, and its place in the rolling restart")
    assert note["ansible.builtin.set_fact"]["lvs_director_restart_rank"].split() == [
        "{{", "(2000", "if", "lvs_director_vips_held_at_start", "|", "length", ">", "0", "else", "0)", "+",
        "(1000", "if", "lvs_director_master_vips", "|", "length", ">", "0", "else", "0)", "+",
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
    # One read for every path (test_lvs_director_script_read.py runs it: it follows links as os.stat does).
    assert look["hpc.balance.read_commands"]["commands"] == {
        "stat": "{{ lvs_director_script_lookups | hpc.balance.lvs_director_script_stat_command }}"}
    assert look["vars"]["lvs_director_script_lookups"] == (
        "{{ lvs_director_resolved | hpc.balance.lvs_director_script_lookups }}")
    assert "loop" not in look


ADD_VIPS = "Put the missing VIPs on lo (IPv6 with nodad, since lo has no neighbours to detect a duplicate)"
REMOVE_VIPS = "Remove VIPs this role put on lo that are no longer listed"


def test_check_mode_reports_a_vip_missing_on_lo_as_changed_without_adding_it():
    """command runs nothing in check mode; given `removes` it reports changed there instead of skipped."""
    vips = tasks("lvs_realserver", "tasks/vips.yml")
    add = by_name(vips, ADD_VIPS)
    assert add["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/lo"
    assert add["changed_when"] is True
    assert "check_mode" not in add
    assert add["ansible.builtin.command"]["argv"] == ["ip", "-batch", "-"]
    assert add["when"] == "lvs_realserver_vip_plan.add | length > 0"
    plan = by_name(vips, "Work out which VIPs lo lacks and which it holds that are no longer listed")
    assert vips.index(plan) < vips.index(add)


def test_the_lo_plan_comes_from_the_preflights_read_of_every_address():
    """lo is read once, by the preflight's one read (hpc.balance.read_commands runs in check mode too, so check mode
    plans from the live state)."""
    preflight = tasks("lvs_realserver", "tasks/preflight.yml")
    read = by_name(preflight, "Read in one step what this real server's checks and changes decide from")
    assert read["hpc.balance.read_commands"]["commands"] == "{{ lvs_realserver_read_commands }}"
    role_vars = load_yaml(ROLES / "lvs_realserver" / "vars" / "main.yml")
    assert role_vars["lvs_realserver_read_commands"]["addresses"] == ["ip", "-j", "addr", "show"]
    keep = by_name(preflight, "Keep the addresses and the kernel settings as read")
    assert keep["ansible.builtin.set_fact"]["lvs_realserver_all_addresses"] == (
        "{{ lvs_realserver_host_reads.reads.addresses }}")
    plan = by_name(tasks("lvs_realserver", "tasks/vips.yml"),
                   "Work out which VIPs lo lacks and which it holds that are no longer listed")
    assert "lvs_realserver_all_addresses.stdout | from_json | selectattr('ifname', 'equalto', 'lo')" in (
        plan["ansible.builtin.set_fact"]["lvs_realserver_vip_plan"])


def test_check_mode_reports_a_vip_no_longer_listed_as_changed_without_removing_it():
    remove = by_name(tasks("lvs_realserver", "tasks/remove_vips.yml"), REMOVE_VIPS)
    assert remove["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/lo"
    assert remove["changed_when"] is True


def test_lvs_yml_takes_a_removed_vip_off_the_real_servers_only_after_the_directors():  # issue 28, defect 16
    """A VIP the directors still forward must stay on the real servers' lo until the directors' play has run."""
    plays = load_yaml(ROLES.parent / "playbooks" / "lvs.yml")
    names = [play["name"] for play in plays]
    real, directors = names.index("Network layer - real servers"), names.index("Network layer - directors")
    removal = names.index("Network layer - real servers drop the VIPs no director forwards any more")
    assert real < directors < removal
    assert plays[real]["roles"][0]["lvs_realserver_defer_vip_removal"] is True
    include = plays[removal]["tasks"][0]["ansible.builtin.include_role"]
    assert include == {"name": "hpc.balance.lvs_realserver", "tasks_from": "remove_vips"}
    vips = tasks("lvs_realserver", "tasks/vips.yml")
    deferred = [task for task in vips if task.get("ansible.builtin.import_tasks") == "remove_vips.yml"]
    assert deferred[0]["when"] == "not lvs_realserver_defer_vip_removal | bool"


def test_check_mode_reports_a_pending_arp_setting_as_changed_without_applying_it():
    apply = by_name(tasks("lvs_realserver", "tasks/sysctl.yml"), "Apply the ARP settings that differ now")
    assert apply["ansible.builtin.command"]["removes"] == "/proc/sys/net/ipv4/conf/all"


def _render_vip_add_batch(add):
    import jinja2

    loader = jinja2.FileSystemLoader(str(ROLES / "lvs_realserver" / "templates"))
    # trim_blocks as Ansible's template lookup sets it by default.
    template = jinja2.Environment(loader=loader, trim_blocks=True).get_template("vip_add.batch.j2")
    return template.render(lvs_realserver_vip_plan={"add": add}, lvs_realserver_vip_label="lo:lvs")


def test_each_missing_vip_is_one_batch_line_with_the_options_of_its_family():
    # ip(8) -batch: one command per line, without the leading "ip"; IPv4 with the role's label, IPv6 with nodad.
    assert _render_vip_add_batch(["198.18.0.100/32", "fd00::100/128"]).splitlines() == [
        "address add 198.18.0.100/32 dev lo label lo:lvs",
        "address add fd00::100/128 dev lo nodad",
    ]


def test_ip_batch_adds_the_vips_on_a_real_lo(tmp_path):
    """The rendered batch, run by ip in a network namespace of its own (skipped where that cannot be made)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip")
    batch = _render_vip_add_batch(["198.18.0.100/32", "fd00::100/128"])
    script = "ip link set lo up && ip -batch - && ip -j addr show dev lo && ip -batch - <<< \"$0\"; echo rc=$?"
    completed = subprocess.run(["unshare", "--net", "bash", "-c", script, batch], input=batch, capture_output=True,
                               text=True, timeout=30, check=False)
    assert completed.returncode == 0, completed.stderr
    shown = json.loads(completed.stdout.splitlines()[0])
    addresses = {(info["local"], info.get("label")) for info in shown[0]["addr_info"]}
    assert ("198.18.0.100", "lo:lvs") in addresses
    assert ("fd00::100", None) in addresses
    # Adding the same VIP again fails (rc 1): the plan must only list what lo lacks.
    assert completed.stdout.strip().endswith("rc=1")


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
    role_vars = load_yaml(ROLES / "lvs_realserver" / "vars" / "main.yml")
    assert role_vars["lvs_realserver_read_commands"]["sysctls"] == (
        "{{ ['sysctl', '-e'] + lvs_realserver_ipv6_switch_keys + lvs_realserver_sysctls.keys() | list }}")
    keep = by_name(preflight, "Keep the addresses and the kernel settings as read")
    assert keep["ansible.builtin.set_fact"]["lvs_realserver_sysctl_now"] == (
        "{{ lvs_realserver_host_reads.reads.sysctls }}")
    assert role_vars["lvs_realserver_ipv6_switch_keys"] == [
        "net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.lo.disable_ipv6"]
    # The role reads the keys the filter judges: the two lists are one list, written twice (YAML for the task's
    # argv, Python for the checks).
    assert role_vars["lvs_realserver_ipv6_switch_keys"] == list(IPV6_SWITCHES)
    find = by_name(preflight, "Find mistakes in this real server's settings")
    settings = find["vars"]["lvs_realserver_settings"]
    assert settings["ipv6_sysctls"] == "{{ lvs_realserver_sysctl_now.stdout }}"
    assert settings["loose_rp_filter"] == "{{ lvs_realserver_loose_rp_filter }}"


def test_the_writing_steps_the_preflight_scenario_watches_are_tasks_of_the_roles():
    """lvs-netns's verify_preflight.yml fails a bad run that reached any of these steps: a name that no task has would
    make that check pass whatever ran."""
    verify = load_yaml(ROLES.parent / "extensions" / "molecule" / "lvs-netns" / "verify_preflight.yml")
    (check,) = [task for play in verify for task in play.get("tasks", [])
                if "lvs_verify_writing_tasks" in task.get("vars", {})]
    names = {task["name"] for role in ("lvs_director", "lvs_realserver")
             for path in (ROLES / role / "tasks").glob("*.yml") for task in load_yaml(path) or []}
    assert set(check["vars"]["lvs_verify_writing_tasks"]) <= names


def test_keepalived_checks_this_runs_config_before_any_file_of_the_director_changes():  # issue 28, defect 15
    for entry in ("tasks/main.yml", "tasks/reconfigure.yml"):
        steps = [task.get("ansible.builtin.import_tasks") for task in tasks("lvs_director", entry)]
        assert steps.index("validate.yml") < steps.index("config.yml")
        if "sysctl.yml" in steps:
            assert steps.index("validate.yml") < min(steps.index("sysctl.yml"), steps.index("firewall.yml"))
    (check,) = tasks("lvs_director", "tasks/validate.yml")
    # One step: the render on stdin, into a private folder, checked and removed (issue 27: no template, no removal
    # step, three round trips fewer).
    test = check["block"][0]
    script = test["ansible.builtin.command"]["argv"][-1]
    assert "mktemp -d {{ lvs_director_check_folder }}" in script and "trap 'rm -rf -- \"$folder\"' EXIT" in script
    assert "--config-test --all-config --use-file \"$folder/keepalived.conf\"" in script
    assert test["ansible.builtin.command"]["stdin"] == "{{ lvs_director_config_render }}"
    assert load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_config_render"] == (
        "{{ lookup('ansible.builtin.template', 'keepalived.conf.j2') }}")
    assert test["no_log"] is True and test["check_mode"] is False
    assert load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")["lvs_director_check_folder"].startswith("/run/")


def test_the_preflight_runs_keepalived_t_where_it_is_installed_and_the_same_render_is_not_checked_twice():
    # Issue 28, must show 2: an input only keepalived refuses stops playbooks/lvs.yml in its first play (the
    # preflight), before the real servers' play changes anything; main.yml's check then skips that very render.
    last = tasks("lvs_director", "tasks/preflight.yml")[-1]
    assert last["ansible.builtin.include_tasks"] == "validate.yml"
    assert last["when"] == "lvs_director_host_reads.reads.packages.stdout_lines is contains('keepalived installed')"
    (check,) = tasks("lvs_director", "tasks/validate.yml")
    assert "lvs_director_config_checked_sha1 | default('') != lvs_director_config_sha1" in check["when"]
    assert check["block"][-1]["ansible.builtin.set_fact"] == {
        "lvs_director_config_checked_sha1": "{{ lvs_director_config_sha1 }}"}
    (stop,) = check["rescue"]
    assert "nothing was" in stop["ansible.builtin.fail"]["msg"]
    assert "stderr_lines" in stop["ansible.builtin.fail"]["msg"]


@pytest.mark.parametrize(("entry", "apply", "shown"), [
    ("tasks/sysctl.yml", "Apply the kernel settings that differ now",
     "Show the kernel settings a run would apply now (check mode)"),
    ("tasks/firewall.yml", "Load the director's table now (replaces this table only)",
     "Show that a run would load the director's table now (check mode)"),
])
def test_check_mode_shows_the_kernel_settings_and_the_firewall_load_as_changes(entry, apply, shown):
    # Issue 28, defect 20: a command has no dry run, so check mode skipped these and --check showed nothing to do.
    steps = [task for entry_task in tasks("lvs_director", entry) for task in entry_task.get("block", [entry_task])]
    (run,) = [task for task in steps if task["name"] == apply]
    (show,) = [task for task in steps if task["name"] == shown]
    assert "not ansible_check_mode" in run["when"]
    assert "ansible_check_mode" in show["when"] and show["changed_when"] is True
    assert [condition for condition in run["when"] if condition != "not ansible_check_mode"] == [
        condition for condition in show["when"] if condition != "ansible_check_mode"]


def test_the_folders_of_deployed_scripts_are_created_before_the_scripts_and_never_changed_when_they_exist():
    # Issue 28, defect 17: a deployed script's folder was not created, so installing it failed where it was missing.
    steps = tasks("lvs_director", "tasks/config.yml")
    names = [step["name"] for step in steps]
    create = steps[names.index("Create the missing folders of the scripts the role deploys (root-owned, 0755)")]
    assert names.index(create["name"]) < names.index(
        "Install the scripts keepalived runs (root-owned, so its script security keeps them)")
    assert create["ansible.builtin.command"]["argv"] == ["mkdir", "-p", "-m", "0755", "--", "{{ item }}"]
    assert create["ansible.builtin.command"]["creates"] == "{{ item }}"


def test_a_rerun_pays_no_round_trip_per_script_folder_or_marker():
    # Issue 27: on a rerun every looped copy or stat is one more round trip per item to each director.
    steps = tasks("lvs_director", "tasks/config.yml")
    create = by_name(steps, "Create the missing folders of the scripts the role deploys (root-owned, 0755)")
    # Only the folders the preflight's read did not find are created: none on a rerun.
    assert "reject('in', lvs_director_resolved.script_stats" in create["loop"]
    write = by_name(steps, WRITE_STEP)
    # The scripts given as text, both markers, keepalived.conf and the other files: one round trip, however many.
    assert "loop" not in write
    assert "lvs_director_script_files | rejectattr('src', 'defined')" in write["hpc.balance.file_set"]["files"]
    for name in ("lvs_director_reload_marker", "lvs_director_restart_marker"):
        (marker,) = write["vars"][name]
        assert marker["owner"] == "root" and marker["mode"] == "0644"


def test_the_write_step_writes_only_the_render_keepalived_t_accepted_and_checks_it_once():
    # Issue 27: keepalived -t ran twice on a changing run (once before any change, once in the write's validate),
    # and its command was spelled twice. tasks/validate.yml checks the render before any file changes; the write
    # step only asserts (on the controller) that it writes that very render, and masks the file in its result when it
    # holds an auth_pass (diff false), as the template module's diff: false kept it out of the diff.
    config = tasks("lvs_director", "tasks/config.yml")
    write = by_name(config, WRITE_STEP)
    spec = " ".join(write["hpc.balance.file_set"]["files"].split())
    assert "validate" not in spec and "'mode': '0640'" in spec
    assert "'diff': lvs_director_resolved.vrrp_instances | selectattr('auth_pass', 'string')" in spec
    check = config[config.index(write) - 1]
    assert check["ansible.builtin.assert"]["that"] == (
        "lvs_director_config_checked_sha1 | default('') == lvs_director_config_sha1")
    assert check["when"] == "not lvs_director_config_current and not ansible_check_mode"
    text = " ".join(str(tasks("lvs_director", "tasks/" + name)) for name in ("config.yml", "service.yml", "state.yml"))
    assert "--config-test" not in text
    (validate,) = tasks("lvs_director", "tasks/validate.yml")[0]["block"][:1]
    assert "--config-test --all-config --use-file" in validate["ansible.builtin.command"]["argv"][2]
    assert "test -s" in validate["ansible.builtin.command"]["argv"][2]


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2's ip")
@pytest.mark.parametrize(("running", "reload"), [(True, ""), (True, "true"), (False, ""), (True, "false")])
def test_one_step_after_a_reload_reloads_reads_keepalived_forgets_the_marker_and_waits_for_the_vips(
        tmp_path, running, reload):
    # Issue 27: the reload, the process read, the marker's removal and the VIP wait were four steps (the wait one more
    # round trip per poll); now one command. Run here against this host's real `ip -o addr show`: 127.0.0.1/8 is on
    # lo, 198.18.0.250/32 (the lab's prefix, never configured outside the lab) is on no interface here. `true` and
    # `false` stand in for a reload command that works and one that fails.
    step = by_name(tasks("lvs_director", "tasks/service.yml"), AFTER_STEP)
    assert step["register"] == "lvs_director_pids_after"
    argv = step["ansible.builtin.command"]["argv"]
    assert "lvs_director_reload_marker_path if lvs_director_service_touched else ''" in argv
    assert "(lvs_director_reload_commands[lvs_director_init] if lvs_director_reload_now else '')" in argv
    assert step["changed_when"] == "lvs_director_reload_now and lvs_director_pids_after.rc != 2"
    script = jinja2.Template(step["vars"]["lvs_director_after_script"]).render(
        lvs_director_running_pids="echo 4242" if running else "echo; false")
    marker = tmp_path / "reload-pending"
    marker.write_text("pending\n")
    outcome = subprocess.run(["/bin/sh", "-c", script, "sh", reload, "0", "3", "0.05", str(marker), "127.0.0.1/8",
                              "198.18.0.250/32"], capture_output=True, text=True, timeout=30, check=False)
    if reload == "false":
        # The reload failed: exit 2, named on stderr, nothing read, and the reload stays due.
        assert outcome.returncode == 2 and outcome.stdout == ""
        assert "false failed (exit 1)" in outcome.stderr
        assert marker.exists()
        return
    if not running:
        # keepalived is not running: the check fails on rc, and the reload stays due.
        assert outcome.returncode == 1
        assert marker.exists()
        return
    assert outcome.returncode == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert lines[0] == "4242" and not marker.exists()
    # What vars/main.yml's lvs_director_missing_vips reads from this output (the same regex): the held VIP is found,
    # the other is missing after the polls ran out.
    held = re.findall(r"inet6? (\S+)", outcome.stdout)
    assert "127.0.0.1/8" in held and "198.18.0.250/32" not in held
    role_vars = load_yaml(ROLES / "lvs_director" / "vars" / "main.yml")
    missing_vips = " ".join(role_vars["lvs_director_missing_vips"].split())
    assert "lvs_director_pids_after.stdout | default('') | regex_findall('inet6? (\\S+)')" in missing_vips
