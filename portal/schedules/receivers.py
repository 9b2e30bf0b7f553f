"""A schedule deleted with its scenario (or its project) takes its beat task along: the beat would
otherwise keep sending ticks for a schedule that is gone."""

from __future__ import annotations

from django.db.models.signals import post_delete
from django.dispatch import receiver
from django_celery_beat.models import PeriodicTask

from portal.schedules.models import Schedule


@receiver(post_delete, sender=Schedule, dispatch_uid="schedules-drop-beat-task")
def drop_beat_task(sender, instance: Schedule, **kwargs) -> None:
    if instance.periodic_task_id:
        # Through the model (not a bulk delete): its signal tells a running beat to reload.
        for task in PeriodicTask.objects.filter(pk=instance.periodic_task_id):
            task.delete()
