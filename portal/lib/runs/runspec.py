"""One definition of a run's options: each field once, with its type, bounds, default, help text and
whether a saved scenario's run (the API, a webhook) may override it.

Every surface is derived from ``RunSpec``: the run form's fields (``portal.runs.fields``), the
API's request schema (``portal.api.serializers.InlineRunIn``) and its validation (the API's JSON
goes to those form fields as typed values, never written back out as text), the options of
``manage.py tollgate run`` and ``scenario create`` (``portal.console.run_options``), the keys
a scenario's run may override (``OVERRIDABLE``) and the run's engine config (``ENGINE_KEYS``:
``portal.lib.runs.protocol.EngineConfig`` is made from these fields, and the form fills them).
``tests/runs/test_runspec.py`` walks every field over every surface.

A field's extras (``json_schema_extra``), read through ``option()``:

* ``label``: the form's label; ``help``: the form's help text (the pydantic description is the API's);
* ``cli``: its option of ``tollgate run`` (None: none, or one written by hand such as ``--path``),
  ``cli_help`` what ``--help`` says, ``cli_flag`` True for a store-true flag that sets the field to
  the opposite of its default (``--insecure``: ``verify_tls`` False);
* ``chars``: the most characters of its form field (a text it parses);
* ``form``: how the form shows it when its type does not say: ``"text"`` (a text input parsed by the
  form, typed values taken as they are), ``"lines"`` (the same in a text area); ``form_name`` when the
  form field's name differs; ``custom`` True when the form field is written by hand (several form
  fields or secrets behind one key: ``auth``, ``probes``, ``headers``, ``saturation``, the URLs);
* ``optional``: the form takes a blank (the default applies);
* ``overridable``: a scenario's run may change it (how it loads the target, never what it targets
  or which secrets it sends); ``engine``: a field of ``protocol.EngineConfig`` (this type, bounds and
  default) the form fills; a dict gives the engine's own ``type`` and bounds instead.

No Django here: ``bench/calibrate`` and the engine's contract import it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from portal.lib.runs.runoptions import Option, bounds_of, item_type  # noqa: F401 (the surfaces read them here)
from portal.lib.runs.runoptions import options as spec_options
from portal.lib.stats import wan
from portal.lib.tls import clientcerts, matrix

# The default scenario: paced, not flat out. A closed loop without think time drives one generator
# process as hard as it can go, so on a fast target it measures the client (``generator_saturation``),
# and a run's purpose is the cost of TLS, not a throughput limit (that is a saturation search's job).
# The default is an open loop at a rate well under what one engine process sustains in its most
# expensive arms (``tls_new`` and ``tls_resumed``: a handshake per request costs the client about 1 ms
# of CPU too), measured by ``bench/calibrate`` against the demo target and nginx on loopback
# (docs/performance.md), with windows long enough for 1,000+ samples per arm (p99).
# portal.lib.runs.protocol.ARMS
ARM_NAMES = (
    "plain",
    "tls",
    "plain_new",
    "tls_new",
    "tls_resumed",
    "tls_mtls",
    "h2",
    "h2_new",
    "h2c",
    "h3",
    "h3_new",
    "h3_resumed",
    "h3_0rtt",
)
ARMS = ("plain", "tls", "tls_new")
ARRIVAL_RATE = 60.0  # requests/s over all users, open loop
# Each user sends every USERS / ARRIVAL_RATE = 200 ms: room for a full handshake over a WAN before a
# user falls behind its schedule (the arrival_rate check).
USERS = 12
SPAWN_RATE = 12.0  # every user within the first second of the warm-up
WARMUP_S = 2.0
# 60 req/s × 20 s = 1,200 samples per arm: enough for p99 (sample_size needs 1,000).
DURATION_S = 20.0
THINK_TIME_S = 0.0
ROUNDS = 1
MAX_GENERATORS = 64  # Locust worker processes per generator host
MAX_H2_STREAMS = 100  # HTTP/2 streams in flight per connection (workers.engine.http.http2.MAX_STREAMS)
MAX_PATHS_FIELD = 64 * 1024  # characters of the paths text area
MAX_HEADERS_FIELD = 32 * 1024

# The form says why the default is paced.
ARRIVAL_RATE_HELP = (
    f"Open loop: requests start on a fixed schedule spread over the users, and latency counts from the "
    f"scheduled time. The default, {ARRIVAL_RATE:g} req/s, is paced on purpose: it stays well under what "
    "one generator process sustains even with a full handshake per request, so the report measures the "
    "server, not the client (docs/performance.md). Empty: closed loop, each user as fast as it can — "
    "that finds throughput limits, but often saturates the generator."
)
DURATION_HELP = (
    f"At the default rate, {DURATION_S:g} s give each arm {int(ARRIVAL_RATE * DURATION_S):,} samples: "
    "enough for p99 (1,000)."
)
TLS_LIBRARIES = ("system", "bundled")  # workers/engine/tls/libraries.py
# The run form's labels for the choices of the fields below: arms, TLS matrix dimensions, TLS libraries.
DIMENSION_LABELS = {
    "protocol": "protocol — TLS 1.2 vs 1.3",
    "group": "group — key exchange X25519 vs P-256 vs X25519MLKEM768 (post-quantum hybrid)",
    "cert": "cert — RSA vs ECDSA certificate (when the server holds both; chosen in TLS 1.2)",
    "resumption": "resumption — none vs session ticket vs session ID",
    "client_cert": "client_cert — no client certificate vs RSA vs ECDSA (mutual TLS; the target's)",
}
TLS_LIBRARY_LABELS = {
    "system": "system — Python's ssl on the operating system's OpenSSL",
    "bundled": "bundled — pyOpenSSL on the OpenSSL the cryptography wheel carries (newer)",
}
ARM_LABELS = {
    "plain": "plain — HTTP, keep-alive (baseline)",
    "tls": "tls — HTTPS, keep-alive (one handshake per user)",
    "plain_new": "plain_new — HTTP, new TCP connection per request (control for tls_new)",
    "tls_new": "tls_new — HTTPS, new connection and full handshake per request",
    "tls_resumed": "tls_resumed — HTTPS, new connection per request, session resumption",
    "tls_mtls": "tls_mtls — as tls_new, presenting the target's client certificate (mutual TLS)",
    "h2": "h2 — HTTPS with HTTP/2 (ALPN h2), keep-alive, up to h2_streams requests in flight per connection",
    "h2_new": "h2_new — HTTPS with HTTP/2, new connection and full handshake per request",
    "h2c": "h2c — HTTP/2 over plain TCP (prior knowledge): control that isolates TLS from HTTP/2",
    "h3": "h3 — HTTP/3 over QUIC (UDP, the TLS URL), one connection per user, up to h2_streams in flight",
    "h3_new": "h3_new — HTTP/3, new QUIC connection and full handshake per request",
    "h3_resumed": "h3_resumed — HTTP/3, new QUIC connection per request resuming the previous session",
    "h3_0rtt": "h3_0rtt — HTTP/3, resumed connection per request, the request sent as 0-RTT early data",
}


def _field(default: Any = None, *, description: str = "", **extra: Any) -> Any:
    """A ``RunSpec`` field: pydantic's bounds (``ge``, ``le``, ``gt``, ``max_length``) and the house's
    extras (see the module's docstring)."""
    bounds = {key: extra.pop(key) for key in ("ge", "le", "gt", "lt", "max_length") if key in extra}
    factory = extra.pop("default_factory", None)
    if factory is not None:
        return Field(default_factory=factory, description=description, json_schema_extra=extra, **bounds)
    return Field(default, description=description, json_schema_extra=extra, **bounds)


class PathItem(BaseModel):
    path: str = Field(description="A request target (path and query) starting with /.")
    weight: float = Field(1.0, gt=0, le=1000)


class RunSpec(BaseModel):
    """A run's options, in the run form's order (the tuning fields go last, before "Save as")."""

    model_config = ConfigDict(extra="forbid")

    target_name: str = _field(
        "",
        max_length=200,
        label="Target name",
        help="Optional; defaults to the host, with the port and path when not the defaults.",
        cli="--name",
        custom=True,
    )
    plain_url: str = _field("", max_length=500, label="Plain URL", help="http:// URL", custom=True)
    tls_url: str = _field("", max_length=500, label="TLS URL", help="https:// URL", custom=True)
    arms: list[Literal[ARM_NAMES]] = _field(
        default_factory=lambda: list(ARMS),
        label="Arms",
        description="The arms to run, by name (they run in the canonical order).",
        labels=ARM_LABELS,
        item="arm",
        cli="--arms",
        cli_help="comma-separated arm names",
        overridable=True,
    )
    users: int = _field(
        USERS,
        ge=1,
        description="Virtual users: the concurrent clients of each arm.",
        label="Virtual users",
        cli="--users",
        overridable=True,
        engine=True,
    )
    spawn_rate: float = _field(
        SPAWN_RATE,
        ge=0.1,
        le=1000,
        label="Spawn rate (users/s)",
        description="Users started per second in each arm's warm-up.",
        cli="--spawn-rate",
        overridable=True,
        engine=True,
    )
    warmup_s: float = _field(
        WARMUP_S,
        ge=0,
        label="Warm-up (s)",
        help="Excluded from every statistic.",
        cli="--warmup",
        cli_help="warm-up seconds per arm (not measured)",
        overridable=True,
        engine=True,
    )
    duration_s: float = _field(
        DURATION_S,
        ge=1,
        label="Measured duration per arm (s)",
        help=DURATION_HELP,
        cli="--duration",
        cli_help="measured seconds per arm",
        overridable=True,
        engine={"gt": 0},  # the engine measures any window; tests and benches use sub-second ones
    )
    paths: list[PathItem] = _field(
        default_factory=list,
        label="Paths and weights",
        help="Optional. One request target per line with an optional weight; sent to each arm's host. "
        "Empty: the path of the URLs above.",
        description='Weighted request targets, e.g. [{"path": "/1k", "weight": 2}, "/2k"], or the form\'s '
        'text "/1k 2\\n/2k"; empty: the path of the URLs.',
        form="lines",
        chars=MAX_PATHS_FIELD,
        rows=4,
        placeholder="/1k 1\n/2k 2\n/4k 1\n/logo.png 1",
        overridable=True,
        engine=True,
    )
    headers: dict[str, str] = _field(
        default_factory=dict,
        label="Request headers",
        help="Optional, 'Name: value' per line, ASCII values of at most 8 KiB. Stored encrypted; never "
        "shown again.",
        custom=True,
    )
    auth: dict | None = _field(
        None,
        label="Authentication",
        description='{"type": "basic"|"bearer", "user", "secret"}',
        custom=True,
    )
    headers_over_http: bool = _field(
        False,
        label="Send the headers and credentials over plain HTTP too",
        help="Off: the plain arms (plain, plain_new) cannot run with headers or credentials, which "
        "would travel unencrypted. Tick it only for a test server whose credentials may leak.",
        form_name="send_credentials_over_http",
        cli="--send-credentials-over-http",
        cli_flag=True,
        cli_help="also send the headers and credentials on the plain (http) arms, unencrypted",
        engine=True,
    )
    expected_status: list[int] = _field(
        default_factory=list,
        label="Expected status",
        help="e.g. 200, 204 or 2xx. Empty: any 2xx. Anything else fails the status check.",
        description='Status codes, e.g. [200, 204], or the form\'s text "200, 204, 3xx"; empty: any 2xx.',
        form="text",
        chars=200,
        cli="--expect",
        cli_help="expected status codes, e.g. 200,204 or 2xx (default 2xx)",
        overridable=True,
        engine=True,
    )
    think_time_s: float = _field(
        THINK_TIME_S,
        ge=0,
        le=600,
        label="Think time (s)",
        help="Closed loop only (clear the arrival rate): pause after each request.",
        cli="--think-time",
        cli_help="closed loop only (--closed-loop): seconds each user pauses per request",
        optional=True,
        overridable=True,
        engine=True,
    )
    arrival_rate: float | None = _field(
        ARRIVAL_RATE,
        ge=0.1,
        label="Fixed arrival rate (req/s)",
        help=ARRIVAL_RATE_HELP,
        description="Total requests/s on a fixed schedule (open loop); null: closed loop.",
        cli="--arrival-rate",
        cli_help=f"open loop: total requests/s on a fixed schedule (default {ARRIVAL_RATE:g}, paced well "
        "under what one generator process sustains)",
        overridable=True,
        engine=True,
    )
    rounds: int = _field(
        ROUNDS,
        ge=1,
        label="Rounds",
        help="Arms run interleaved (A B C A B C …); 3 or more give confidence intervals over rounds.",
        cli="--rounds",
        cli_help="interleaved rounds of all arms (A B C A B C …)",
        optional=True,
        overridable=True,
        engine=True,
    )
    follow_redirects: bool = _field(
        True,
        label="Resolve redirects before measuring",
        help="The final URL is measured and the report says so.",
        cli="--no-follow-redirects",
        cli_flag=True,
        cli_help="measure redirects as answered",
        overridable=True,
        engine=True,
    )
    client_cert: dict | None = _field(
        None, label="Client certificate (mutual TLS)", description=clientcerts.RUN_OPTION_HELP, custom=True
    )
    probes: dict | None = _field(
        None,
        label="Server probes",
        description='{"ssh", "openssl_speed", "cryptsetup", "local_process"}',
        custom=True,
    )
    verify_tls: bool = _field(
        True,
        label="Verify TLS certificate",
        help="Untick for self-signed certificates (the demo target).",
        cli="--insecure",
        cli_flag=True,
        cli_help="do not verify the TLS certificate",
        overridable=True,
        engine=True,
    )
    tls_library: Literal[TLS_LIBRARIES] = _field(
        "system",
        label="TLS library",
        help="The generator's TLS for every arm of the run (never mixed within a run): the system "
        "OpenSSL behind Python's ssl, or pyOpenSSL on the newer OpenSSL the cryptography wheel carries. "
        "The report names the library and its version.",
        description="The TLS library of every arm: \"system\" (Python's ssl on the operating system's "
        'OpenSSL) or "bundled" (pyOpenSSL on the cryptography wheel\'s OpenSSL); report key '
        "run.engine.tls_library.",
        labels=TLS_LIBRARY_LABELS,
        cli="--tls-library",
        cli_help="the generator's TLS library for every arm: system (Python's ssl) or bundled "
        "(pyOpenSSL on the cryptography wheel's OpenSSL)",
        optional=True,
        overridable=True,
        engine=True,
    )
    tls_matrix: list[Literal[matrix.DIMENSIONS]] = _field(
        default_factory=list,
        label="TLS configuration matrix",
        help="Repeats tls_new (and h2_new, when it runs) under every combination of the ticked "
        "dimensions, the keep-alive tls and h2 arms, when they run, for the protocol, and h3_new, when it "
        "runs, for the group (QUIC is TLS 1.3 only; the group's key share rides its first flight); each a "
        "sub-arm with its own histograms, CPU and costs. Each variant is probed with one handshake first: "
        "one the server or the generator refuses (an HTTP/2 one that does not get ALPN h2 too) is listed as "
        "refused, not measured. Each adds warm-up + duration per round (all five: up to 162 sub-arms per "
        "new-connection arm).",
        description="TLS configuration matrix: repeat tls_new and h2_new (arms must name one of them) "
        'under each variant of these dimensions, e.g. ["protocol", "cert"] (or "protocol,cert"); '
        "docs/report-schema.md, matrix.",
        labels=DIMENSION_LABELS,
        item="dimension",
        cli="--tls-matrix",
        cli_help="repeat tls_new (and h2_new) under each client-side TLS variant of these dimensions, "
        "comma-separated: "
        "protocol,group,cert,resumption,client_cert (refused variants are listed, not measured)",
        optional=True,
        overridable=True,
        engine=True,
    )
    tls_groups: list[str] = _field(default_factory=list, **matrix.GROUPS_OPTION)  # beside parse_groups
    wan_rtt_ms: list[Annotated[float, Field(ge=0, le=wan.MAX_RTT_MS)]] = _field(
        default_factory=lambda: list(wan.DEFAULT_RTTS_MS),
        label="WAN projection RTTs (ms)",
        help="Round-trip times the report projects each arm's time to last byte at, e.g. 2,20,80,200.",
        description="RTTs (ms) of the report's WAN projection, at most 8, each 0–2000, e.g. "
        '[2, 20, 80, 200] (the default); or "2,20,80,200".',
        form="text",
        chars=100,
        cli="--wan-rtt",
        cli_help="RTTs in ms for the report's WAN projection, comma-separated (default 2,20,80,200)",
        overridable=True,
    )
    h2_streams: int = _field(
        1,
        ge=1,
        le=MAX_H2_STREAMS,
        label="HTTP/2 and HTTP/3 streams per connection",
        help="The h2, h2c and h3 arms: how many of a user's requests may be in flight at once on its one "
        "connection (on HTTP/2 never more than the server's SETTINGS_MAX_CONCURRENT_STREAMS). 1 keeps "
        "the load "
        "like for like with the HTTP/1.1 arms; in a closed loop each stream is one more request in "
        "flight.",
        description="Requests in flight per user on its HTTP/2 or HTTP/3 connection (h2, h2c, h3 arms), "
        "1–100; on HTTP/2 the server's SETTINGS_MAX_CONCURRENT_STREAMS caps it (validity check http2).",
        cli="--h2-streams",
        cli_help="h2/h2c/h3 arms: requests in flight per user on its one HTTP/2 or HTTP/3 connection "
        "(default 1)",
        optional=True,
        overridable=True,
        engine=True,
    )
    generators: int | Literal["auto"] = _field(
        1,
        label="Generator processes",
        help="Locust worker processes per generator host: a number, or auto (one per core of each "
        "generator host). Above 1 the run's engine is a Locust master whose workers' histograms are "
        "merged exactly; see docs/scaling.md. The TLS matrix runs with 1.",
        description="Locust worker processes per generator host: 1 (the default), up to the operator "
        'limit, or "auto" (one per core of each generator host; 0 in run.config). docs/scaling.md.',
        form="text",
        chars=8,
        cli="--generators",
        cli_help="Locust worker processes per generator host: N, or auto (one per core); above 1 the "
        "engine runs Locust's master/worker mode and merges the workers' histograms exactly "
        "(docs/scaling.md)",
        overridable=True,
        engine={"type": "int", "ge": 0, "le": MAX_GENERATORS},  # the engine's "auto" is 0
    )
    saturation: dict | None = _field(
        None,
        label="Saturation search",
        description='Saturation search after the arms: {"arms": ["plain", "tls_new"], "mode": '
        '"users"|"rate", "start", "max", "stage_s"} (arms must be among the run\'s; or a list of arms; '
        "null: none). docs/report-schema.md, capacity.",
        custom=True,
        overridable=True,
        engine=True,
    )


def options(spec: type[BaseModel] = RunSpec) -> dict[str, Option]:
    """The fields of ``spec`` (``RunSpec``, or a copy with more fields in a test), in order."""
    return spec_options(spec)


OPTIONS = options()
KEYS = tuple(OPTIONS)
# A webhook or an API call on a saved scenario may change how it loads the target, never what it
# targets or which secrets it sends.
OVERRIDABLE = tuple(name for name, opt in OPTIONS.items() if opt.overridable)
ENGINE_KEYS = tuple(name for name, opt in OPTIONS.items() if opt.engine)


def defaults(spec: type[BaseModel] = RunSpec) -> dict[str, Any]:
    """Each field's default (the form's initial values and the CLI's defaults)."""
    return {name: opt.default for name, opt in spec_options(spec).items()}


def parse_generators(value: object) -> int:
    """``generators`` from a form, CLI or API value: a number of processes, or "auto" (0: one per core
    of each generator host)."""
    text = str(value).strip().lower()
    if text == "auto":
        return 0
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"generators must be a number or 'auto', got {value!r}") from None
    if not 1 <= number <= MAX_GENERATORS:
        raise ValueError(f"generators must be 1..{MAX_GENERATORS} or 'auto'")
    return number
