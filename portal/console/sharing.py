"""``tollgate share create|revoke|list``: share links from the command line (CI set-up, operators).
Errors are ``CommandError`` with one line (exit 1).

    tollgate share create --run ID [--days N] [--note T] [--user U] [--json]   → {"url", "expires_at", "id"}
    tollgate share revoke URL_OR_ID [--user U]
    tollgate share list [--run ID] [--json]   → each link, and under it the run or compare it shows

``--user`` acts as that user, with their role in the run's project (member or owner creates; the
creator or an owner revokes); without it a link is created in the name of the run's owner and
revoked as the operator. URLs are built on TOLLGATE_BASE_URL."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.console.projects import user_named
from portal.runs.models import Run
from portal.sharing import services
from portal.sharing.models import ShareLink
from portal.targets.naming import run_title

ACTIONS: tuple[str, ...] = ("share",)


def add_arguments(sub) -> None:
    share = sub.add_parser("share", help="read-only share links of a run's report (create, revoke, list)")
    actions = share.add_subparsers(dest="share_action", required=True)
    create = actions.add_parser("create", help="a new link to a run's report; prints it once")
    create.add_argument("--run", required=True, help="the run's id (its UUID, as in its URL)")
    create.add_argument("--days", type=int, default=None, help="days until it expires (default 30)")
    create.add_argument("--note", default="", help='what it is for, e.g. "Q3 audit, PCI 4.1" (≤ 200 chars)')
    create.add_argument("--user", default="", help="create it as this user (default: the run's owner)")
    create.add_argument("--json", action="store_true", help='print {"url", "expires_at", "id"}')
    revoke = actions.add_parser("revoke", help="revoke a link, by its URL or its id")
    revoke.add_argument("link", metavar="URL_OR_ID")
    revoke.add_argument("--user", default="", help="revoke as this user (default: as the operator)")
    listing = actions.add_parser("list", help="links with their views (all, or one run's)")
    listing.add_argument("--run", default="", help="only this run's links")
    listing.add_argument("--json", action="store_true")


def _run(code: str) -> Run:
    try:
        return Run.objects.select_related("owner").get(code=code)
    except (Run.DoesNotExist, ValidationError):
        raise CommandError(f"no run with id {code!r}") from None


def _link(text: str) -> ShareLink:
    """A link by its id (UUID) or by its URL (…/s/<token>/…)."""
    parts = [part for part in urlsplit(text.strip()).path.split("/") if part]
    if "s" in parts and parts.index("s") + 1 < len(parts):
        found = services.find(parts[parts.index("s") + 1])
    else:
        try:
            found = ShareLink.objects.filter(code=text.strip()).first()
        except ValidationError:
            found = None
    if found is None:
        raise CommandError("no such share link (give its URL or its id)")
    return found


def _create(options: dict) -> dict:
    run = _run(options["run"])
    user = user_named(options["user"]) if options["user"] else run.owner
    try:
        link, token = services.create_share(user, run=run, days=options["days"], note=options["note"])
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    except PermissionDenied as exc:
        raise CommandError(f"{user.get_username()}: {exc}") from None
    return {"url": services.share_url(token), "expires_at": link.expires_at.isoformat(), "id": str(link.code)}


def _shown(links: list[ShareLink]) -> dict[str, Run]:
    """The runs the links show, by id (a run link's own run; a compare link's runs, in one query)."""
    runs = {str(link.run.code): link.run for link in links if link.run}
    codes = {code for link in links if not link.run for code in link.run_codes}
    if codes:
        runs |= {str(run.code): run for run in Run.objects.filter(code__in=codes).select_related("target")}
    return runs


def _row(link: ShareLink, runs: dict[str, Run]) -> dict:
    codes = [str(link.run.code)] if link.run else link.run_codes
    return {
        "id": str(link.code),
        "kind": link.kind,
        "runs": codes,
        # What the link shows: each run's title and start (a run deleted since: title null).
        "shows": [
            {
                "id": code,
                "title": run_title(runs[code]) if code in runs else None,
                "created": runs[code].created.isoformat() if code in runs else None,
            }
            for code in codes
        ],
        "note": link.note,
        "created_by": link.created_by.get_username() if link.created_by else None,
        "created": link.created.isoformat(),
        "expires_at": link.expires_at.isoformat(),
        "state": link.state,
        "revoked_at": link.revoked_at.isoformat() if link.revoked_at else None,
        "views": link.view_count,
        "last_viewed_at": link.last_viewed_at.isoformat() if link.last_viewed_at else None,
    }


def _shows_line(row: dict) -> str:
    """``shows the run shop · /1k, /2k, 2026-11-25 21:29 UTC (run ID)``, or a compare's runs in order."""

    def run(item: dict) -> str:
        if item["title"] is None:
            return f"a deleted run ({item['id']})"
        return f"{item['title']}, {item['created'][:16].replace('T', ' ')} UTC (run {item['id']})"

    if row["kind"] == ShareLink.Kind.RUN:
        return f"shows the run {run(row['shows'][0])}"
    listed = "; ".join(f"{i}. {run(item)}" for i, item in enumerate(row["shows"], 1))
    return f"shows a compare of {len(row['shows'])} runs: {listed}"


def handle(command: BaseCommand, options: dict) -> None:
    action = options["share_action"]
    if action == "create":
        out = _create(options)
        if options["json"]:
            command.stdout.write(json.dumps(out))
        else:
            command.stdout.write(f"{out['url']}\nexpires {out['expires_at']} · id {out['id']}")
            command.stdout.write("The link is shown only now: Tollgate keeps its hash, not the link.")
    elif action == "revoke":
        link = _link(options["link"])
        user = user_named(options["user"]) if options["user"] else None
        try:
            done = services.revoke(link, user, operator=user is None)
        except PermissionDenied as exc:
            raise CommandError(f"{user.get_username()}: {exc}") from None
        state = "revoked" if done else f"was already revoked on {link.revoked_at:%Y-%m-%d %H:%M} UTC"
        command.stdout.write(f"share link {link.code} {state}")
    else:
        links = ShareLink.objects.select_related("run__target", "created_by").order_by("-created", "-pk")
        if options["run"]:
            links = links.filter(run=_run(options["run"]))
        links = list(links)
        runs = _shown(links)
        rows = [_row(link, runs) for link in links]
        if options["json"]:
            command.stdout.write(json.dumps(rows, indent=2))
            return
        for r in rows:
            command.stdout.write(
                f"{r['id']}  {r['state']:<7}  {r['kind']:<7}  expires {r['expires_at'][:16]}  "
                f"views {r['views']}  last {(r['last_viewed_at'] or 'never')[:16]}  {r['note']}"
            )
            command.stdout.write(f"    {_shows_line(r)}")
