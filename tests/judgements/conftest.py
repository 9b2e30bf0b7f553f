from __future__ import annotations

from tests.hooks.conftest import callback_receiver  # noqa: F401 - a fixture: a local receiver with set answers
from tests.schedules.conftest import maintenance_queue  # noqa: F401 - a fixture: the broker's queues, emptied
