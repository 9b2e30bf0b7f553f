"""The TLS configuration matrix: which client-side variants a run repeats ``tls_new`` (and
``h2_new``) under, their sub-arm names, and the report's ``matrix`` entries.

Shared by the portal (form, CLI, report) and the engine (``workers.engine.matrix.variants`` builds and
probes each variant), so it imports neither Django nor Locust.

A run option ``tls_matrix`` names the dimensions to vary (any of ``DIMENSIONS``); the variants are
their cross product, the other dimensions left at the generator's default (``None``). Each variant
is a sub-arm of every repeated arm the run has (``MATRIX_ARMS``) named ``<arm>@<values>``
(``variant_name``), e.g. ``tls_new@1.2+x25519+ecdsa+full`` or ``h2_new@1.3+x25519``: its own
ArmResult rows, histograms, server CPU and costs, interleaved in rounds with the other arms. The
engine probes every variant with one handshake before any window; a variant that the server or the
generator refuses, or whose negotiated parameters are not what it asked for, is listed as
``refused`` with the reason and never measured.

The new-connection arms (``tls_new``, and ``h2_new``: a new TLS connection with ALPN h2 per request)
are repeated over every dimension: each request pays the variant's whole handshake. The keep-alive
arms (``tls``, ``h2``) are repeated for the protocol only. HTTP/2 needs TLS 1.2 or newer (RFC 9113
§9.2), which both protocol values are, with an ephemeral key exchange and an AEAD cipher, which the
engine's TLS 1.2 suites are; an HTTP/2 variant whose handshake does not select h2 over ALPN is
refused with the reason, never measured as HTTP/1.1 (``HTTP2_ARMS``).

The ``group`` dimension's values are ``x25519``, ``p256``, ``x25519mlkem768`` and the groups the user
named in the run option ``tls_groups`` (``parse_groups``: OpenSSL's names). A variant's ``group`` is
the value asked for; what the handshake negotiated is ``negotiated.group``, the name OpenSSL prints
(``secp256r1`` for ``p256``; ``same_group`` compares the two).
"""

from __future__ import annotations

import itertools

MATRIX_ARM = "tls_new"
SEPARATOR = "@"
DIMENSIONS = ("protocol", "group", "cert", "resumption", "client_cert")
# The arms the matrix repeats, and the dimensions that change what each measures, each only when the
# run has it. ``tls_new`` and ``h2_new`` open a new TLS connection per request (ALPN h2 for ``h2_new``):
# every dimension changes the handshake each request pays. ``tls`` and ``h2`` (keep-alive) pay their
# one handshake per user in the warm-up: in their window only the protocol (record layer and its
# cipher suites) differs, so they are repeated for the protocol only.
MATRIX_ARMS: dict[str, tuple[str, ...]] = {
    "tls_new": DIMENSIONS,
    "tls": ("protocol",),
    "h2_new": DIMENSIONS,
    "h2": ("protocol",),
    # HTTP/3 (QUIC): TLS 1.3 only, tickets as the arm says: only the key-exchange group varies, whose
    # key share rides the client's first flight (workers/engine/matrix/quic.py).
    "h3_new": ("group",),
}
# The arms repeated over every dimension: a run with ``tls_matrix`` names at least one of them.
NEW_CONNECTION_ARMS = ("tls_new", "h2_new")
# The HTTP/2 arms the matrix repeats, and their HTTP/1.1 twins (the same connection policy): a
# variant of theirs must negotiate ALPN h2, and the report compares it with its twin's variant.
HTTP2_ARMS = {"h2_new": "tls_new", "h2": "tls"}
VALUES: dict[str, tuple[str, ...]] = {
    "protocol": ("tls1.2", "tls1.3"),
    "group": ("x25519", "p256", "x25519mlkem768"),
    # Ed25519: refused by a server that holds no Ed25519 certificate (one probing handshake, no window).
    "cert": ("rsa", "ecdsa", "ed25519"),
    "resumption": ("none", "ticket", "session_id"),
    "client_cert": ("none", "rsa", "ecdsa"),  # mutual TLS: the target's client certificate of that type
}
# Short forms for sub-arm names (they are keys of the report's ``arms`` and of ArmResult.arm).
SHORT = {
    "tls1.2": "1.2",
    "tls1.3": "1.3",
    "x25519": "x25519",
    "p256": "p256",
    "x25519mlkem768": "mlkem",
    "rsa": "rsa",
    "ecdsa": "ecdsa",
    "ed25519": "ed25519",
    "none": "full",
    "ticket": "ticket",
    "session_id": "sessid",
}
LABELS = {
    "tls1.2": "TLS 1.2",
    "tls1.3": "TLS 1.3",
    "x25519": "X25519 key exchange",
    "p256": "P-256 key exchange",
    "x25519mlkem768": "X25519MLKEM768 (post-quantum hybrid) key exchange",
    "rsa": "RSA certificate",
    "ecdsa": "ECDSA certificate",
    "ed25519": "Ed25519 certificate",
    "none": "a full handshake per connection",
    "ticket": "resumption by session ticket",
    "session_id": "resumption by session ID",
}
# Values whose short form or label depends on the dimension ("none", "rsa" are others' values too).
BY_DIMENSION = {
    "client_cert": {
        "short": {"none": "nocc", "rsa": "ccrsa", "ecdsa": "ccecdsa"},
        "label": {
            "none": "no client certificate",
            "rsa": "an RSA client certificate",
            "ecdsa": "an ECDSA client certificate",
        },
    }
}
# The report's variant keys (the names): ``cert`` is reported as ``cert_key_type``.
REPORT_KEYS = {
    "protocol": "protocol",
    "group": "group",
    "cert": "cert_key_type",
    "resumption": "resumption",
    "client_cert": "client_cert",
}
MAX_NAME = 64  # ArmResult.arm's max_length
# The names OpenSSL prints for a group (``SSL_get0_group_name``: ``x25519``, ``secp256r1``,
# ``X25519MLKEM768``), by the built-in values and by OpenSSL's aliases; compared case-insensitively.
OPENSSL_NAMES = {"x25519": "x25519", "p256": "secp256r1", "x25519mlkem768": "X25519MLKEM768"}
GROUP_ALIASES = {
    "p-256": "secp256r1",
    "prime256v1": "secp256r1",
    "p-384": "secp384r1",
    "p-521": "secp521r1",
}
MAX_GROUPS = 4  # named groups besides the built-in ones (each adds variants)
GROUPS_HELP = (
    "With the matrix's group dimension: key-exchange groups to measure besides X25519, P-256 and "
    "X25519MLKEM768, comma-separated as OpenSSL names them (e.g. secp384r1,SecP256r1MLKEM768); one "
    "the run's TLS library lacks, or the server refuses, is listed as refused."
)
# The run option tls_groups' extras (portal.lib.runs.runspec.RunSpec.tls_groups), beside the names it checks.
GROUPS_OPTION = {
    "max_length": MAX_GROUPS,  # of the list; each name is checked by parse_groups
    "label": "More key-exchange groups",
    "help": GROUPS_HELP,
    "description": f'{GROUPS_HELP} At most {MAX_GROUPS}: ["secp384r1"] or "secp384r1,X448".',
    "form": "text",
    "chars": 200,
    "cli": "--tls-groups",
    "cli_help": GROUPS_HELP,
    "optional": True,
    "overridable": True,
    "engine": True,
}
MAX_GROUP_CHARS = 32


def canonical_group(name: str | None) -> str | None:
    """A group value or a name OpenSSL prints, as one lower-case name: ``p256``, ``P-256``,
    ``prime256v1`` and ``secp256r1`` are all ``secp256r1``."""
    if not name:
        return None
    lowered = OPENSSL_NAMES.get(name, name).lower()
    return GROUP_ALIASES.get(lowered, lowered)


def same_group(value: str, negotiated: str | None) -> bool:
    """Whether the group a handshake negotiated (as OpenSSL prints it) is the variant's ``value``."""
    return negotiated is not None and canonical_group(value) == canonical_group(negotiated)


def parse_groups(text: str | list[str] | None) -> list[str]:
    """``tls_groups``: key-exchange groups named by the user besides x25519, p256 and X25519MLKEM768
    (``"secp384r1,X448"``, or a list), as OpenSSL names them; ValueError on a name that cannot be
    one. Duplicates of each other or of the built-in groups are dropped. Whether the run's TLS
    library has the group is the engine's to find out (a variant it lacks is refused, saying so)."""
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    seen = {canonical_group(value) for value in VALUES["group"]}
    for item in items:
        name = str(item).strip()
        if not name:
            continue
        if len(name) > MAX_GROUP_CHARS or not all(ch.isalnum() or ch in "-_" for ch in name):
            raise ValueError(
                f"a group is named as OpenSSL names it (letters, digits, - and _, at most "
                f"{MAX_GROUP_CHARS}), not {name!r}"
            )
        if canonical_group(name) in seen:
            continue
        seen.add(canonical_group(name))
        out.append(name)
    if len(out) > MAX_GROUPS:
        raise ValueError(f"at most {MAX_GROUPS} named groups")
    return out


def values(dim: str, groups: list[str] | None = None) -> tuple[str, ...]:
    """A dimension's values: the built-in ones, and for ``group`` the named ``groups`` after them."""
    return VALUES[dim] + tuple(groups or ()) if dim == "group" else VALUES[dim]


def parse_dimensions(text: str | list[str] | None) -> list[str]:
    """``"protocol,group"`` (or a list) → the dimensions in canonical order; ValueError when unknown."""
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    wanted = {item.strip().lower() for item in items if item and item.strip()}
    unknown = sorted(wanted - set(DIMENSIONS))
    if unknown:
        raise ValueError(
            f"unknown matrix dimension(s) {', '.join(unknown)}; choose from {', '.join(DIMENSIONS)}"
        )
    return [dim for dim in DIMENSIONS if dim in wanted]


def variants(dimensions: list[str], arm: str = MATRIX_ARM, groups: list[str] | None = None) -> list[dict]:
    """The cross product of the chosen dimensions' values that matter for ``arm``
    (``MATRIX_ARMS``); the other dimensions are ``None``. ``groups``: named groups added to the
    ``group`` dimension (``parse_groups``)."""
    chosen = [dim for dim in MATRIX_ARMS.get(arm, ()) if dim in dimensions]
    if not chosen:
        return []
    out = []
    for combination in itertools.product(*(values(dim, groups) for dim in chosen)):
        variant = dict.fromkeys(DIMENSIONS)
        variant.update(zip(chosen, combination, strict=True))
        out.append(variant)
    return out


def variant_name(variant: dict, arm: str = MATRIX_ARM) -> str:
    """``tls_new@1.2+x25519``: the sub-arm's name, from the chosen dimensions' values in order."""
    parts = [short(dim, variant[dim]) for dim in DIMENSIONS if variant.get(dim)]
    return f"{arm}{SEPARATOR}{'+'.join(parts)}"


def short(dim: str, value: str) -> str:
    """A value's short form in sub-arm names (``client_cert`` none → ``nocc``, resumption none →
    ``full``; a group named in ``tls_groups``: its name in lower case)."""
    return BY_DIMENSION.get(dim, {}).get("short", {}).get(value) or SHORT.get(value) or value.lower()


def label(dim: str, value: str) -> str:
    """A value as the advice says it (a named group: "<name> key exchange")."""
    by_dim = BY_DIMENSION.get(dim, {}).get("label", {}).get(value)
    return by_dim or LABELS.get(value) or f"{value} key exchange"


def base_arm(name: str) -> str:
    """The arm a (sub-)arm belongs to: ``tls_new@1.2`` → ``tls_new``."""
    return name.split(SEPARATOR, 1)[0]


def is_variant(name: str) -> bool:
    return SEPARATOR in name


def is_http2(name: str) -> bool:
    """Whether a (sub-)arm is one of the matrix's HTTP/2 arms (``h2_new@1.3`` → True)."""
    return base_arm(name) in HTTP2_ARMS


def http1_twin(name: str) -> str | None:
    """An HTTP/2 sub-arm's HTTP/1.1 twin, the same variant of the arm with the same connection policy
    (``h2_new@1.3+x25519`` → ``tls_new@1.3+x25519``, ``h2@1.2`` → ``tls@1.2``); None otherwise."""
    twin = HTTP2_ARMS.get(base_arm(name))
    if twin is None or not is_variant(name):
        return None
    return twin + SEPARATOR + name.split(SEPARATOR, 1)[1]


def needs_arm_error(arm_names: list[str]) -> str | None:
    """Why a run with ``tls_matrix`` cannot repeat anything (None when it names ``tls_new`` or
    ``h2_new``): the matrix needs an arm to repeat over every dimension."""
    if any(name in NEW_CONNECTION_ARMS for name in arm_names):
        return None
    return f"tls_matrix needs the {' or the '.join(NEW_CONNECTION_ARMS)} arm"


def variant_count(dimensions: list[str], arms: list | None = None, groups: list[str] | None = None) -> int:
    """How many sub-arms at most (before refusals) over ``arms`` (names or ``{"name"}`` dicts;
    default ``tls_new`` alone; ``tls``, ``h2`` and ``h2_new`` add theirs): for time limits and quotas."""
    names = [
        a.get("name") if isinstance(a, dict) else a for a in (arms if arms is not None else [MATRIX_ARM])
    ]
    return sum(len(variants(dimensions, name, groups)) for name in names if name in MATRIX_ARMS)


def report_variant(variant: dict) -> dict:
    """The variant as the report names it: ``{"protocol", "group", "cert_key_type", "resumption"}``."""
    return {REPORT_KEYS[dim]: variant.get(dim) for dim in DIMENSIONS}


def _percentiles(summary: dict | None) -> dict | None:
    if not summary:
        return None
    return {key: summary[key] for key in ("p50", "p90", "p95", "p99", "mean", "count") if key in summary}


def matrix_section(
    probes: list[dict] | None,
    arms: dict[str, dict],
    costs_by_arm: dict[str, dict],
    twin_costs: dict[str, dict] | None = None,
) -> list:
    """The report's ``matrix``: one entry per variant the engine probed (``Run.variants``), in order.

    ``probes``: the engine's ``matrix`` message variants (``name``, ``variant``, ``status``,
    ``detail``, ``negotiated``); ``arms``: the report's arm sections; ``costs_by_arm``: each sub-arm's
    handshake cost entry (``portal.lib.stats.costs.compare``) against ``plain_new`` (or ``plain``);
    ``twin_costs``: each HTTP/2 sub-arm's against its HTTP/1.1 twin (``http1_twin``), when both ran.
    A variant probed as measured whose sub-arm has no rows (cancelled before it) says so.
    """
    out = []
    for probe in probes or []:
        name = probe["name"]
        section = arms.get(name)
        entry = {
            "variant": report_variant(probe.get("variant") or {}),
            "arm": name,
            "base_arm": base_arm(name),
            "status": probe.get("status"),
            "detail": probe.get("detail") or "",
            "negotiated": probe.get("negotiated") or {},
            "requests": None,
            "rps": None,
            "tls_handshake_us": None,
            "ttlb_us": None,
            "server_cpu_ms_per_req": None,
            "connections_opened": None,
            "tls_sessions_reused": None,
            "cost": costs_by_arm.get(name),
            "http1_twin": http1_twin(name),
            "http1_cost": (twin_costs or {}).get(name),
        }
        if probe.get("status") == "measured":
            if section is None:
                entry["detail"] = (
                    entry["detail"] + " Not reached: the run ended before this sub-arm."
                ).strip()
            else:
                entry.update(
                    requests=section["requests"],
                    rps=section["rps"],
                    tls_handshake_us=_percentiles(section.get("tls_handshake_us")),
                    ttlb_us=_percentiles(section.get("ttlb_us")),
                    server_cpu_ms_per_req=section.get("server_cpu_ms_per_req"),
                    # Under load, not only in the probe: how many handshakes really resumed.
                    connections_opened=section.get("connections_opened"),
                    tls_sessions_reused=section.get("tls_sessions_reused"),
                )
        out.append(entry)
    return out
