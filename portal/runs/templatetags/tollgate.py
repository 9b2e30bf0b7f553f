"""Number formatting for reports: values are stored in µs, shown in ms with 2 decimals."""

from __future__ import annotations

import json
import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from portal.lib.report import answers, metrics
from portal.lib.stats import verdicts
from portal.lib.stats.costs import UNCONFIRMED
from portal.lib.tls import clientcerts, tlswords
from portal.targets import naming

register = template.Library()


@register.filter
def client_cert_method(config) -> str:
    """The method's line on client certificates (``portal.lib.tls.clientcerts.method_text``)."""
    return clientcerts.method_text(config or {})


@register.filter
def ms(value_us) -> str:
    if value_us is None or value_us == "":
        return "—"
    return f"{value_us / 1000:.2f}"


@register.filter
def has_hybrid(advice) -> bool:
    """Whether an advice list prices a post-quantum hybrid (portal.lib.tls.advice.hybrid_cost)."""
    return any(item.get("hybrid") for item in advice or [])


@register.filter
def magnitude(value):
    """The absolute value, for sentences that say "more" or "less" themselves."""
    return None if value is None else abs(value)


@register.filter
def signed_ms(value_us) -> str:
    if value_us is None:
        return "—"
    return f"{value_us / 1000:+.2f}"


@register.filter
def cpu_ms(value) -> str:
    """CPU-ms to three significant digits with the unit: ``2.24 CPU-ms`` (never ``2.241767``)."""
    if value is None or value == "":
        return "—"
    return f"{answers.cpu_text(value, signed=False)} CPU-ms"


_NAME_BREAKS = re.compile(r"(/| )")
_ADDRESS = re.compile(r"^\(?[0-9.:\[\]a-fA-F]+\)?$")  # an IP address (and port): never broken
LONG_HOST = 24
_QUOTED = re.compile(r"`([^`\n]+)`")


@register.filter(needs_autoescape=False)
def prose(text) -> str:
    """Text written for a terminal (an error, a refusal) as HTML: escaped, its `quoted` parts as
    ``<code>`` (never a Markdown backtick on a page)."""
    if text is None:
        return ""
    return mark_safe(_QUOTED.sub(r"<code>\1</code>", escape(str(text))).replace("`", ""))  # noqa: S308


@register.filter
def cost_words(name: str) -> str:
    """A cost's name as the answer table asks it (``portal.lib.report.answers.QUESTIONS``): ``keepalive_tls``
    → "TLS on warm (keep-alive) connections"; an undeclared name with spaces for its underscores."""
    return answers.WORDS.get(name) or str(name).replace("_", " ")


@register.filter
def breakable(name) -> str:
    """A target's name as HTML that a narrow column breaks between its parts (after a ``/``, at its
    spaces, and in a host name longer than ``LONG_HOST`` characters after its dots), never inside an
    address or before its port: ``127.0.0.1:8443`` and ``example.com:8443`` stay whole."""
    html = []
    for part in _NAME_BREAKS.split(str(name or "")):
        if not part or _NAME_BREAKS.fullmatch(part):
            html.append(escape(part) + ("<wbr>" if part == "/" else ""))
            continue
        pieces = [part]
        if len(part) > LONG_HOST and not _ADDRESS.match(part):
            labels = part.split(".")  # the last two ("example.com:8443") stay together
            pieces = (
                [f"{label}." for label in labels[:-2]] + [".".join(labels[-2:])]
                if len(labels) > 2
                else pieces
            )
        html.append("<wbr>".join(f'<span class="nobr">{escape(piece)}</span>' for piece in pieces))
    return mark_safe("".join(html))  # noqa: S308 - every part escaped above


@register.filter
def tls_words(text) -> str:
    """A TLS library's text of a failed handshake in words (``portal.lib.tls.tlswords.reword``); other
    text as it is."""
    return tlswords.reword(text or "")


@register.filter
def refusal(reason: str, arm: str) -> str:
    """A refused arm's reason without the "<arm> refused: " the engine starts it with (the page
    names the arm already)."""
    return (reason or "").removeprefix(f"{arm} refused: ")


@register.filter
def any_cpu(rows) -> bool:
    """Whether any answer has a server CPU figure (else the table leaves the column out)."""
    return any(row.get("server_cpu") for row in rows or ())


@register.filter
def unconfirmed_any(rows) -> bool:
    """Whether any answer (``portal.lib.report.answers``) or cost is unconfirmed: measured without an
    interval."""
    return any(row.get("unconfirmed") for row in rows or ())


@register.simple_tag
def unconfirmed_reason() -> str:
    """Why a cost without an interval has no verdict (``portal.lib.stats.costs.UNCONFIRMED``)."""
    return UNCONFIRMED


@register.filter
def signed_pct(value) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}%"


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


EVIDENCE_KEYS_SHOWN = 6


@register.filter
def with_evidence(checks) -> list:
    """The validity checks that carry evidence (templates/runs/_report.html's evidence section)."""
    return [check for check in checks or [] if check.get("evidence")]


@register.filter
def evidence_summary(value) -> str:
    """The line a collapsed evidence block shows: what it is about (its keys, mostly arm names) and
    how long its JSON is, e.g. ``plain, tls, tls_new · 14 lines of JSON``."""
    lines = pretty_json(value).count("\n") + 1
    if isinstance(value, dict) and value:
        keys = [str(key) for key in sorted(value, key=str)]
        about = ", ".join(keys[:EVIDENCE_KEYS_SHOWN])
        if len(keys) > EVIDENCE_KEYS_SHOWN:
            about += f" and {len(keys) - EVIDENCE_KEYS_SHOWN} more"
    elif isinstance(value, list):
        about = f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
    else:
        about = "one value"
    return f"{about} · {lines} line{'' if lines == 1 else 's'} of JSON"


@register.filter
def split(value: str) -> list[str]:
    return value.split()


@register.filter
def cost(costs, name: str):
    """The entry named ``name`` of a list of costs (a run summary's), or None."""
    return next((c for c in costs or [] if c.get("name") == name), None)


@register.filter
def verdict_words(cost: dict) -> dict:
    """How a cost's verdict reads and is coloured, with its direction (``verdicts.verdict_words``):
    templates/runs/_verdict.html."""
    return verdicts.verdict_words(cost)


@register.filter
def run_title(run, label: str | None = None) -> str:
    """``{{ run|run_title:target_label }}``: the run's target label, with its paths when it was given
    its own (``portal.targets.naming.run_title``)."""
    return naming.run_title(run, label)


@register.filter
def ms3(value_us) -> str:
    """ms with µs precision."""
    if value_us is None or value_us == "":
        return "—"
    return f"{value_us / 1000:.3f}"


@register.filter
def index(sequence, i: int):
    try:
        return sequence[i]
    except (IndexError, TypeError, KeyError):
        return None


@register.filter
def cpu_delta(value_ms, base_ms) -> str:
    """Server CPU-ms per request against the base arm: ``+0.1234 (+56.7%)``."""
    if value_ms is None or base_ms is None:
        return "—"
    delta = value_ms - base_ms
    pct = f" ({100.0 * delta / base_ms:+.1f}%)" if base_ms else ""
    return f"{delta:+.4f}{pct}"


@register.filter
def mbps(bytes_per_s) -> str:
    """Bytes/s as MB/s (10^6), one decimal, as openssl speed's own table (which prints 1000s of bytes)."""
    if bytes_per_s is None:
        return "—"
    return f"{bytes_per_s / 1e6:.1f}"


@register.filter
def block_sizes(ciphers: dict) -> list[str]:
    """The block sizes (column heads) of an openssl speed cipher table."""
    return list(next(iter(ciphers.values()), {}).keys()) if ciphers else []


@register.filter
def metric_label(metric: str) -> str:
    """``ttlb_p50_us`` → ``time to last byte, median (ms)``."""
    return metrics.label(metric)


@register.filter
def metric_value(value, metric: str) -> str:
    """A stored value in the unit its metric is shown in, with the unit: ``1.23 ms``."""
    return metrics.with_unit(value, metric)


@register.filter
def metric_delta(value, metric: str) -> str:
    """A signed difference with its unit: ``+1.23 ms``."""
    return metrics.with_unit(value, metric, signed=True)


@register.filter
def metric_ci(ci95, metric: str) -> str:
    """A 95% interval with its unit: ``+0.07 … +0.09 ms``."""
    return metrics.interval(ci95, metric)


@register.filter
def ci_method(method: str) -> str:
    """What a 95% interval was bootstrapped over, in words: ``per_second`` → ``seconds``."""
    return metrics.CI_METHODS.get(method, method)


@register.inclusion_tag("_error_summary.html")
def error_summary(*forms) -> dict:
    """The errors of ``forms`` at the top of the page, each field's error a link to its field (by the
    id Django gives it, e.g. ``#id_users``); ``static/js/error_summary.js`` moves the focus there."""
    items = []
    for form in forms:
        if form is None or not form.is_bound or not form.errors:
            continue
        items += [{"text": error} for error in form.non_field_errors()]
        for field in form:
            # Hidden fields have nothing to type into: their errors read as the form's own.
            href = "" if field.is_hidden or not field.auto_id else f"#{field.auto_id}"
            label = "" if field.is_hidden else field.label
            items += [{"text": error, "label": label, "href": href} for error in field.errors]
    return {"items": items}


@register.filter
def by_answer(rows) -> dict:
    """The TLS facts' candidates (``groups``, ``signature_algorithms``) by the server's answer:
    ``{"accepted": [...], "refused": [...], "not_asked": [...]}`` (``accepted`` None: not asked)."""
    out: dict[str, list] = {"accepted": [], "refused": [], "not_asked": []}
    for row in rows or ():
        answer = row.get("accepted")
        out["accepted" if answer else "not_asked" if answer is None else "refused"].append(row)
    return out
