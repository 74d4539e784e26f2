"""Writers of IPVS tables in the exact text layout of the kernel and of ipvsadm 1.31.

The layouts follow the format strings of net/netfilter/ipvs/ip_vs_ctl.c (ip_vs_info_seq_show, ip_vs_stats_show) and
ipvsadm.c (print_title, print_service_entry, print_largenum with FMT_EXACT). They produced the captured-shape fixtures
under fixtures/ and build the large tables of the benchmark; this kernel has no IPVS, so nothing here can be read live.

A service is a dict: proto ('TCP'|'UDP'|'SCTP'|'FWM'), address, port, fwmark, ipv6 (bool), sched, ops (bool),
sched_flags (list), persistent (None or (timeout_s, IPv4 mask text or IPv6 prefix length)), counters (5 ints), and
dests: a list of dicts with address, port, fwd, weight, active, inactive, counters (5 ints).
"""

from __future__ import annotations

import ipaddress
import random

HZ = 250
HEADER = "IP Virtual Server version 1.2.1 (size=4096)\n"


def _hex_v4(address):
    return f"{int(ipaddress.IPv4Address(address)):08X}"


def _pi6(address):
    """%pI6: eight groups of four lowercase hex digits."""
    return ipaddress.IPv6Address(address).exploded


def proc_ip_vs(services):
    """/proc/net/ip_vs as a current kernel (5.x/6.x) prints it."""
    out = [HEADER, "Prot LocalAddress:Port Scheduler Flags\n",
           "  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n"]
    for svc in services:
        ops = "ops " if svc.get("ops") else ""
        if svc["proto"] == "FWM":
            line = f"FWM  {svc['fwmark']:08X} {svc['sched']} {ops}"
        elif svc.get("ipv6"):
            line = f"{svc['proto']}  [{_pi6(svc['address'])}]:{svc['port']:04X} {svc['sched']} "
        else:
            line = f"{svc['proto']}  {_hex_v4(svc['address'])}:{svc['port']:04X} {svc['sched']} {ops} "
        if svc.get("persistent"):
            timeout_s, mask = svc["persistent"]
            if svc.get("ipv6"):
                # ntohl() of a prefix length stored in host order: byte-swapped on little endian.
                mask_value = int.from_bytes(int(mask).to_bytes(4, "little"), "big")
            else:
                mask_value = int(ipaddress.IPv4Address(mask))
            line += f"persistent {timeout_s * HZ} {mask_value:08X}\n"
        else:
            line += "\n"
        out.append(line)
        for dest in svc["dests"]:
            address = f"[{_pi6(dest['address'])}]" if ":" in dest["address"] else _hex_v4(dest["address"])
            out.append(f"  -> {address}:{dest['port']:04X}      {dest['fwd']:<7} {dest['weight']:<6} "
                       f"{dest['active']:<10} {dest['inactive']:<10}\n")
    return "".join(out)


def _hex_row(counters):
    """'%8LX %8LX %8LX %16LX %16LX' of ip_vs_stats_show."""
    conns, in_packets, out_packets, in_bytes, out_bytes = counters
    return f"{conns:8X} {in_packets:8X} {out_packets:8X} {in_bytes:16X} {out_bytes:16X}\n"


def proc_ip_vs_stats(totals, rates):
    """/proc/net/ip_vs_stats: totals since load and current rates, hex."""
    return (
        "   Total Incoming Outgoing         Incoming         Outgoing\n"
        "   Conns  Packets  Packets            Bytes            Bytes\n"
        + _hex_row(totals)
        + "\n Conns/s   Pkts/s   Pkts/s          Bytes/s          Bytes/s\n"
        + _hex_row(rates)
    )


def _svc_name(svc):
    if svc["proto"] == "FWM":
        return f"FWM  {svc['fwmark']}" + (" IPv6" if svc.get("ipv6") else "")
    if svc.get("ipv6"):
        return f"{svc['proto']}  [{ipaddress.IPv6Address(svc['address']).compressed}]:{svc['port']}"
    return f"{svc['proto']}  {svc['address']}:{svc['port']}"


def _dname(dest):
    if ":" in dest["address"]:
        return f"[{ipaddress.IPv6Address(dest['address']).compressed}]:{dest['port']}"
    return f"{dest['address']}:{dest['port']}"


def _largenum_exact(value):
    """print_largenum with FMT_EXACT: right-aligned in 9 columns, or one more than the digits."""
    digits = str(value)
    return digits.rjust(9 if len(digits) <= 8 else len(digits) + 1)


def _counters(counters):
    return "".join(_largenum_exact(value) for value in counters)


def ipvsadm_list(services):
    """``ipvsadm -Ln --exact``."""
    out = [HEADER, "Prot LocalAddress:Port Scheduler Flags\n",
           "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"]
    for svc in services:
        line = f"{_svc_name(svc)} {svc['sched']}"
        if svc.get("sched_flags"):
            line += f" ({','.join(svc['sched_flags'])})"
        if svc.get("persistent"):
            timeout_s, mask = svc["persistent"]
            line += f" persistent {timeout_s}"
            if svc.get("ipv6"):
                if int(mask) != 128:
                    line += f" mask {int(mask)}"
            elif mask != "255.255.255.255":
                line += f" mask {mask}"
        if svc.get("ops"):
            line += " ops"
        out.append(line + "\n")
        for dest in svc["dests"]:
            out.append(f"  -> {_dname(dest):<28} {dest['fwd']:<7} {dest['weight']:<6} {dest['active']:<10} "
                       f"{dest['inactive']:<10}\n")
    return "".join(out)


def ipvsadm_stats(services):
    """``ipvsadm -Ln --stats --exact``."""
    out = [HEADER, "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n",
           "  -> RemoteAddress:Port\n"]
    for svc in services:
        out.append(f"{_svc_name(svc):<33}{_counters(svc['counters'])}\n")
        for dest in svc["dests"]:
            out.append(f"  -> {_dname(dest):<28}{_counters(dest['counters'])}\n")
    return "".join(out)


def big_service(real_servers, seed=7, weights=(1, 2, 3)):
    """One DR service with ``real_servers`` IPv4 real servers, counters in the 10^15 range and mixed weights."""
    rng = random.Random(seed)
    dests = []
    for index in range(real_servers):
        weight = weights[index % len(weights)]
        conns = weight * 1_000_000 + rng.randrange(50_000)
        dests.append({
            "address": str(ipaddress.IPv4Address(0x0A000000 + index + 1)), "port": 80, "fwd": "Route",
            "weight": weight, "active": rng.randrange(500), "inactive": rng.randrange(5000),
            "counters": [conns, conns * 40, 0, conns * 40 * 1400 + 2**50, 0],
        })
    counters = [sum(dest["counters"][column] for dest in dests) for column in range(5)]
    return {"proto": "TCP", "address": "198.18.0.100", "port": 80, "sched": "wlc", "dests": dests,
            "counters": counters}


def _dest(address, port, fwd, weight, active, inactive, counters):
    return {"address": address, "port": port, "fwd": fwd, "weight": weight, "active": active, "inactive": inactive,
            "counters": counters}


# The tables behind fixtures/{proc_ip_vs,ipvsadm_list,ipvsadm_stats}_<name>.txt (test__ipvs.py checks they agree).
FIXTURE_TABLES = {
    "empty": [],
    "dr": [
        {"proto": "TCP", "address": "198.18.0.100", "port": 80, "sched": "wlc",
         "counters": [10000, 60000, 0, 4000000, 0], "dests": [
             _dest("198.18.0.11", 80, "Route", 1, 12, 40, [5210, 31260, 0, 2084000, 0]),
             _dest("198.18.0.12", 80, "Route", 1, 11, 38, [4790, 28740, 0, 1916000, 0])]},
        {"proto": "UDP", "address": "198.18.0.100", "port": 53, "sched": "rr", "ops": True,
         "counters": [900, 900, 900, 64800, 121500], "dests": [
             _dest("198.18.0.11", 53, "Masq", 2, 0, 3, [600, 600, 600, 43200, 81000]),
             _dest("198.18.0.12", 53, "Masq", 1, 0, 1, [300, 300, 300, 21600, 40500]),
             _dest("198.18.0.13", 53, "Masq", 0, 0, 0, [0, 0, 0, 0, 0])]},
    ],
    "ipv6": [
        {"proto": "TCP", "address": "2001:db8::100", "port": 443, "ipv6": True, "sched": "sh",
         "sched_flags": ["sh-fallback"], "persistent": (300, "64"),
         "counters": [18446744073709551015, 90000000000900, 0, 18000000000000120000, 0], "dests": [
             _dest("2001:db8::11", 443, "Route", 1, 900, 10,
                   [18446744073709551000, 90000000000000, 0, 18000000000000000000, 0]),
             _dest("2001:db8::12", 443, "Route", 1, 3, 0, [15, 900, 0, 120000, 0])]},
    ],
    "fwm": [
        {"proto": "FWM", "fwmark": 1, "sched": "wrr", "persistent": (1800, "255.255.255.0"),
         "counters": [4000, 2, 0, 2, 0], "dests": [
             _dest("198.18.0.11", 0, "Route", 3, 30, 0, [3000, 1, 0, 1, 0]),
             _dest("198.18.0.12", 0, "Route", 1, 10, 0, [1000, 1, 0, 1, 0])]},
        {"proto": "FWM", "fwmark": 2, "ipv6": True, "sched": "mh", "sched_flags": ["mh-port"],
         "counters": [100, 1000, 0, 100000, 0], "dests": [
             _dest("2001:db8::11", 0, "Tunnel", 1, 5, 1, [50, 500, 0, 50000, 0]),
             _dest("2001:db8::12", 0, "Tunnel", 1, 5, 2, [50, 500, 0, 50000, 0])]},
    ],
}
FIXTURE_STATS = {
    "stats": ([0x1A2B3C4D5, 0xFFFFFFFFFF, 0, 0xFFFFFFFFFFFFFFFF, 0], [0x10, 0x200, 0, 0x3E800, 0]),
    "stats_idle": ([0] * 5, [0] * 5),
}
