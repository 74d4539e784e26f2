# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether draining or removing real servers is safe, judged on the live IPVS table, not on the configured weights.

The config says what keepalived would like; the table says who serves now. A real server whose health check fails is
at weight 0 (``inhibit_on_failure``) or gone from the table (without it), and it serves nobody: draining the last one
that does leaves the service with none. keepalived's quorum counts the weights of the real servers that are up
(check_data.c / ipwrapper.c ``update_quorum_state``: the service is up while that sum is at least ``quorum``); below it
keepalived takes the service down, and with a sorry server every new client goes there. So a drain that would take
the live weight below the quorum is refused too.

Removing a real server from the config is not a drain: on a reload keepalived deletes it from IPVS
(ipwrapper.c ``clear_service_rs``, even with ``inhibit_on_failure``), and with ``net.ipv4.vs.expire_nodest_conn=1``
the kernel expires its connections at once (ip_vs_core.c, ``sysctl_expire_nodest_conn``). A real server the live
table shows serving (a weight above 0, or active connections) is removed only after a drain.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.hpc.balance.plugins.module_utils._addresses import address_spelling as _normal


def _configured(virtual_servers: list[dict[str, Any]], service: dict[str, Any]) -> dict[str, Any] | None:
    """The configured virtual server of a live service (same address, port and protocol)."""
    for server in virtual_servers or []:
        if (service.get("address") is not None and _normal(server.get("address", "")) == _normal(service["address"])
                and int(server.get("port", 0)) == int(service.get("port") or 0)
                and str(server.get("protocol", "TCP")).upper() == str(service.get("protocol", "TCP")).upper()):
            return server
    return None


def drain_problems(services: list[dict[str, Any]], addresses: list[str],
                   virtual_servers: list[dict[str, Any]] | None = None) -> list[str]:
    """Why draining ``addresses`` now would leave a service of the live table without enough serving real servers.

    services        -- the live table (``hpc.balance.ipvs_spread``'s ``services``)
    addresses       -- the real-server addresses to drain (weight 0)
    virtual_servers -- the configured virtual servers (their ``quorum``), as in lvs_director_virtual_servers
    """
    draining = {_normal(address) for address in addresses}
    problems = []
    for service in services:
        reals = service.get("real_servers") or []
        drained_here = [real for real in reals if _normal(real["address"]) in draining]
        if not any(int(real.get("weight") or 0) > 0 for real in drained_here):
            continue  # nothing of it is serving in this service: draining changes nothing here
        left = [real for real in reals if _normal(real["address"]) not in draining and int(real.get("weight") or 0) > 0]
        name = service.get("name") or f"{service.get('protocol')} {service.get('address')}:{service.get('port')}"
        live = ", ".join(f"{real['address']} weight {real.get('weight')}" for real in reals) or "no real server"
        if not left:
            problems.append(
                f"{name}: draining {', '.join(sorted(r['address'] for r in drained_here))} would leave no real server "
                f"serving (live table: {live}); bring another one back first (is its health check failing? "
                "undrain it with playbooks/lvs_drain.yml), then drain"
            )
            continue
        quorum = (_configured(virtual_servers or [], service) or {}).get("quorum")
        remaining = sum(int(real.get("weight") or 0) for real in left)
        if quorum is not None and remaining < int(quorum):
            problems.append(
                f"{name}: draining {', '.join(sorted(r['address'] for r in drained_here))} would leave a live weight "
                f"of {remaining}, below the quorum {quorum}, and keepalived would take the service down (every new "
                f"client to the sorry server) (live table: {live}); bring servers back or lower the quorum first"
            )
    return problems


def removal_problems(host: str, config: dict[str, Any], services: list[dict[str, Any]]) -> list[str]:
    """Real servers the live table shows serving that the new config of ``host`` no longer lists in their service.

    config   -- the director's resolved config (``_lvs_director_config.resolve``)
    services -- the live table of this director (``_ipvs.parse_proc_ip_vs``)
    """
    problems = []
    for service in services:
        server = _configured(config["virtual_servers"], service)
        if server is None:
            continue  # a service the config does not know (built by hand, or removed whole): not a real server's
        listed = {_normal(real["address"]) for real in server["real_servers"]}
        for real in service.get("real_servers") or []:
            weight, active = int(real.get("weight") or 0), int(real.get("active_conns") or 0)
            if _normal(real["address"]) in listed or (weight == 0 and active == 0):
                continue
            problems.append(
                f"{host}: lvs_director_virtual_servers[{server['address']}:{server['port']}] no longer lists "
                f"{real['address']}, which IPVS shows serving (weight {weight}, {active} active connection(s)): a "
                "reload deletes it and its connections are reset (with expire_nodest_conn=1 at once); drain it first "
                f"(playbooks/lvs_drain.yml -e lvs_drain_real_server={real['address']} -e lvs_drain_action=drain), "
                "then remove it"
            )
    return problems
