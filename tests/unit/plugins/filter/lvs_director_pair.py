"""The correct pair of directors the lvs_director filter tests start from: dir1 MASTER (priority 150), dir2 BACKUP
(100), one VRRP instance (VRID 51) moving the VIP, one virtual server on port 80 with two real servers. A test changes
one thing and expects exactly the finding that one change causes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

VIP = "198.18.0.100"
VIP6 = "2001:db8::100"
REAL_SERVERS = ("198.18.0.21", "198.18.0.22")
# The keepalived whose --config-test the oracle tests ask (Debian 12's 2.2.7 here); None where it is absent.
KEEPALIVED = shutil.which("keepalived") or shutil.which("keepalived", path="/usr/sbin:/sbin")


def pair_settings(host: str, **overrides: Any) -> dict[str, Any]:
    """Role variables of ``host`` (dir1 or dir2) in the correct pair, with ``overrides`` on top."""
    base = {
        "host": host,
        "interface": "eth0",
        "state": "MASTER" if host == "dir1" else "BACKUP",
        "priority": 150 if host == "dir1" else 100,
        "vrrp_instances": [{"name": "VI_LVS", "virtual_router_id": 51, "virtual_ipaddresses": [VIP]}],
        "virtual_servers": [{"address": VIP, "port": 80,
                             "real_servers": [{"address": address} for address in REAL_SERVERS]}],
        "vrrp_only": True,
        "own_addresses": ["198.18.0.11" if host == "dir1" else "198.18.0.12"],
        "known_interfaces": ["eth0", "lo"],
    }
    base.update(overrides)
    return base


def weighted_service(**fields: Any) -> list[dict[str, Any]]:
    """The pair's virtual server with urs1 at weight 3 and urs2 at the default 1 (a wrr 3:1 pool)."""
    return [{"address": VIP, "port": 80,
             "real_servers": [{"address": REAL_SERVERS[0], "weight": 3}, {"address": REAL_SERVERS[1]}], **fields}]


def script_read(entries: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], list[str]]:
    """What the preflight's one read of the scripts' paths returns (lvs_director_script_stat_command's output, as
    read_commands registers it) for ``entries`` [(path, {"exists", "isreg", "executable", "uid", "gid", "mode"})],
    and the paths it was given. A missing path prints no line."""
    lines = []
    for path, fields in entries:
        if not fields.get("exists", True):
            continue
        kind = 0o100000 if fields.get("isreg", False) else 0o040000
        mode = int(str(fields.get("mode", "0755")), 8)
        lines.append(f"{'x' if fields.get('executable', True) else '-'} {kind | mode:x} {fields.get('uid', 0)} "
                     f"{fields.get('gid', 0)} {path}")
    return {"rc": 0, "stdout": "\n".join(lines)}, [path for path, _fields in entries]


def pair_errors(**both: Any) -> list[str]:
    """The preflight's error messages for the pair, with ``both`` on top of each director's settings."""
    # Imported here: the collection loader is in place only once pytest-ansible has configured the session.
    from ansible_collections.hpc.balance.plugins.filter.lvs_director import lvs_director_problems, lvs_director_resolve

    found = lvs_director_problems([lvs_director_resolve(pair_settings(host, **both)) for host in ("dir1", "dir2")])
    return [entry["message"] for entry in found["errors"]]


def keepalived_pair_test(folder: Path, tracked_block: str, instance_track: str, sync_group: bool = False,
                         priority: int = 100) -> subprocess.CompletedProcess:
    """keepalived --config-test (KEEPALIVED) on ``tracked_block`` (a track_file or vrrp_track_process block) tracked by
    VI_4 (``instance_track``, its block in the instance, priority ``priority``), with VI_6 beside it, in a sync group
    with it or not: the smallest config that shows each rule the track checks rest on."""
    instance = ("vrrp_instance {name} {{\n    state BACKUP\n    interface eth0\n    virtual_router_id 51\n"
                "    priority {priority}\n    unicast_peer {{\n        {peer}\n    }}\n    virtual_ipaddress {{\n"
                "        {vip}\n    }}\n{track}}}\n")
    text = tracked_block
    text += instance.format(name="VI_4", priority=priority, peer="198.18.0.12", vip=VIP, track=instance_track)
    text += instance.format(name="VI_6", priority=100, peer="2001:db8::12", vip=VIP6, track="")
    if sync_group:
        text += "vrrp_sync_group G_LVS {\n    group {\n        VI_4\n        VI_6\n    }\n}\n"
    config = folder / "keepalived.conf"
    config.write_text(text)
    return subprocess.run([KEEPALIVED, "--config-test", "--all-config", "--use-file", str(config)],
                          capture_output=True, text=True, timeout=30, check=False)
