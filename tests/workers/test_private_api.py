"""The engine's private-API code is pinned to the versions it was written for.

``workers/engine/http/cooperative.py`` drives OpenSSL's socket object through
``SSLContext._wrap_socket``, subclasses ``_socket.socket`` and waits on gevent's hub loop (as
``http/http3/udp.py`` does for the HTTP/3 client's UDP socket);
``matrix/variants.py`` and ``tls/mtls.py`` hook ``SSLContext._msg_callback``; ``tls/libraries.py``,
``tls/acceptance.py``, ``tls/mtls.py`` and ``matrix/bundled.py`` call pyOpenSSL's cffi binding. None of
that is a public API, so an upgrade of Python, gevent or pyOpenSSL could break it silently. These tests
fail loudly on any other version, until someone has checked the code again and moved the pins
(``PRIVATE_API_CHECKED_ON`` in ``http/cooperative.py`` and ``tls/libraries.py``), and when a module not
named here starts using those parts.
"""

from __future__ import annotations

import _socket
import inspect
import io
import re
import ssl
import sys
import tokenize
from pathlib import Path

import gevent
import OpenSSL
from OpenSSL import SSL
from OpenSSL._util import lib

from workers.engine.http import cooperative
from workers.engine.tls import libraries

ENGINE = Path(__file__).resolve().parents[2] / "workers" / "engine"
# Each engine module that uses a private part, and which (what to check again after an upgrade).
PRIVATE_USERS = {
    "http/cooperative.py": "SSLContext._wrap_socket, _encode_hostname, the _socket.socket subclass, "
    "hub.loop.io / hub.wait, loop.timer's again",
    "http/http3/udp.py": "the _socket.socket UDP socket, hub.loop.io / loop.timer",
    "http/single_loop.py": "hub.loop.timer / hub.wait (a whole turn of the hub), hub.loop.fileno "
    "(gevent's own epoll in the loop's set), the original select.epoll",
    "matrix/variants.py": "SSLContext._msg_callback",
    "matrix/bundled.py": "the bundled matrix's cffi calls (OpenSSL._util.lib, Context._context)",
    "tls/libraries.py": "OpenSSL._util.lib and ffi (SSL_read / SSL_write), Connection._ssl, "
    "Connection._raise_ssl_error",
    "tls/acceptance.py": "OpenSSL._util.lib, Connection._ssl, Context._context",
    "tls/mtls.py": "SSLContext._msg_callback, SSL_CTX_set_msg_callback through the cffi binding",
}
PRIVATE = re.compile(
    r"\._msg_callback\b|\._context\b|\._ssl\b|OpenSSL\._util|_wrap_socket|_encode_hostname|_raise_ssl_error|"
    r"\.loop\.(io|timer)\b|_socket\.socket|\b_ffi\.|\b_lib\."
)
RECHECK = (
    "the engine's private-API code was written for {pinned}, this is {running}: check "
    + "; ".join(f"workers/engine/{path} ({what})" for path, what in PRIVATE_USERS.items())
    + " against the new version, run tests/workers, then move PRIVATE_API_CHECKED_ON"
)


def _code(path: Path) -> str:
    """The module's names and operators, dotted names joined: what it calls, never what its strings
    or comments say."""
    parts = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.NAME or (token.type == tokenize.OP and token.string == "."):
            parts.append(token.string)
        elif token.type in (tokenize.OP, tokenize.NEWLINE, tokenize.NL):
            parts.append(" ")
    return " ".join(" ".join(parts).replace(" . ", ".").split()).replace(" .", ".").replace(". ", ".")


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_python_and_gevent_are_the_versions_the_cooperative_connection_was_written_for():
    running = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "gevent": minor(gevent.__version__),
    }
    pinned = cooperative.PRIVATE_API_CHECKED_ON
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)


def test_pyopenssl_is_the_version_the_tls_libraries_were_written_for():
    running = {"pyOpenSSL": minor(OpenSSL.__version__)}
    pinned = libraries.PRIVATE_API_CHECKED_ON
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)


def test_the_private_parts_the_engine_calls_are_there_with_their_shapes():
    params = list(inspect.signature(ssl.SSLContext._wrap_socket).parameters)
    assert params[:4] == ["self", "sock", "server_side", "server_hostname"]
    assert {"owner", "session"} <= set(params)
    assert callable(ssl.SSLContext._encode_hostname)
    assert hasattr(ssl.SSLContext, "_msg_callback")
    assert "__weakref__" in cooperative._Socket.__slots__ and issubclass(cooperative._Socket, _socket.socket)
    hub = gevent.get_hub()
    watcher = hub.loop.io(0, cooperative.READ)
    watcher.close()
    assert callable(hub.wait)
    timer = hub.loop.timer(1.0, 1.0)  # cooperative.UserWaits: a repeating timer armed with ``again``
    assert callable(timer.again) and callable(timer.stop)
    timer.close()
    for name in (
        "SSL_session_reused",
        "SSL_read",  # BundledTLS's reads and writes, pyOpenSSL's error reading after them
        "SSL_write",
        "SSL_pending",
        "SSL_get0_param",
        "X509_VERIFY_PARAM_set1_host",
        "X509_VERIFY_PARAM_set1_ip",
        # matrix/bundled.py and tls/acceptance.py: groups, signature algorithms, the group read
        "SSL_CTX_set1_curves_list",
        "SSL_CTX_set1_sigalgs_list",
        "SSL_get0_group_name",
        "ERR_clear_error",
    ):
        assert hasattr(lib, name), name
    assert "_ssl" in SSL.Connection.__init__.__code__.co_names
    assert list(inspect.signature(SSL.Connection._raise_ssl_error).parameters) == ["self", "ssl", "result"]
    assert "_context" in SSL.Context.__init__.__code__.co_names


def test_every_engine_module_using_a_private_part_is_named_for_the_recheck():
    """A module that starts using a private part (moved, or new: the HTTP/3 client on qh3 and gevent's
    UDP sockets, say) must join ``PRIVATE_USERS``, so the upgrade's message names it."""
    using = sorted(
        str(path.relative_to(ENGINE)) for path in ENGINE.rglob("*.py") if PRIVATE.search(_code(path))
    )
    assert using == sorted(PRIVATE_USERS)
