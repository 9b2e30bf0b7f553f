"""The engine's private-API code is pinned to the versions it was written for.

``workers/engine/coop.py`` drives OpenSSL's socket object through ``SSLContext._wrap_socket``,
subclasses ``_socket.socket`` and waits on gevent's hub loop; ``variants.py`` hooks
``SSLContext._msg_callback``; ``tlslib.py`` calls pyOpenSSL's cffi binding. None of that is a public
API, so an upgrade of Python, gevent or pyOpenSSL could break it silently. These tests fail loudly on
any other version, until someone has checked the code again and moved the pins
(``PRIVATE_API_CHECKED_ON`` in coop.py and tlslib.py).
"""

from __future__ import annotations

import _socket
import inspect
import ssl
import sys

import gevent
import OpenSSL
from OpenSSL import SSL
from OpenSSL._util import lib

from workers.engine import coop, tlslib

RECHECK = (
    "the engine's private-API code was written for {pinned}, this is {running}: check coop.py "
    "(SSLContext._wrap_socket, _encode_hostname, the _socket.socket subclass, hub.loop.io / hub.wait, "
    "loop.timer's again), variants.py (SSLContext._msg_callback, the bundled matrix's cffi calls), "
    "tlslib.py and tlsaccept.py (OpenSSL._util.lib, Connection._ssl, Context._context) against the new "
    "version, run tests/workers, then move PRIVATE_API_CHECKED_ON"
)


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_python_and_gevent_are_the_versions_coop_was_written_for():
    running = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "gevent": minor(gevent.__version__),
    }
    pinned = coop.PRIVATE_API_CHECKED_ON
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)


def test_pyopenssl_is_the_version_tlslib_was_written_for():
    running = {"pyOpenSSL": minor(OpenSSL.__version__)}
    pinned = tlslib.PRIVATE_API_CHECKED_ON
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)


def test_the_private_parts_the_engine_calls_are_there_with_their_shapes():
    params = list(inspect.signature(ssl.SSLContext._wrap_socket).parameters)
    assert params[:4] == ["self", "sock", "server_side", "server_hostname"]
    assert {"owner", "session"} <= set(params)
    assert callable(ssl.SSLContext._encode_hostname)
    assert hasattr(ssl.SSLContext, "_msg_callback")
    assert "__weakref__" in coop._Socket.__slots__ and issubclass(coop._Socket, _socket.socket)
    hub = gevent.get_hub()
    watcher = hub.loop.io(0, coop.READ)
    watcher.close()
    assert callable(hub.wait)
    timer = hub.loop.timer(1.0, 1.0)  # coop.UserWaits: a repeating timer armed with ``again``
    assert callable(timer.again) and callable(timer.stop)
    timer.close()
    for name in (
        "SSL_session_reused",
        "SSL_get0_param",
        "X509_VERIFY_PARAM_set1_host",
        "X509_VERIFY_PARAM_set1_ip",
        # variants_bundled.py and tlsaccept.py: groups, signature algorithms, the group read
        "SSL_CTX_set1_curves_list",
        "SSL_CTX_set1_sigalgs_list",
        "SSL_get0_group_name",
        "ERR_clear_error",
    ):
        assert hasattr(lib, name), name
    assert "_ssl" in SSL.Connection.__init__.__code__.co_names
    assert "_context" in SSL.Context.__init__.__code__.co_names
