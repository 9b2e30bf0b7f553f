"""The HTTP/3 client's use of qh3 beyond its public API is pinned to the version it was written for.

``workers/engine/http/http3/quic.py`` overrides ``QuicConnection._create_tls`` to set the groups a
connection offers (``tls.Context._supported_groups``), to read the server's group from the
ServerHello (``tls.Context._client_handle_hello``, given a ``Buffer``) and to leave an IP literal out
of the SNI (``_client_send_hello`` with ``_server_name`` unset); ``driver.py`` reads a close at
once from ``QuicConnection._close_event`` and the loss counters of ``QuicConnection._core``
(``loss_total``, ``pto_total``). An upgrade could break any of it silently: these tests fail on another
qh3 version until the code has been checked again and ``PRIVATE_API_CHECKED_ON`` moved.
"""

from __future__ import annotations

import inspect

import qh3
from qh3 import tls
from qh3._hazmat import Buffer, QuicConnectionCore
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection

from workers.engine.http.http3 import quic as q

RECHECK = (
    "workers/engine/http/http3 was written for qh3 {pinned}, this is {running}: check quic.py (the "
    "_create_tls override, Context._supported_groups, _client_handle_hello, _client_send_hello and "
    "_server_name, Buffer.data_slice) and "
    "driver.py (QuicConnection._close_event, _core.loss_total / pto_total, the held 0-RTT probe: "
    "test_qh3_still_breaks_on_an_early_probe), run tests/workers/test_http3_*.py, then move "
    "PRIVATE_API_CHECKED_ON"
)


def test_qh3_is_the_version_the_http3_client_was_written_for():
    running = {"qh3": ".".join(qh3.__version__.split(".")[:2])}
    pinned = q.PRIVATE_API_CHECKED_ON
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)


def test_the_private_parts_the_http3_client_uses_are_there_with_their_shapes():
    assert list(inspect.signature(QuicConnection._create_tls).parameters) == ["self", "remote_source_cid"]
    # connect() makes the bridge through _create_tls and starts it (the ClientHello) after it returns.
    assert "_create_tls" in QuicConnection.connect.__code__.co_names
    assert "_supported_groups" in tls.Context.__init__.__code__.co_names
    assert "_supported_groups" in tls.Context._client_send_hello.__code__.co_names
    assert "_client_handle_hello" in tls.Context.handle_message.__code__.co_names
    # the ClientHello is built by _client_send_hello (from start()), its SNI from _server_name
    assert "_client_send_hello" in tls.Context.handle_message.__code__.co_names
    assert "_server_name" in tls.Context._client_send_hello.__code__.co_names
    assert list(inspect.signature(tls.Context._client_send_hello).parameters) == ["self", "output_buf"]
    assert list(inspect.signature(tls.Context._client_handle_hello).parameters) == [
        "self",
        "input_buf",
        "output_buf",
    ]
    assert callable(Buffer.data_slice) and hasattr(Buffer, "capacity")
    assert {"loss_total", "pto_total"} <= set(dir(QuicConnectionCore))
    assert "_close_event" in QuicConnection.__init__.__code__.co_names
    assert {int(g) for g in tls.Group} >= set(q.GROUPS.values())


def test_the_hooked_connection_offers_the_groups_it_is_given():
    """Offline: the ClientHello qh3 builds after the hook carries exactly the groups asked for, in
    order, after its GREASE value."""
    settings = q.make_settings(False, groups=("x25519",))
    conn = q.Connection(configuration=settings.configuration("localhost", None), groups=settings.groups)
    conn.connect(("127.0.0.1", 4433), now=0.0)
    offered = [g for g in conn.tls._supported_groups if not q._is_grease(g)]
    assert offered == [q.GROUPS["x25519"]]
    default = q.Connection(configuration=QuicConfiguration(is_client=True, alpn_protocols=["h3"]))
    default.connect(("127.0.0.1", 4433), now=0.0)
    assert [g for g in default.tls._supported_groups if not q._is_grease(g)][:2] == [
        q.GROUPS["X25519MLKEM768"],
        q.GROUPS["x25519"],
    ]
