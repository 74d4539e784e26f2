"""The services behind the scenario's extra virtual services, on each real server (Python standard library only).

  lab_services.py session   TCP 8080: greets each connection with this host's name, then echoes every line (long
                            sessions for the inhibit_on_failure and wlc checks)
  lab_services.py udp-echo  UDP 7: answers every datagram with this host's name (the UDP service and its UDP_CHECK)
"""

from __future__ import annotations

import socket
import socketserver
import struct
import sys

NAME = socket.gethostname().encode() + b"\n"


class Session(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(NAME)
        for line in self.rfile:
            self.wfile.write(line)


class Threaded(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def udp_echo(port: int) -> None:
    """Answers from the address the datagram was sent to (the VIP under DR), as a real UDP service must: IP_PKTINFO
    gives the destination of each datagram (ip(7)), and the same option on the reply sets its source."""
    pktinfo = getattr(socket, "IP_PKTINFO", 8)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, pktinfo, 1)
        sock.bind(("0.0.0.0", port))
        while True:
            _data, ancillary, _flags, peer = sock.recvmsg(2048, socket.CMSG_SPACE(12))
            source = b"\0\0\0\0"
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == pktinfo:
                    _ifindex, _local, source = struct.unpack("i4s4s", value[:12])
            sock.sendmsg([NAME], [(socket.IPPROTO_IP, pktinfo, struct.pack("i4s4s", 0, source, b"\0\0\0\0"))], 0,
                         peer)


def main(argv: list[str]) -> int:
    if argv[:1] == ["session"]:
        with Threaded(("0.0.0.0", 8080), Session) as server:
            server.serve_forever()
    elif argv[:1] == ["udp-echo"]:
        udp_echo(7)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
