"""Composing the alert of a judged run (once) and choosing the channels it goes to. Delivery, one
attempt at a time with retries, is ``portal.alerts.sending``; the maintenance worker runs both
(``workers.watch``) once a run of a scenario has been judged."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse

from portal import vault
from portal.alerts.models import Alert, AlertChannel, AlertSettings
from portal.judgements.models import Judgement
from portal.lib.watching import alerts as alertlib
from portal.sharing import services as sharing

ALERTING = {Judgement.Status.REGRESSION, Judgement.Status.IMPROVEMENT}


def add_channel(project, kind: str, destination: str, improvements: bool = False, user=None) -> AlertChannel:
    """A new channel of ``project`` to ``destination`` (checked by the caller: ``ChannelForm``); a
    URL is stored encrypted and shown without its path."""
    return AlertChannel.objects.create(
        project=project,
        kind=kind,
        target=AlertChannel.shown(kind, destination),
        url_enc="" if kind == AlertChannel.Kind.EMAIL else vault.encrypt(destination),
        fingerprint=AlertChannel.fingerprint_of(destination),
        improvements=improvements,
        created_by=user,
    )


def destination(channel: AlertChannel) -> str:
    """Where the channel's alerts go: its e-mail address, or its URL decrypted."""
    return channel.target if channel.kind == AlertChannel.Kind.EMAIL else vault.decrypt(channel.url_enc)


def absolute(path: str) -> str:
    return settings.TOLLGATE_BASE_URL + path


def links(judgement: Judgement, share: bool) -> dict:
    """The run, its baseline, the compare page of the two (baseline first: the reference), and a
    read-only share link of that compare when ``share`` (made by the system: no user)."""
    run, baseline = judgement.run, judgement.baseline
    compare = f"{reverse('runs-compare')}?runs={baseline.code},{run.code}"
    out = {
        "run": absolute(reverse("runs-detail", args=[run.code])),
        "baseline": absolute(reverse("runs-detail", args=[baseline.code])),
        "compare": absolute(compare),
    }
    if share:
        _link, token = sharing.create_share(None, runs=[baseline, run], note="regression alert")
        out["share"] = sharing.share_url(token)
    return out


def channels_for(judgement: Judgement) -> list[AlertChannel]:
    """The enabled channels of the run's project that take this judgement (improvements: only those
    that asked for them)."""
    if judgement.status not in ALERTING or judgement.baseline is None:
        return []
    found = AlertChannel.objects.filter(project_id=judgement.scenario.project_id, enabled=True)
    if judgement.status == Judgement.Status.IMPROVEMENT:
        found = found.filter(improvements=True)
    return list(found.order_by("pk"))


def compose(judgement: Judgement) -> Alert | None:
    """The judgement's alert, made once (a share link included when the project allows it); None
    when no channel takes it."""
    existing = Alert.objects.filter(judgement=judgement).first()
    if existing is not None:
        return existing
    if not channels_for(judgement):
        return None
    scenario, run = judgement.scenario, judgement.run
    allowed = AlertSettings.objects.filter(project_id=scenario.project_id, share_links=True).exists()
    result = judgement.result
    try:
        with transaction.atomic():
            found = links(judgement, allowed)
            message = alertlib.text(result, scenario.name, run.target.name, found)
            ref = {"id": str(scenario.code), "name": scenario.name, "version": run.scenario_version}
            payload = {
                "text": message,
                "callback": alertlib.callback(result, ref, str(run.code), found, message),
                "links": found,
            }
            return Alert.objects.create(
                judgement=judgement,
                subject=alertlib.subject(judgement.status, scenario.name, run.target.name)[:300],
                payload_enc=vault.seal(payload),
            )
    except IntegrityError:  # composed meanwhile by a redelivered task
        return Alert.objects.get(judgement=judgement)


def payload(alert: Alert) -> dict:
    return vault.unseal(alert.payload_enc)


def rotate_stored_secrets() -> int:
    """Re-encrypt every stored alert channel URL and sealed alert with the newest key (``tollgate
    rotate-secrets``, inside its transaction); raises ``vault.SecretError``. Returns how many channel
    URLs were re-encrypted."""
    count = 0
    for pk, token in (
        AlertChannel.objects.select_for_update().exclude(url_enc="").values_list("pk", "url_enc")
    ):
        AlertChannel.objects.filter(pk=pk).update(url_enc=vault.rotate(token))
        count += 1
    for pk, token in Alert.objects.select_for_update().values_list("pk", "payload_enc"):
        Alert.objects.filter(pk=pk).update(payload_enc=vault.rotate(token))
    return count
