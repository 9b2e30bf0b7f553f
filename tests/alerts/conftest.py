"""A scenario with a pinned baseline and a second run whose keep-alive TLS cost is far dearer, from
stored runs (no load): judged a regression in milliseconds."""

from __future__ import annotations

import pytest

from portal.runs import services
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from tests.hooks.conftest import (  # noqa: F401 - fixtures: a receiver with set answers, a real worker
    callback_receiver,
    hooks_worker,
)
from tests.runs.factories import make_run


@pytest.fixture
def judged(owner):
    """(scenario, baseline, run): ``run`` not judged yet."""
    baseline = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100}, seconds=6)
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [900] * 100}, seconds=6)
    scenario = Scenario.objects.create(project=run.project, target=run.target, name="nightly")
    Run.objects.filter(pk__in=[baseline.pk, run.pk]).update(scenario=scenario, scenario_version=1)
    services.pin_baseline(baseline)
    return scenario, baseline, run
