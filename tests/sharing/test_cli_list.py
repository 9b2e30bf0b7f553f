"""``tollgate share list`` says which run or compare each link shows: the run's title (its target,
and the paths of a mixed-path run), start and id, or a compare's runs in their order — in text and
in ``--json``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from portal.runs.models import Run
from portal.sharing import services

pytestmark = pytest.mark.django_db

PATHS = [{"path": p, "weight": 1} for p in ("/1k", "/2k", "/4k", "/logo.png")]
MIXED = "shop · /1k, /2k, /4k, /logo.png"  # the target "shop" (named by the user), then the paths


def listing(*args: str) -> str:
    out = StringIO()
    call_command("tollgate", "share", "list", *args, stdout=out)
    return out.getvalue()


def test_each_link_names_the_run_or_the_compare_it_shows(team):
    owner = team["users"]["owner"]
    first, second = team["runs"]
    mixed = Run.objects.get(pk=second.pk)
    mixed.config = {**mixed.config, "paths": PATHS}
    mixed.save(update_fields=["config"])
    run_link, _ = services.create_share(owner, run=first, note="Q3 audit")
    compare_link, _ = services.create_share(owner, runs=[mixed, first])

    rows = {row["id"]: row for row in json.loads(listing("--json"))}
    assert rows[str(run_link.code)]["shows"] == [
        {"id": str(first.code), "title": "shop", "created": first.created.isoformat()}
    ]
    assert rows[str(compare_link.code)]["shows"] == [
        {"id": str(mixed.code), "title": MIXED, "created": mixed.created.isoformat()},
        {"id": str(first.code), "title": "shop", "created": first.created.isoformat()},
    ]

    text = listing()
    lines = text.splitlines()
    at = {line.split()[0]: i for i, line in enumerate(lines) if not line.startswith(" ")}
    run_line = lines[at[str(run_link.code)] + 1]
    assert run_line == f"    shows the run shop, {first.created:%Y-%m-%d %H:%M} UTC (run {first.code})"
    compare_line = lines[at[str(compare_link.code)] + 1]
    assert compare_line.startswith(f"    shows a compare of 2 runs: 1. {MIXED}, ")
    assert (
        compare_line.index(str(mixed.code))
        < compare_line.index("2. shop, ")
        < compare_line.index(str(first.code))
    )

    # A run of the compare deleted since: the link still says what it showed, and that it is gone.
    gone = str(mixed.code)
    mixed.delete()
    rows = {row["id"]: row for row in json.loads(listing("--json"))}
    assert rows[str(compare_link.code)]["shows"][0] == {"id": gone, "title": None, "created": None}
    assert f"1. a deleted run ({gone}); 2. shop" in listing()
