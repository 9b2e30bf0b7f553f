"""Validity checks: would an auditor accept these numbers? Each check says pass, warn, fail or skip,
why, and which arms it is about.

Pure functions over the report's arm sections (``portal.lib.report.report.arm_section``) and the run's
config, recomputed on every read, so a threshold change re-judges old runs too. Each result is
``{"check", "status": "pass"|"warn"|"fail"|"skip", "detail", "evidence", "arms", "findings"}``
(``verdict.result``): ``skip`` when the check could not judge (too short, no new connections, …:
``detail`` says why), never ``pass``; ``detail`` is one or two plain sentences, ``evidence`` the
numbers behind them (per arm); ``findings`` the problems one by one, each naming its arms (one, or a
compared pair) with its own status, so a cost is judged only on its own arms. Thresholds are
constants of the module that holds their check and are documented in docs/report-schema.md.

* ``answers``: what the server answered (status codes, errors, redirects, auth), whether an arm is
  valid at all (``invalid_arm``), and what a run none of whose arms is valid got instead of the page
  (``measured_nothing``);
* ``connections``: whether each arm's connections behaved as its name says (keep-alive connections
  the server closed, TLS sessions resumed or not);
* ``content``: what the pages were (body sizes within an arm, the same content across compared arms);
* ``http2``: what the HTTP/2 arms' connections and streams did (ALPN, streams reset or refused,
  GOAWAY, the server's stream limit against the streams asked);
* ``http3``: what the HTTP/3 arms' QUIC connections did (loss, version or Retry changes, 0-RTT
  refused, streams reset, ALPN, the generator's saturation under QUIC's client work);
* ``measurement``: the measurement itself (generator saturation, arrival rate, sample size, drift,
  SYN retransmissions).
"""

from __future__ import annotations

from portal.lib.validity.answers import (
    check_auth,
    check_errors,
    check_redirect,
    check_status_codes,
    expected_label,
    invalid_arm,
    measured_nothing,
)
from portal.lib.validity.connections import check_keepalive, check_tls_sessions
from portal.lib.validity.content import check_content_length, check_same_content
from portal.lib.validity.http2 import check_http2
from portal.lib.validity.http3 import check_http3
from portal.lib.validity.measurement import (
    check_drift,
    check_generator,
    check_sample_size,
    check_schedule,
    check_syn_retransmit,
)

# ``expected_label`` is re-exported for the run page (``portal.runs.views``).
__all__ = ["check_all", "expected_label", "invalid_arm", "measured_nothing"]


def check_all(config: dict, arms: dict[str, dict], tls_info: dict | None = None) -> list[dict]:
    if not arms:
        return []
    checks = [
        check_status_codes(config, arms),
        check_errors(arms),
        check_content_length(arms),
        check_same_content(arms),
        check_generator(config, arms),
        check_schedule(config, arms),
        check_sample_size(arms),
        check_drift(arms),
        check_syn_retransmit(arms),
        check_redirect(config, arms),
        check_auth(config, arms),
        check_tls_sessions(arms),
        check_keepalive(arms),
        check_http2(config, arms),
        check_http3(arms),
    ]
    return [check for check in checks if check is not None]
