"""Pruning the logs callers can grow (``TOLLGATE_LOG_RETENTION_DAYS``): refused webhook deliveries
and share-link views. Accepted deliveries stay (a replayed GitHub delivery is recognised by them);
a link keeps its view count and last view when its old views go."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from portal.hooks.models import WebhookDelivery
from portal.sharing.models import ShareView

ACCEPTED = (200, 202)


def prune_logs(now=None) -> dict[str, int]:
    """Delete what is older than the retention; returns how many rows of each log went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.TOLLGATE_LOG_RETENTION_DAYS)
    deliveries, _ = (
        WebhookDelivery.objects.filter(received_at__lt=cutoff).exclude(status_code__in=ACCEPTED).delete()
    )
    views, _ = ShareView.objects.filter(at__lt=cutoff).delete()
    return {"webhook_deliveries": deliveries, "share_views": views}
