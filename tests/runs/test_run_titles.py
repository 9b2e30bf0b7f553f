"""A run given its own paths is titled by them wherever its title is shown (run page, runs list,
compare, the shared page, the share lists), not by the path of its target's URL."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from portal.runs.models import Run
from portal.sharing import services
from portal.targets.models import Target
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

PATHS = [{"path": p, "weight": w} for p, w in (("/1k", 1), ("/2k", 2), ("/4k", 1), ("/logo.png", 1))]
TITLE = "127.0.0.1:2 · /1k, /2k, /4k, /logo.png"


def test_a_mixed_path_run_is_titled_by_its_paths_everywhere(client, owner):
    mixed = make_run(owner, target_name="1k")  # http://127.0.0.1:1/1k, https://127.0.0.1:2/1k
    # Named as the run form names a target by default: after its URL, path included.
    Target.objects.filter(pk=mixed.target_id).update(name="127.0.0.1:2/1k")
    Run.objects.filter(pk=mixed.pk).update(config={**mixed.config, "paths": PATHS})
    plain = make_run(owner, target_name="1k")  # the same target, on the URLs' own path
    client.force_login(owner)

    detail = client.get(reverse("runs-detail", args=[mixed.code])).content.decode()
    assert f"<h1>{TITLE} <span" in detail and f"<title>{TITLE}, run of" in detail
    assert (
        "<h1>127.0.0.1:2/1k <span" in client.get(reverse("runs-detail", args=[plain.code])).content.decode()
    )
    # The list lets a name break after a "/" or at a space only, never inside an address: each part
    # in a span that does not wrap, <wbr> after each "/".
    listed = client.get(reverse("runs-list")).content.decode()
    assert '<span class="nobr">127.0.0.1:2</span>' in listed
    listed = re.sub(r'<span class="nobr">|</span>|<wbr>', "", listed)
    assert listed.count(TITLE) == 1 and ">127.0.0.1:2/1k</a>" in listed
    compare = client.get(f"{reverse('runs-compare')}?runs={mixed.code},{plain.code}").content.decode()
    assert f"{TITLE} · " in compare

    _, token = services.create_share(owner, run=mixed)
    shared = client.get(f"/s/{token}/").content.decode()
    assert f"<h1>{TITLE} <span" in shared
    assert f"({TITLE})" in client.get(reverse("sharing-list")).content.decode()
