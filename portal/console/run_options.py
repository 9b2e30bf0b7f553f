"""The options of ``manage.py tollgate run`` and how form errors map back to them."""

from __future__ import annotations

import os

from django.core.management.base import CommandError, CommandParser

from portal.lib.runs import runspec
from portal.lib.tls.clientcerts import MAX_PEM_CHARS

# The options made from portal.lib.runs.runspec (those with a ``cli`` and no hand-written form field);
# --path, the URLs, credentials, probes and the saturation search are written below by hand.
SPEC_OPTIONS = {key: opt for key, opt in runspec.OPTIONS.items() if opt.cli and opt.kind != "custom"}
TUNING = ("tls_matrix", "tls_groups", "wan_rtt_ms", "generators")  # the "TLS configuration matrix, WAN" group
# Form fields → the options that fill them, so an error names what the user typed.
RUN_OPTIONS = {
    **{opt.form_name: opt.cli for opt in SPEC_OPTIONS.values()},
    "target_name": "--name",
    "paths": "--path",
    "headers": "--header",
    "auth_type": "--basic-auth-env/--bearer-env",
    "auth_user": "--basic-auth-env",
    "auth_secret": "--basic-auth-env/--bearer-env",
    "probe_server": "--ssh-host",
    "client_cert_pem": "--client-cert/--client-key",
    "saturation_arms": "--saturation",
    "saturation_mode": "--saturation-mode",
    "saturation_start": "--saturation-start",
    "saturation_max": "--saturation-max",
    "saturation_stage_s": "--saturation-stage",
    "__all__": "options",
}
SSH_OPTIONS = {
    "host": "--ssh-host",
    "port": "--ssh-port",
    "username": "--ssh-user",
    "private_key": "--ssh-key",
    "known_hosts": "--ssh-known-hosts",
    "__all__": "--ssh-*",
}


def problems(form, names: dict[str, str]) -> str:
    """A form's errors in one line, each under the option that filled the field."""
    names = {"__all__": "target", **names}
    return "; ".join(
        f"{names.get(field, '--' + field.replace('_', '-'))}: {' '.join(errors)}"
        for field, errors in form.errors.items()
    )


def _default_text(value) -> str:
    """A list default as the CLI takes it: comma-separated."""
    if isinstance(value, list):
        return ",".join(f"{item:g}" if isinstance(item, float) else str(item) for item in value)
    return "" if value is None else str(value)


def add_spec_argument(parser, opt: runspec.Option) -> None:
    """One option of ``portal.lib.runs.runspec``: its flag, type, default and help."""
    if opt.extra.get("cli_flag"):
        parser.add_argument(opt.cli, action="store_true", help=opt.extra.get("cli_help"))
        return
    kind = {"int": int, "float": float}.get(opt.kind)
    default = opt.default if kind else _default_text(opt.default)
    parser.add_argument(opt.cli, type=kind or str, default=default, help=opt.extra.get("cli_help"))


def spec_values(options: dict) -> dict:
    """The form values of the spec's options (form names) from the parsed options; a flag flips its
    field's default, ``--closed-loop`` clears the arrival rate."""
    values = {}
    for key, opt in SPEC_OPTIONS.items():
        value = options.get(opt.cli.removeprefix("--").replace("-", "_"))
        if opt.extra.get("cli_flag"):
            value = (not opt.default) if value else opt.default
        elif opt.kind == "choices":
            value = [item.strip() for item in (value or "").split(",") if item.strip()]
        if value is None and key in TUNING:  # scenario create may lack the tuning group
            value = opt.default
        values[opt.form_name] = value
    if options.get("closed_loop"):
        values["arrival_rate"] = ""
    return values


def add_run_arguments(run: CommandParser) -> None:
    run.add_argument("--plain-url", default="")
    run.add_argument("--tls-url", default="")
    # The defaults are the run form's (portal/lib/runs/runspec.py): a paced open loop.
    loop = run.add_mutually_exclusive_group()
    for key, opt in SPEC_OPTIONS.items():
        if key not in TUNING:
            add_spec_argument(loop if key == "arrival_rate" else run, opt)
    loop.add_argument(
        "--closed-loop",
        action="store_true",
        help="each user sends as fast as it can (plus --think-time): finds throughput limits, but often "
        "saturates the generator",
    )
    run.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="'PATH [WEIGHT]'",
        help="request target sent to each arm's host, repeatable: --path /1k --path '/4k 2'",
    )
    run.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'", help="repeatable")
    run.add_argument(
        "--basic-auth-env",
        metavar="VAR",
        help="environment variable holding USER:PASSWORD for pre-emptive Basic auth (kept out of argv)",
    )
    run.add_argument("--bearer-env", metavar="VAR", help="environment variable holding a bearer token")
    run.add_argument(
        "--client-cert",
        metavar="FILE",
        help="client certificate (PEM, leaf first) for mutual TLS: stored encrypted on the target, "
        "presented by the tls_mtls arm and the client_cert matrix dimension; with --client-key",
    )
    run.add_argument("--client-key", metavar="FILE", help="the client certificate's private key (PEM)")
    run.add_argument(
        "--mtls-url",
        metavar="URL",
        help="where the server asks for a client certificate, when not at --tls-url (another port or "
        "name): stored on the target, the tls_mtls arm goes there (empty: back to the TLS URL)",
    )
    run.add_argument("--owner", default="", help="username starting the run (default: first superuser)")
    run.add_argument("--project", default="", help="project of the run (default: the user's personal one)")
    run.add_argument(
        "--name", default="", help="target name (default: the host, with port and path when not the defaults)"
    )
    run.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="repeatable: a limit judged on the report, e.g. keepalive_tls_p50_ms=2 (docs/budgets.md); "
        "exit code 3 when one fails",
    )
    run.add_argument("--json", action="store_true", help="print the report JSON on stdout")


def add_probe_arguments(probe) -> None:
    probe.add_argument("--ssh-host", help="the server to probe (stored, key encrypted, on the target)")
    probe.add_argument("--ssh-port", type=int, default=22)
    probe.add_argument("--ssh-user", default="")
    probe.add_argument("--ssh-key", metavar="FILE", help="private key file (unencrypted OpenSSH/PEM)")
    probe.add_argument(
        "--ssh-known-hosts", metavar="FILE", help="OpenSSH known_hosts file pinning the host key"
    )
    probe.add_argument("--server-process", default="", help="process name to sample, e.g. nginx")
    probe.add_argument("--openssl-speed", action="store_true", help="run openssl speed on the server")
    probe.add_argument("--cryptsetup", action="store_true", help="run cryptsetup benchmark on the server")
    probe.add_argument("--local-process", default="", help="also sample this process on the generator host")


def auth_from_env(options: dict) -> dict:
    """The run form's auth fields from --basic-auth-env / --bearer-env: credentials come from the
    environment, never from argv (visible in ps and shell history)."""
    if options.get("basic_auth_env"):
        value = os.environ.get(options["basic_auth_env"])
        if not value or ":" not in value:
            raise CommandError(f"--basic-auth-env: ${options['basic_auth_env']} must hold USER:PASSWORD")
        user, _, password = value.partition(":")
        return {"auth_type": "basic", "auth_user": user, "auth_secret": password}
    if options.get("bearer_env"):
        value = os.environ.get(options["bearer_env"])
        if not value:
            raise CommandError(f"--bearer-env: ${options['bearer_env']} is empty or not set")
        return {"auth_type": "bearer", "auth_secret": value}
    return {"auth_type": "none"}


def client_cert_files(options: dict) -> dict:
    """The run form's client-certificate fields from --client-cert / --client-key (files: a key never
    goes on the command line)."""
    cert, key = options.get("client_cert"), options.get("client_key")
    if not cert and not key:
        return {}
    if not (cert and key):
        raise CommandError("--client-cert and --client-key go together")
    texts = {}
    for flag, path, field in (
        ("--client-cert", cert, "client_cert_pem"),
        ("--client-key", key, "client_key_pem"),
    ):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts[field] = handle.read(MAX_PEM_CHARS + 1)
        except OSError as exc:
            raise CommandError(f"{flag}: cannot read {path}: {exc.strerror}") from None
    return texts


def add_tuning_arguments(run: CommandParser) -> None:
    """The TLS configuration matrix, the WAN projection's RTTs and the generator processes."""
    for key in TUNING:
        add_spec_argument(run, SPEC_OPTIONS[key])


def add_saturation_arguments(parser) -> None:
    """``tollgate run`` and ``scenario create``: the saturation search (capacity, issue 15)."""
    parser.add_argument(
        "--saturation",
        nargs="?",
        const="*",
        default="",
        metavar="ARMS",
        help="after the arms, search the capacity of these arms (comma-separated; alone: every arm of the "
        "run) in stages of rising load until the knee",
    )
    parser.add_argument(
        "--saturation-mode", choices=("users", "rate"), default="users", help="step users or req/s"
    )
    parser.add_argument("--saturation-start", type=float, default=None, help="first stage's load (default 1)")
    parser.add_argument("--saturation-max", type=float, default=None, help="highest load (default 64)")
    parser.add_argument("--saturation-stage", type=float, default=None, help="seconds measured per stage (2)")


def saturation_fields(options: dict, arms: list[str]) -> dict:
    """The run form's ``saturation_*`` fields from the options (no search: none ticked)."""
    chosen = options.get("saturation") or ""
    names = arms if chosen == "*" else [arm.strip() for arm in chosen.split(",") if arm.strip()]
    values = {"start": options.get("saturation_start"), "max": options.get("saturation_max")}
    values["stage_s"] = options.get("saturation_stage")
    return {
        "saturation_arms": names,
        "saturation_mode": options.get("saturation_mode") or "users",
        **{f"saturation_{key}": "" if value is None else value for key, value in values.items()},
    }


def saturation_json(options: dict, arms: list[str]) -> dict | None:
    """The API's ``saturation`` object from the options (``scenario create``); None without a search."""
    fields = saturation_fields(options, arms)
    if not fields["saturation_arms"]:
        return None
    out = {"arms": fields["saturation_arms"], "mode": fields["saturation_mode"]}
    out.update(
        {key: options[f"saturation_{key}"] for key in ("start", "max") if options.get(f"saturation_{key}")}
    )
    if options.get("saturation_stage"):
        out["stage_s"] = options["saturation_stage"]
    return out
