"""The system library's view of a probing handshake: the messages CPython's
``SSLContext._msg_callback`` hands over (set only for the probe, never under load), parsed for the
negotiated group, the certificate chain and the bytes each side sent (``workers.engine.matrix.variants``)."""

from __future__ import annotations

# TLS group code points → the names OpenSSL prints (``SSL_get0_group_name``), as the bundled
# library's probe reads them.
GROUP_IDS = {
    0x0017: "secp256r1",
    0x0018: "secp384r1",
    0x0019: "secp521r1",
    0x001D: "x25519",
    0x001E: "x448",
    0x11EB: "SecP256r1MLKEM768",
    0x11EC: "X25519MLKEM768",
    0x11ED: "SecP384r1MLKEM1024",
}
SERVER_HELLO, CERTIFICATE, SERVER_KEY_EXCHANGE = 2, 11, 12
KEY_SHARE, SUPPORTED_VERSIONS = 0x0033, 0x002B


class HandshakeLog:
    """Collects the handshake messages of one connection (``SSLContext._msg_callback``)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, int, int, bytes]] = []

    def __call__(self, conn, direction, version, content_type, msg_type, data) -> None:
        self.messages.append((direction, int(content_type), int(msg_type), bytes(data)))

    def server_flight_bytes(self) -> int | None:
        """Bytes of the records the server sent in its first flight (after the ClientHello, before
        the client's next record): what the initial congestion window has to carry."""
        total, seen_read = 0, False
        for direction, content_type, _, data in self.messages:
            if content_type != 256:  # record headers only: 5 bytes, the last two the length
                continue
            if direction == "read":
                seen_read = True
                total += 5 + int.from_bytes(data[3:5], "big")
            elif seen_read:
                break
        return total or None

    def sent_bytes(self) -> dict:
        """Bytes of the records each side sent during the handshake (the log holds the handshake
        only), and the client's first flight (its ClientHello: what the key share makes larger)."""
        client = server = first = 0
        for direction, content_type, _, data in self.messages:
            if content_type != 256:
                continue
            size = 5 + int.from_bytes(data[3:5], "big")
            if direction == "write":
                client += size
                first += size if not server else 0
            else:
                server += size
        return {
            "client_handshake_bytes": client or None,
            "server_handshake_bytes": server or None,
            "client_flight_bytes": first or None,
        }

    def group(self) -> str | None:
        for direction, content_type, msg_type, data in self.messages:
            if direction != "read" or content_type != 22:
                continue
            if msg_type == SERVER_KEY_EXCHANGE and len(data) >= 7 and data[4] == 3:
                return _group_name(int.from_bytes(data[5:7], "big"))
            if msg_type == SERVER_HELLO:
                found = _key_share(data)
                if found is not None:
                    return _group_name(found)
        return None

    def chain(self) -> list[bytes]:
        """The certificates (DER) of the server's Certificate message, leaf first."""
        for direction, content_type, msg_type, data in self.messages:
            if direction == "read" and content_type == 22 and msg_type == CERTIFICATE:
                return _certificates(data)
        return []


def _group_name(code: int) -> str:
    return GROUP_IDS.get(code, f"0x{code:04x}")


def _extensions(body: bytes, pos: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    if pos + 2 > len(body):
        return out
    end = pos + 2 + int.from_bytes(body[pos : pos + 2], "big")
    pos += 2
    while pos + 4 <= end:
        ext_type = int.from_bytes(body[pos : pos + 2], "big")
        size = int.from_bytes(body[pos + 2 : pos + 4], "big")
        out[ext_type] = body[pos + 4 : pos + 4 + size]
        pos += 4 + size
    return out


def _key_share(message: bytes) -> int | None:
    """The group of a TLS 1.3 ServerHello's key_share (None in TLS 1.2 or when absent)."""
    body = message[4:]
    pos = 2 + 32  # legacy_version, random
    if len(body) < pos + 1:
        return None
    pos += 1 + body[pos]  # session id
    pos += 2 + 1  # cipher suite, compression
    share = _extensions(body, pos).get(KEY_SHARE)
    return int.from_bytes(share[:2], "big") if share and len(share) >= 2 else None


def _certificates(message: bytes) -> list[bytes]:
    body = message[4:]
    # TLS 1.2: a 3-byte list length over the rest; TLS 1.3: a request context comes first.
    tls13 = len(body) > 3 and int.from_bytes(body[0:3], "big") != len(body) - 3
    pos = 1 + body[0] if tls13 else 0  # TLS 1.3: certificate_request_context
    end = pos + 3 + int.from_bytes(body[pos : pos + 3], "big")
    pos += 3
    ders = []
    while pos + 3 <= end:
        size = int.from_bytes(body[pos : pos + 3], "big")
        ders.append(body[pos + 3 : pos + 3 + size])
        pos += 3 + size
        if tls13:
            pos += 2 + int.from_bytes(body[pos : pos + 2], "big")  # per-certificate extensions
    return ders
