"""A member removed from a project loses its API tokens of that project for good: added back, the
old tokens stay revoked (``portal.api.authentication`` would otherwise accept them again the moment
the membership is back). On the row's deletion, so the members page, the admin and a cascade all
count."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from portal.api import tokens
from portal.api.models import ApiToken
from portal.projects.models import Membership


@receiver(post_delete, sender=Membership, dispatch_uid="api-revoke-on-removal")
def revoke_on_removal(sender, instance: Membership, **kwargs) -> None:
    active = ApiToken.objects.filter(user_id=instance.user_id, project_id=instance.project_id)
    with transaction.atomic():
        for token in active.filter(revoked_at=None).select_for_update():
            # Audited as the system's act, right after the member_removed event of whoever removed them.
            tokens.revoke(token, actor_name="system")
