# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a director's firewall must let in, and whether the running nftables ruleset does.

A director needs three flows in: VRRP adverts from its peers (IP protocol 112, IPv6 next header 112; without them
every director becomes MASTER), clients' packets to each virtual service (protocol and port to the VIP), and, with
``lvs_director_sync_daemon``, the IPVS sync daemon's UDP datagrams (port 8848, group 224.0.0.81 by default).

``lvs_director_firewall_rules`` turns a resolved config (``lvs_director_resolve``) into the accept rules of the role's
own nftables table; ``lvs_director_firewall_findings`` reads ``nft -j list ruleset`` and names every input base chain
that drops (an error) or may drop (a warning) one of the flows; ``lvs_director_sync_daemon_problems`` checks one
director's ``lvs_director_sync_daemon`` and ``lvs_director_sync_daemon_peer_problems`` compares it across directors.

NOTE: an accept ends the evaluation of one base chain only. nftables runs every base chain on the input hook, in
priority order, and a drop in any of them is final (nft(8), "accept"): the role's table cannot open what another
table drops, so the findings judge every base chain of every table on its own, whatever lvs_director_firewall says.
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


# What the findings know of a flow's first packet, field by field (None: unknown). A flow that arrives from another
# host never comes in on the loopback interface: its input interface, when unknown, is NOT_LOOPBACK.
VRRP_GROUPS = {"ip": "224.0.0.18", "ip6": "ff02::12"}  # RFC 5798 section 5.1.1.2 / 5.1.2.2
NOT_LOOPBACK = "(not lo)"
L4_NUMBERS = {"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "dccp": 33, "gre": 47, "esp": 50, "ah": 51, "icmpv6": 58,
              "ipv6-icmp": 58, "ospf": 89, "vrrp": VRRP_PROTOCOL, "sctp": 132, "udplite": 136}
PORT_PROTOCOLS = ("tcp", "udp", "sctp", "dccp", "udplite")
ADDRESS_KEYS = ("saddr", "daddr")
VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return")
# Statements that let a rule act on some packets only (a rate, a quota, a connection count).
PARTIAL_STATEMENTS = ("limit", "quota", "ct count")


def _flow(need: dict) -> dict[str, Any]:
    """The fields of the flow's first packet that a rule may match on."""
    family = need["family"]
    if need["kind"] == "vrrp":
        multicast = not need["peers"]
        return {"family": family, "l4": "vrrp", "l4proto": [VRRP_PROTOCOL], "dport": [],
                "saddr": need["peers"] or None, "daddr": [VRRP_GROUPS[family]] if multicast else None,
                "iifname": [need["interface"]] if need["interface"] else NOT_LOOPBACK,
                "pkttype": ["multicast" if multicast else "host"], "fibtype": ["multicast" if multicast else "local"],
                "ctstate": ["new"]}
    multicast = need["kind"] == "sync"
    return {"family": family, "l4": need["protocol"], "l4proto": [L4_NUMBERS[need["protocol"]]],
            "dport": [need["port"]], "saddr": None, "daddr": [need["address"]],
            "iifname": [need["interface"]] if need["interface"] else NOT_LOOPBACK,
            "pkttype": ["multicast" if multicast else "host"], "fibtype": ["multicast" if multicast else "local"],
            "ctstate": ["new"]}


def _left(left: Any, flow: dict) -> tuple[str, Any]:
    """What a match's left side reads from the flow: ("values", [...]), ("unknown", None) or ("never", None) when
    the expression cannot apply to the flow at all (nft adds a dependency: `tcp dport` matches TCP only, `ip saddr`
    IPv4 only), whatever the operator."""
    if not isinstance(left, dict):
        return "unknown", None
    payload, meta = left.get("payload"), left.get("meta")
    if isinstance(payload, dict):
        protocol, field = payload.get("protocol"), payload.get("field")
        if protocol in ("ip", "ip6"):
            if protocol != flow["family"]:
                return "never", None
            key = {"protocol": "l4proto", "nexthdr": "l4proto", "saddr": "saddr", "daddr": "daddr"}.get(str(field))
        elif protocol == "th" or protocol in PORT_PROTOCOLS:
            if flow["l4"] not in PORT_PROTOCOLS or protocol not in ("th", flow["l4"]):
                return "never", None
            key = "dport" if field == "dport" else None
        elif protocol in L4_NUMBERS:  # icmp, icmpv6, ah, esp ... headers this flow does not carry
            return "never", None
        else:
            key = None
    elif isinstance(meta, dict):
        name = meta.get("key")
        if name == "nfproto":
            return "values", ["ipv4" if flow["family"] == "ip" else "ipv6"]
        if name == "protocol":  # the ethertype
            return "values", [flow["family"]]
        key = {"l4proto": "l4proto", "iifname": "iifname", "iif": "iifname", "pkttype": "pkttype"}.get(str(name))
    elif isinstance(left.get("ct"), dict) and left["ct"].get("key") == "state" and not left["ct"].get("dir"):
        key = "ctstate"
    elif isinstance(left.get("fib"), dict) and left["fib"].get("result") == "type" \
            and "daddr" in (left["fib"].get("flags") or []):
        key = "fibtype"
    else:
        key = None
    if key is None or flow.get(key) is None:
        return "unknown", None
    return "values", flow[key]


def _scalar(item: Any, value: Any) -> bool | None:
    """Whether one element of a match's right side (value, range, prefix) holds value; None: cannot tell."""
    if isinstance(item, dict):
        if "prefix" in item:
            try:
                return ipaddress.ip_address(str(value)) in ipaddress.ip_network(
                    f"{item['prefix']['addr']}/{item['prefix']['len']}", strict=False)
            except (KeyError, TypeError, ValueError):
                return None
        if "range" in item:
            low, high = item["range"]
            if isinstance(value, int) and isinstance(low, int) and isinstance(high, int):
                return low <= value <= high
            try:
                bounds = [ipaddress.ip_address(str(item)) for item in (low, value, high)]
            except ValueError:
                return None
            if len({address.version for address in bounds}) > 1:
                return None  # a range of the other family: Python cannot order IPv4 against IPv6
            return int(bounds[0]) <= int(bounds[1]) <= int(bounds[2])
        return None
    if isinstance(item, str) and item.startswith("@"):
        return None  # a named set: its elements are elsewhere in the ruleset
    if isinstance(value, int):
        number = L4_NUMBERS.get(item, item) if isinstance(item, str) else item
        return number == value if isinstance(number, int) else None
    try:
        return ipaddress.ip_address(str(item)) == ipaddress.ip_address(str(value))
    except ValueError:
        pass
    if isinstance(item, str) and item.endswith("*"):
        return str(value).startswith(item[:-1])
    return str(item).lower() == str(value).lower()


def _any(results: list[bool | None]) -> bool | None:
    return True if True in results else (None if None in results else False)


def _member(right: Any, value: Any) -> bool | None:
    """Whether a match's right side (value, anonymous set, range, prefix, named set) holds value."""
    if isinstance(right, dict) and "set" in right:
        return _member(right["set"], value)
    if isinstance(right, list):
        return _any([_member(item, value) for item in right])
    return _scalar(right, value)


def _only_loopback(right: Any) -> bool:
    items = right.get("set") if isinstance(right, dict) and "set" in right else right
    items = items if isinstance(items, list) else [items]
    return bool(items) and all(item == "lo" for item in items)


def _match_holds(match: dict, flow: dict, every: bool) -> bool | None:
    """Whether a match is true for every packet of the flow (every) or certainly for some of them; None: unknown."""
    kind, values = _left(match.get("left"), flow)
    op, right = match.get("op"), match.get("right")
    if kind == "never":
        return False
    if kind == "unknown" or op not in ("==", "in", "!="):
        return None
    if values == NOT_LOOPBACK:
        if not _only_loopback(right):
            return None
        return op == "!="
    if not values:
        return False
    results = [_member(right, value) for value in values]
    if op == "!=":
        results = [None if result is None else not result for result in results]
    if every:
        return True if all(result is True for result in results) else (False if False in results else None)
    return _any(results)


def _condition(expressions: list[dict], flow: dict, every: bool) -> bool | None:
    """A rule's matches together (all must hold): True, False or None (depends on what cannot be weighed)."""
    result: bool | None = True
    for expression in expressions:
        if "match" in expression:
            holds = _match_holds(expression["match"], flow, every)
        elif any(statement in expression for statement in PARTIAL_STATEMENTS):
            holds = None
        else:
            continue
        if holds is False:
            return False
        if holds is None:
            result = None
    return result


def _verdict(expressions: list[dict], flow: dict) -> tuple[str | None, str | None]:
    """(verdict, jump target) of a rule for the flow; a verdict map (vmap) is looked up with the flow's key. The
    verdict is "unknown" where the map's key cannot be read, None where the rule has none (counter, log ...)."""
    for expression in expressions:
        for verdict in VERDICTS:
            if verdict in expression:
                target = (expression[verdict] or {}).get("target") if verdict in ("jump", "goto") else None
                return verdict, target
        if "vmap" in expression:
            kind, values = _left(expression["vmap"].get("key"), flow)
            if kind == "never":
                return None, None
            if kind == "unknown" or values == NOT_LOOPBACK or len(values) != 1:
                return "unknown", None
            for element in (expression["vmap"].get("data") or {}).get("set") or []:
                found = _member(element[0], values[0])
                if found is None:
                    return "unknown", None
                if found:
                    return _verdict([element[1]], flow)
            return None, None
    return None, None


def _walk(rules: dict, key: tuple, flow: dict, path: frozenset) -> tuple[str | None, bool, tuple | None]:
    """Follow one chain for the flow: (verdict, maybe, where).

    verdict -- "accept", "drop" (drop or reject) or None when the flow falls through to the caller or the policy
    maybe   -- True when a rule before that point accepts or may accept the flow under a condition this check cannot
               weigh (source addresses, named sets, rates): the drop then is a warning, not an error
    where   -- (chain key, rule handle, "drop" or "reject") of the rule that drops
    """
    if key in path:
        return None, False, None
    maybe = False
    for rule in rules.get(key, []):
        expressions = rule.get("expr") or []
        verdict, target = _verdict(expressions, flow)
        some = _condition(expressions, flow, every=False)
        if verdict is None or some is False:
            continue
        every = _condition(expressions, flow, every=True)
        if verdict == "unknown":
            maybe = True
        elif verdict == "accept":
            if every:
                return "accept", maybe, None
            maybe = True
        elif verdict in ("drop", "reject"):
            if some:
                return "drop", maybe, (key, rule.get("handle"), verdict)
        elif verdict in ("jump", "goto"):
            inner, inner_maybe, where = _walk(rules, (key[0], key[1], target), flow, path | {key})
            maybe = maybe or inner_maybe
            if inner == "accept":
                if every:
                    return "accept", maybe, None
                maybe = True
            elif inner == "drop" and some:
                return "drop", maybe, where
            elif inner is None and verdict == "goto" and every:
                return None, maybe, None
        elif verdict == "return" and every:
            return None, maybe, None
    return None, maybe, None


# A drop of any of the three flows is an error that stops the preflight before any change: each is a flow the config
# asks for, and nothing shows the loss until it hurts. VRRP dropped: this director never hears its peers and holds the
# VIPs beside the master (two MASTERs, ARP flapping). A service port dropped: the director takes the VIP when it is
# MASTER and black-holes every client of that service. The sync daemon dropped: the operator turned it on so that a
# failover keeps connections, and every failover resets them all. What the check cannot prove - an accept before the
# drop that matches on a source address, a named set or a rate - stays a warning.
def lvs_director_firewall_findings(ruleset: Any, config: dict, sync_daemon: dict | None = None,
                                   own_table: str = ROLE_TABLE) -> list[dict]:
    """Input base chains of the running ruleset that drop, or may drop, a flow the director needs.

    ruleset     -- stdout of ``nft -j list ruleset`` (text or parsed); empty when nft is absent
    config      -- the director's resolved config (lvs_director_resolve): host, vrrp_instances, virtual_servers
    sync_daemon -- lvs_director_sync_daemon (None: off)
    own_table   -- the role's own table, named in the messages (judged like every other table: it never drops)

    nftables hands a packet to every base chain on the input hook, in every table of the families that see it (ip or
    inet for IPv4, ip6 or inet for IPv6), in priority order; an accept ends only the chain it is in, a drop ends the
    packet (nft(8), "accept", "drop"). So each base chain is judged on its own and the flow gets in only when none of
    them drops it. A chain drops a flow at its first rule that drops or rejects it (policy drop when none does), unless
    a rule before that accepts it; jumps, gotos and verdict maps are followed. A rule applies to the flow when each of
    its matches holds for the flow's first packet: protocol 112 (ip protocol, ip6 nexthdr, meta l4proto), the port
    (tcp/udp/sctp/th dport: value, set or range), the destination (VIP, 224.0.0.18 / ff02::12, the sync group:
    address or prefix), the unicast peers as source, the interface (iifname, iif), ct state new, meta pkttype and
    fib daddr type. A match this check cannot weigh (a named set, a source address of clients) makes an accept a
    "may accept" and leaves a drop aside.
    Returns [{"hosts": [host], "severity": "error" or "warning", "chain": "family table chain", "flow": what,
    "message": ...}], one per chain and flow.
    """
    objects = _ruleset(ruleset)
    rules: dict[tuple, list] = {}
    for item in objects:
        if "rule" in item:
            rule = item["rule"]
            rules.setdefault((rule["family"], rule["table"], rule["chain"]), []).append(rule)
    chains = [item["chain"] for item in objects if "chain" in item and item["chain"].get("hook") == "input"
              and item["chain"].get("family") in ("ip", "ip6", "inet")]
    host = str(config.get("host", ""))
    findings = []
    for chain in chains:
        key = (chain["family"], chain["table"], chain["name"])
        for need in _needs(config, sync_daemon):
            if chain["family"] not in CHAIN_FAMILIES[need["family"]]:
                continue
            verdict, maybe, where = _walk(rules, key, _flow(need), frozenset())
            if verdict == "accept" or (verdict is None and chain.get("policy") != "drop"):
                continue
            findings.append(_finding(host, chain, need, maybe, where, own_table))
    return findings


def _finding(host: str, chain: dict, need: dict, maybe: bool, where: tuple | None, own_table: str) -> dict:
    name = f"{chain['family']} {chain['table']} {chain['name']}"
    if where is None:
        how = "by its policy drop"
    else:
        (family, table, chain_name), handle, verb = where
        how = f"at its rule handle {handle} ({verb})" if chain_name == chain["name"] else (
            f"at rule handle {handle} ({verb}) of chain {family} {table} {chain_name}, which it jumps to")
    fix = (f"add `{_rule_text(need)} accept` to chain {name} before that point (`nft -a list chain {name}` shows the "
           "handles), or remove the drop")
    table_note = (f"an accept ends only its own base chain and every input base chain judges the packet on its own "
                  f"(nft(8)), so the role's own table inet {own_table} (lvs_director_firewall: nftables) cannot "
                  "override this chain's drop")
    if maybe:
        message = (f"{host}: nftables chain {name} (hook input, priority {chain.get('prio')}) may drop {need['what']} "
                   f"{how}: the rules before it that could accept that flow also match on something this check "
                   f"cannot weigh (a source address, a named set, a rate), and where they do not accept it, "
                   f"{_consequence(need)}. Make sure they let it in, or {fix}; {table_note}")
    else:
        message = (f"{host}: nftables chain {name} (hook input, priority {chain.get('prio')}) drops {need['what']} "
                   f"{how}, and no rule before that accepts it, so {_consequence(need)}. Fix: {fix}; {table_note}")
    return {"hosts": [host], "severity": "warning" if maybe else "error", "chain": name, "flow": need["what"],
            "message": message}


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


# ---------------------------------------------------------------- lvs_director_sync_daemon across directors
# What the master's and the backups' sync daemons must share, read from the kernel (net/netfilter/ipvs/ip_vs_sync.c):
# - sync id: ip_vs_process_message() drops a message whose syncid is not the backup's own (unless that is 0);
# - group and port: make_receive_sock() binds the backup to mcast_group:mcast_port + id and joins the group, and
#   make_send_sock() sends to the master's own; one thread, one port, per net.ipv4.vs.sync_ports (port + 0 .. n-1);
# - maxlen: sync_thread_backup() reads into a buffer of the backup's sync_maxlen, and ip_vs_process_message() drops
#   a datagram whose length is not its stated size, so a master's longer datagrams never arrive whole.
# keepalived adds one: the daemons follow one VRRP instance, the master daemon where it is MASTER and the backup
# daemon elsewhere; directors following different instances may all be masters and none a backup.
# Interface and ttl are each host's own (NIC names differ between hosts) and need not match.
SYNC_SYSCTL_PORTS = "net.ipv4.vs.sync_ports"
GROUP_VARS_FIX = "set one value in group_vars/lvs_directors"


def _sync_value(settings: dict, key: str) -> Any:
    value = settings.get(key)
    if key == "group":
        try:
            return str(ipaddress.ip_address(str(value)))
        except ValueError:
            return str(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def _vrid(config: dict | None, instance: Any) -> int | None:
    for item in (config or {}).get("vrrp_instances") or []:
        if item.get("name") == instance and item.get("virtual_router_id") is not None:
            return int(item["virtual_router_id"])
    return None


def _clusters(directors: list[dict], configs: dict[str, dict]) -> list[list[str]]:
    """Hosts that are VRRP peers (share an instance name, directly or through another director), in input order;
    every director in one cluster when no config is known."""
    hosts = [director["host"] for director in directors]
    if not configs:
        return [hosts] if hosts else []
    parent = {host: host for host in hosts}

    def root(host: str) -> str:
        while parent[host] != host:
            host = parent[host]
        return host

    owner: dict[str, str] = {}
    for host in hosts:
        names = [item.get("name") for item in (configs.get(host) or {}).get("vrrp_instances") or []]
        sync = next(d["sync_daemon"] for d in directors if d["host"] == host)
        if isinstance(sync, dict) and sync.get("instance"):
            names.append(sync["instance"])
        for name in names:
            if name in owner:
                parent[root(host)] = root(owner[name])
            else:
                owner[name] = host
    clusters: dict[str, list[str]] = {}
    for host in hosts:
        clusters.setdefault(root(host), []).append(host)
    return list(clusters.values())


def lvs_director_sync_daemon_peer_problems(directors: list[dict], configs: list[dict] | None = None) -> list[dict]:
    """Mistakes in lvs_director_sync_daemon that only show across directors, one finding each.

    directors -- one {host, sync_daemon} per director (sync_daemon: its lvs_director_sync_daemon, None when off)
    configs   -- the directors' resolved configs (lvs_director_resolve), matched by host: with them, directors are
                 compared with their VRRP peers only (directors sharing an instance), an unset sync_id reads as the
                 instance's VRID, net.ipv4.vs.sync_ports is compared and lvs_director_vrrp_only directors are left
                 out; without them every director is compared with every other
    Returns [{"hosts": [...], "message": ...}]: the directors concerned and one sentence naming each host's value
    and the fix. Values a director's own check refuses (lvs_director_sync_daemon_problems) are compared as written.
    """
    if not isinstance(directors, list) or not all(isinstance(item, dict) and item.get("host") for item in directors):
        raise AnsibleFilterError("lvs_director_sync_daemon_peer_problems: expects a list of {host, sync_daemon}, got "
                                 f"{directors!r}")
    by_host = {str(config.get("host")): config for config in configs or [] if isinstance(config, dict)}
    directors = [{"host": str(item["host"]), "sync_daemon": item.get("sync_daemon")} for item in directors
                 if not (by_host and (str(item["host"]) not in by_host or by_host[str(item["host"])].get("vrrp_only")))]
    findings = []
    for cluster in _clusters(directors, by_host):
        syncs = {d["host"]: d["sync_daemon"] for d in directors if d["host"] in cluster}
        on = [host for host in cluster if isinstance(syncs[host], dict) and syncs[host]]
        off = [host for host in cluster if not syncs[host]]
        if not on:
            continue
        if off:
            one = len(off) == 1
            peers = f"{'its' if one else 'their'} VRRP peer{'' if len(on) == 1 else 's'} " if by_host else ""
            findings.append({"hosts": sorted(cluster), "message": (
                f"{', '.join(off)}: lvs_director_sync_daemon is null (off), but "
                f"{peers}{', '.join(on)} run{'s' if len(on) == 1 else ''} the IPVS sync daemon: "
                f"{'it sends' if one else 'they send'} no connection entries as master and "
                f"{'keeps' if one else 'keep'} none as backup, so every failover to or from {'it' if one else 'them'} "
                "resets the established connections; set lvs_director_sync_daemon once in group_vars/lvs_directors "
                "for all of them, or null on all of them")})
        settings = {host: sync_daemon_settings(syncs[host]) or {} for host in on}  # on: every one is set
        compared = [("instance", "keepalived runs the master daemon where that instance is MASTER and the backup "
                                 "daemon elsewhere, so with different instances every director may be a master and "
                                 "none a backup"),
                    ("sync_id", "a backup ignores a sync message with another syncid (ip_vs_sync.c, "
                                "ip_vs_process_message)"),
                    ("group", "a backup joins its own group and a master sends to its own (ip_vs_sync.c, "
                              "make_receive_sock and make_send_sock)"),
                    ("port", "a backup listens on its own port and a master sends to its own (ip_vs_sync.c, "
                             "get_mcast_sockaddr)"),
                    ("maxlen_bytes", "a backup reads into a buffer of its own maxlen and drops a longer datagram as "
                                     "a bogus size (ip_vs_sync.c, sync_thread_backup and ip_vs_process_message)")]
        for key, why in compared:
            values = {}
            for host in on:
                value = _sync_value(settings[host], key)
                if key == "sync_id" and value is None:
                    vrid = _vrid(by_host.get(host), settings[host].get("instance"))
                    value = vrid if vrid is not None else f"unset (the VRID of {settings[host].get('instance')})"
                values[host] = value
            if len({str(value) for value in values.values()}) > 1:
                listing = ", ".join(f"{host}={_shown(key, syncs[host], values[host])}" for host in on)
                findings.append({"hosts": sorted(on), "message": (
                    f"lvs_director_sync_daemon.{key} differs between the directors {', '.join(on)} ({listing}): "
                    f"{why}, so connections are synced one way at most and a failover resets them; "
                    f"{GROUP_VARS_FIX}")})
        if by_host:
            ports = {host: str((by_host[host].get("sysctls") or {}).get(SYNC_SYSCTL_PORTS, 1)) for host in on}
            if len(set(ports.values())) > 1:
                listing = ", ".join(f"{host}={ports[host]}" for host in on)
                findings.append({"hosts": sorted(on), "message": (
                    f"lvs_director_sysctls {SYNC_SYSCTL_PORTS} differs between the directors {', '.join(on)} "
                    f"({listing}, 1 when unset), but each sync thread uses port + its number (ip_vs_sync.c "
                    "get_mcast_sockaddr), so a master with more threads sends to ports no backup listens on; "
                    f"{GROUP_VARS_FIX} (lvs_director_sysctls)")})
    return findings


def _shown(key: str, sync_daemon: dict, value: Any) -> str:
    """A host's value for a message, saying where it is keepalived's or the kernel's default."""
    written = sync_daemon.get(key)
    if key == "maxlen_bytes" and value is None:
        return "unset (the interface MTU less the IP and UDP headers)"
    if key == "sync_id" and written is None and isinstance(value, int):
        return f"unset (the VRID {value} of {sync_daemon.get('instance')})"
    if key in ("port", "group") and written in (None, ""):
        return f"{value} (the default)"
    return str(value)


class FilterModule:
    """Firewall and connection-sync helpers of the lvs_director role."""

    def filters(self) -> dict[str, Any]:
        return {
            "lvs_director_firewall_rules": lvs_director_firewall_rules,
            "lvs_director_firewall_findings": lvs_director_firewall_findings,
            "lvs_director_sync_daemon_problems": lvs_director_sync_daemon_problems,
            "lvs_director_sync_daemon_peer_problems": lvs_director_sync_daemon_peer_problems,
        }
