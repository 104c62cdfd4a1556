"""The status API's port: the configured one, else the next ones, else one the OS picks.

Instances started side by side race for the same ports. With SO_REUSEADDR, Linux lets two sockets bind one
port as long as neither listens yet, and then refuses the second `listen`: so a port counts as ours only once
`listen` has succeeded, and a refused `listen` moves on to the next port like a refused `bind`.
"""

from __future__ import annotations

import socket

__all__ = ["API_PORT_TRIES", "bind_api_socket"]

API_PORT_TRIES = 10


def bind_api_socket(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port`, else the next ports, else one the OS picks (0 asks the OS at once)."""
    candidates = [port + i for i in range(API_PORT_TRIES)] if port else []
    for candidate in [*candidates, 0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # TIME-WAIT from a dashboard of the previous run must not push us off our port;
            # Linux still refuses a port that a live instance listens on.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", candidate))
            sock.listen(1024)  # another instance may have bound this port too: whoever listens first has it
        except OSError:
            sock.close()
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it: no 40 ms stalls
        sock.setblocking(False)
        return sock
    raise OSError("no port is free for the status API")  # pragma: no cover - port 0 always binds
