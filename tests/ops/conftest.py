"""Fixtures of the operations tests: staff and non-staff users, workers as they report themselves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.runs.models import WorkerSeen


def seen(name: str, host: str, queues: list[str], ago_s: float = 1.0, stopping: bool = False) -> WorkerSeen:
    """A worker's presence row as workers/presence.py writes it, ``ago_s`` seconds old."""
    return WorkerSeen.objects.create(
        name=name,
        host=host,
        pid=1,
        queues=queues,
        last_seen=timezone.now() - timedelta(seconds=ago_s),
        stopping=stopping,
    )


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("operator", password="operator-pass-123", is_staff=True)
