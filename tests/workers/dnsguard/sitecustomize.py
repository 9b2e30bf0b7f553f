"""Test-only: put this directory on a subprocess's PYTHONPATH and every name lookup of that process
(``_socket.getaddrinfo``, which ``socket`` and gevent's resolver both call) is written to
``$DNS_GUARD_LOG`` and refused, unless the "name" is a numeric address. A test then proves that the
engine never asked DNS about a host — and if it ever did, nothing would leave loopback.
"""

import _socket
import ipaddress
import os

_real_getaddrinfo = _socket.getaddrinfo


def _numeric(host) -> bool:
    if host is None:
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _numeric(host):
        with open(os.environ.get("DNS_GUARD_LOG", os.devnull), "a") as log:
            log.write(f"{host}\n")
        raise _socket.gaierror(_socket.EAI_NONAME, f"name lookups are refused in this test: {host}")
    return _real_getaddrinfo(host, *args, **kwargs)


_socket.getaddrinfo = _guarded_getaddrinfo
