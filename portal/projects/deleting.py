"""Confirm, then delete: the one shape of every delete page (runs, targets, scenarios, SSH access).

A delete is a confirmation page on GET and happens on POST with ``confirm=yes`` (no JavaScript
needed). Each app's view finds the object, checks who may, refuses what must wait, then hands the
rest here."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


def confirm_then_delete(
    request: HttpRequest,
    *,
    what: str,
    consequences: list[str],
    back: str,
    delete: Callable[[], object],
    done: str,
    then: str,
    **then_kwargs,
) -> HttpResponse:
    """The confirmation page of ``what`` (its ``consequences``, a link ``back``) until the user
    confirms; then ``delete()``, say ``done`` and redirect to the URL named ``then``."""
    if not (request.method == "POST" and request.POST.get("confirm") == "yes"):
        ctx = {"what": what, "consequences": consequences, "back": back, "action": request.path}
        return render(request, "projects/confirm_delete.html", ctx)
    delete()
    messages.info(request, done)
    return redirect(then, **then_kwargs)
