"""What a director's firewall must let in, and whether the running nftables ruleset does.

A director needs three flows in: VRRP adverts from its peers (IP protocol 112, IPv6 next header 112; without them
every director becomes MASTER), clients' packets to each virtual service (protocol and port to the VIP), and, with
``lvs_director_sync_daemon``, the IPVS sync daemon's UDP datagrams (port 8848, group 224.0.0.81 by default).

``lvs_director_firewall_rules`` turns a resolved config (``lvs_director_resolve``) into the accept rules of the role's
own nftables table; ``lvs_director_firewall_findings`` reads ``nft -j list ruleset`` and names every input chain that
would drop one of the flows; ``lvs_director_sync_daemon_problems`` checks ``lvs_director_sync_daemon``.

NOTE: an accept ends the evaluation of one base chain only. nftables runs every base chain on the input hook, in
priority order, and a drop in any of them is final (nft(8), "accept"): the role's table cannot open what another
table drops, so the findings look at every table but the role's own, whatever lvs_director_firewall says.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from ansible.errors import AnsibleFilterError

ROLE_TABLE = "hpc_balance_lvs"
VRRP_PROTOCOL = 112
# keepalived.conf(5) of keepalived 2.2.7, lvs_sync_daemon: "port ... default 8848", "group ... default 224.0.0.81".
SYNC_DEFAULT_PORT = 8848
SYNC_DEFAULT_GROUP = "224.0.0.81"
# keepalived 2.2.7 global_parser.c (lvs_sync_daemon): syncid 0-255, maxlen 1..65535-20-8, port 1..65535, ttl 1..255.
SYNC_RANGES = {"sync_id": (0, 255), "maxlen_bytes": (1, 65507), "port": (1, 65535), "ttl": (1, 255)}
SYNC_KEYS = ("interface", "instance", "sync_id", "maxlen_bytes", "port", "ttl", "group")
# The families whose input hook sees a packet of an IPv4 or IPv6 flow.
CHAIN_FAMILIES = {"ip": ("ip", "inet"), "ip6": ("ip6", "inet")}
FIREWALL_CHOICES = ("none", "nftables")


def _family(address: str) -> str:
    return "ip6" if ipaddress.ip_interface(str(address)).version == 6 else "ip"


def _instance_families(instance: dict) -> list[str]:
    addresses = list(instance.get("virtual_ipaddresses") or []) + list(instance.get("unicast_peers") or [])
    return sorted({_family(address) for address in addresses}) or ["ip"]


def sync_daemon_settings(sync_daemon: dict | None) -> dict | None:
    """lvs_director_sync_daemon with keepalived's defaults for port and group filled in; None when it is off."""
    if not sync_daemon:
        return None
    settings = {key: sync_daemon.get(key) for key in SYNC_KEYS}
    settings["port"] = SYNC_DEFAULT_PORT if settings["port"] is None else settings["port"]
    settings["group"] = SYNC_DEFAULT_GROUP if settings["group"] in (None, "") else str(settings["group"])
    return settings


# ---------------------------------------------------------------- the flows a director needs
def _needs(config: dict, sync_daemon: dict | None) -> list[dict]:
    """Each flow: {kind, family, protocol, port, address, interface, peers, what}."""
    needs = []
    for instance in config.get("vrrp_instances") or []:
        for family in _instance_families(instance):
            peers = [peer for peer in instance.get("unicast_peers") or [] if _family(peer) == family]
            needs.append({"kind": "vrrp", "family": family, "protocol": VRRP_PROTOCOL, "port": None,
                          "address": None, "interface": instance.get("interface"), "peers": peers,
                          "what": f"VRRP (IP protocol {VRRP_PROTOCOL}) of instance {instance.get('name')}"})
    seen = set()
    for server in config.get("virtual_servers") or []:
        key = (str(server["address"]), str(server.get("protocol", "TCP")).lower(), int(server["port"]))
        if key not in seen:
            seen.add(key)
            needs.append({"kind": "service", "family": _family(key[0]), "protocol": key[1], "port": key[2],
                          "address": key[0], "interface": None, "peers": [],
                          "what": f"{key[1]} port {key[2]} of virtual server {key[0]}:{key[2]}"})
    settings = sync_daemon_settings(sync_daemon)
    if settings:
        needs.append({"kind": "sync", "family": _family(settings["group"]), "protocol": "udp",
                      "port": int(settings["port"]), "address": settings["group"],
                      "interface": settings["interface"], "peers": [],
                      "what": f"udp port {settings['port']} of the IPVS sync daemon (group {settings['group']})"})
    return needs


def _rule_text(need: dict) -> str:
    family = need["family"]
    if need["kind"] == "vrrp":
        source = (f"{family} saddr {{ {', '.join(need['peers'])} }} " if need["peers"]
                  else f'iifname "{need["interface"]}" ')
        # meta l4proto finds 112 behind IPv6 extension headers too, where ip6 nexthdr would not.
        return f"{source}meta nfproto {'ipv6' if family == 'ip6' else 'ipv4'} meta l4proto {VRRP_PROTOCOL}"
    interface = f'iifname "{need["interface"]}" ' if need["interface"] else ""
    return f"{interface}{family} daddr {need['address']} {need['protocol']} dport {need['port']}"


def lvs_director_firewall_rules(config: dict, sync_daemon: dict | None = None) -> list[dict]:
    """The accept rules of the role's nftables table: [{"rule": "nft match", "comment": "why"}], one per flow."""
    if not isinstance(config, dict):
        raise AnsibleFilterError(f"lvs_director_firewall_rules: expects a resolved director config, got {config!r}")
    return [{"rule": _rule_text(need), "comment": need["what"]} for need in _needs(config, sync_daemon)]


# ---------------------------------------------------------------- reading nft -j list ruleset
def _ruleset(ruleset: Any) -> list[dict]:
    """The objects of `nft -j list ruleset` (text or parsed); [] for no output (nft absent, not root)."""
    if isinstance(ruleset, str):
        if not ruleset.strip():
            return []
        try:
            ruleset = json.loads(ruleset)
        except ValueError:
            raise AnsibleFilterError("lvs_director_firewall_findings: the ruleset is not the JSON of "
                                     f"`nft -j list ruleset`: {ruleset[:80]!r}") from None
    return list((ruleset or {}).get("nftables") or [])


def _matches(expressions: list[dict]) -> list[tuple[str, Any]]:
    """(what, right side) of each match: 'l4proto' for ip protocol / ip6 nexthdr / meta l4proto, 'tcp dport' ..."""
    found = []
    for expression in expressions:
        match = expression.get("match")
        if not match or match.get("op") not in ("==", "in"):
            continue
        left = match.get("left") or {}
        if left.get("meta", {}).get("key") == "l4proto" or (left.get("payload") or {}).get("field") in (
                "protocol", "nexthdr"):
            found.append(("l4proto", match.get("right")))
        elif (left.get("payload") or {}).get("field") == "dport":
            found.append((f"{left['payload'].get('protocol')} dport", match.get("right")))
    return found


def _contains(right: Any, value: Any) -> bool:
    """Whether a match's right side (value, set, range, protocol name) holds value."""
    if isinstance(right, dict) and "set" in right:
        return any(_contains(item, value) for item in right["set"])
    if isinstance(right, dict) and "range" in right:
        low, high = right["range"]
        return isinstance(value, int) and isinstance(low, int) and low <= value <= high
    if isinstance(right, list):
        return any(_contains(item, value) for item in right)
    names = {VRRP_PROTOCOL: "vrrp"}
    return right == value or (value in names and right == names[value])


def _rule_accepts(expressions: list[dict], need: dict) -> bool:
    """A rule accepts a flow when it has no match at all, or names the flow's protocol (and port); other matches
    (addresses, interfaces, ct state) are not weighed."""
    if not any("match" in expression for expression in expressions):
        return True
    matches = _matches(expressions)
    if need["kind"] == "vrrp":
        return any(what == "l4proto" and _contains(right, VRRP_PROTOCOL) for what, right in matches)
    return any(what in (f"{need['protocol']} dport", "th dport") and _contains(right, need["port"])
               for what, right in matches)


def _chain_accepts(rules: dict, key: tuple, need: dict, seen: set) -> bool | None:
    """True: a rule accepts the flow; False: an unconditional drop or reject comes first; None: neither."""
    if key in seen:
        return None
    seen.add(key)
    for expressions in rules.get(key, []):
        verdict = next((v for v in ("accept", "drop", "reject", "jump", "goto") if any(v in e for e in expressions)),
                       None)
        if verdict == "accept" and _rule_accepts(expressions, need):
            return True
        if verdict in ("drop", "reject") and not [e for e in expressions if "match" in e]:
            return False
        if verdict in ("jump", "goto"):
            target = next(e for e in expressions if verdict in e)[verdict]["target"]
            inner = _chain_accepts(rules, (key[0], key[1], target), need, seen)
            if inner is not None:
                return inner
    return None


def lvs_director_firewall_findings(ruleset: Any, config: dict, sync_daemon: dict | None = None,
                                   own_table: str = ROLE_TABLE) -> list[dict]:
    """Input chains of the running ruleset that would drop a flow the director needs.

    ruleset     -- stdout of ``nft -j list ruleset`` (text or parsed); empty when nft is absent
    config      -- the director's resolved config (lvs_director_resolve): host, vrrp_instances, virtual_servers
    sync_daemon -- lvs_director_sync_daemon (None: off)

    A chain counts when it hooks input in a family the flow passes (ip or inet for IPv4, ip6 or inet for IPv6) and
    drops by default: policy drop, or a rule that drops or rejects without a match. It lets a flow in when an accept
    rule before that point names the flow's protocol 112 (ip protocol, ip6 nexthdr, meta l4proto) or its port
    (tcp/udp/sctp/th dport: a value, a set or a range), or has no match at all; jumps are followed. Addresses and
    interfaces in the rule are not weighed. The role's own table is skipped: its chain never drops.
    Returns [{"hosts": [host], "message": ...}], one per chain and flow.
    """
    objects = _ruleset(ruleset)
    rules: dict[tuple, list] = {}
    for item in objects:
        if "rule" in item:
            rule = item["rule"]
            rules.setdefault((rule["family"], rule["table"], rule["chain"]), []).append(rule.get("expr") or [])
    chains = [item["chain"] for item in objects if "chain" in item and item["chain"].get("hook") == "input"
              and item["chain"].get("table") != own_table and item["chain"].get("family") in ("ip", "ip6", "inet")]
    host = str(config.get("host", ""))
    findings = []
    for chain in chains:
        key = (chain["family"], chain["table"], chain["name"])
        for need in _needs(config, sync_daemon):
            if chain["family"] not in CHAIN_FAMILIES[need["family"]]:
                continue
            verdict = _chain_accepts(rules, key, need, set())
            if verdict is True or (verdict is None and chain.get("policy") != "drop"):
                continue
            findings.append({"hosts": [host], "message": (
                f"{host}: nftables chain {' '.join(key)} (hook input, "
                f"{'policy drop' if verdict is None else 'ends in a drop or reject'}) has no rule that accepts "
                f"{need['what']}, so {_consequence(need)}. Add `{_rule_text(need)} accept` to that chain; "
                "an accept in another table (lvs_director_firewall: nftables included) does not stop this "
                "chain's drop")})
    return findings


def _consequence(need: dict) -> str:
    return {"vrrp": "this director does not hear its peers' adverts and becomes MASTER beside them",
            "service": "clients' packets to the VIP are dropped on this director",
            "sync": "a backup gets no connection entries and resets connections when it takes over"}[need["kind"]]


# ---------------------------------------------------------------- lvs_director_sync_daemon
def lvs_director_sync_daemon_problems(config: dict, sync_daemon: dict | None) -> list[str]:
    """Mistakes in lvs_director_sync_daemon, one sentence each ([] when it is off or right).

    keepalived only logs an unknown instance and runs without the sync daemon, and `keepalived -t` passes.
    """
    if not sync_daemon:
        return []
    host = str(config.get("host", ""))
    if not isinstance(sync_daemon, dict):
        return [f"{host}: lvs_director_sync_daemon must be a dict (interface, instance, ...) or null, "
                f"got {sync_daemon!r}"]
    problems = [f"{host}: lvs_director_sync_daemon.{key} is {sync_daemon[key]!r}; it is not an option "
                f"(use {', '.join(SYNC_KEYS)})" for key in sync_daemon if key not in SYNC_KEYS]
    names = [instance["name"] for instance in config.get("vrrp_instances") or []]
    instance = sync_daemon.get("instance")
    if instance not in names:
        problems.append(f"{host}: lvs_director_sync_daemon.instance is {instance!r}, but this director has no VRRP "
                        f"instance of that name ({', '.join(names) or 'none'}); keepalived would run without the "
                        "sync daemon. Name one of lvs_director_vrrp_instances")
    interface = sync_daemon.get("interface")
    known = config.get("known_interfaces")
    if not interface:
        problems.append(f"{host}: lvs_director_sync_daemon.interface is empty; set the NIC the directors share")
    elif known is not None and interface not in known:
        problems.append(f"{host}: lvs_director_sync_daemon.interface {interface!r} is not an interface of this "
                        f"host ({', '.join(sorted(known))})")
    for key, (low, high) in SYNC_RANGES.items():
        value = sync_daemon.get(key)
        if value is not None and (isinstance(value, bool) or not str(value).isdigit()
                                  or not low <= int(value) <= high):
            problems.append(f"{host}: lvs_director_sync_daemon.{key} is {value!r}; use a whole number {low}-{high}")
    group = sync_daemon.get("group")
    if group not in (None, ""):
        try:
            multicast = ipaddress.ip_address(str(group)).is_multicast
        except ValueError:
            multicast = False
        if not multicast:
            problems.append(f"{host}: lvs_director_sync_daemon.group {group!r} is not a multicast address; use one "
                            f"such as {SYNC_DEFAULT_GROUP} (the default)")
    if config.get("vrrp_only"):
        problems.append(f"{host}: lvs_director_sync_daemon needs IPVS, but lvs_director_vrrp_only is true; set "
                        "lvs_director_sync_daemon: null")
    return problems


class FilterModule:
    """Firewall and connection-sync helpers of the lvs_director role."""

    def filters(self):
        return {
            "lvs_director_firewall_rules": lvs_director_firewall_rules,
            "lvs_director_firewall_findings": lvs_director_firewall_findings,
            "lvs_director_sync_daemon_problems": lvs_director_sync_daemon_problems,
        }
