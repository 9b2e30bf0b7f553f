"""One delivery: every signed outbound POST (run callbacks, alerts to a callback or an incoming
webhook) goes through ``portal/delivery.py`` with its one retry rule, and every delivery log has its
one shape. The deliveries themselves are tested against real local receivers in tests/hooks
(callbacks: retries, give-up, signatures, outbound refusal) and tests/alerts."""

from __future__ import annotations

import ast

from portal import delivery
from portal.alerts.models import AlertDelivery
from portal.hooks.models import CallbackDelivery
from tests.conftest import ROOT

SENDER = "portal/delivery.py"


def _calls(rel: str) -> list[str]:
    """Where the module uses ``webhooks.post`` or ``webhooks.signed_headers``."""
    return [
        f"{rel}:{node.lineno} webhooks.{node.attr}"
        for node in ast.walk(ast.parse((ROOT / rel).read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("post", "signed_headers")
        and isinstance(node.value, ast.Name)
        and node.value.id == "webhooks"
    ]


def test_no_module_but_the_sender_posts_or_signs_outbound():
    assert len(_calls(SENDER)) == 2  # the scan sees the sender's own calls
    found = []
    for path in sorted([*(ROOT / "portal").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]):
        rel = str(path.relative_to(ROOT))
        if rel != SENDER and not rel.startswith("portal/lib/"):
            found += _calls(rel)
    assert found == []


def test_every_delivery_log_has_the_one_shape():
    shape = {f.name for f in delivery.Attempt._meta.get_fields()}
    for model in (AlertDelivery, CallbackDelivery):
        assert issubclass(model, delivery.Attempt)
        assert shape <= {f.name for f in model._meta.get_fields()}
        assert model.Status is delivery.Status
