"""Projects (tenants): every target, run, scenario and SSH credential belongs to one; users see a
project's objects through a Membership whose role says what they may do there.

Who may see or do what is decided by the rules of ``portal.projects.access``.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.text import slugify


class Role(models.TextChoices):
    # In rising order of rights: each role may do everything the ones before it may.
    VIEWER = "viewer"
    MEMBER = "member"
    OWNER = "owner"


RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.OWNER: 2}


PERSONAL_ATTEMPTS = 5


class Project(models.Model):
    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    name = models.CharField(max_length=150, unique=True)
    slug = models.SlugField(max_length=150)
    # The user whose personal project this is (made for every user, named after them).
    personal_of = models.OneToOneField(
        settings.AUTH_USER_MODEL, models.CASCADE, null=True, blank=True, related_name="personal_project"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.slug = self.slug or slugify(self.name)[:150] or "project"
        super().save(*args, **kwargs)


class Membership(models.Model):
    project = models.ForeignKey(Project, models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__name", "user__username"]
        constraints = [
            # One role per user and project: access checks read exactly one row.
            models.UniqueConstraint(fields=["project", "user"], name="membership_project_user_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


class Invitation(models.Model):
    """An owner's invitation to a project, under the username as typed. The members page answers the
    same whether an account of that name exists or not (it must not tell), so nobody joins a project
    until the account of that name accepts on its Projects page."""

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, models.CASCADE, related_name="invitations")
    username = models.CharField(max_length=150)
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project__name", "username"]
        constraints = [
            # Inviting the same name again changes the role of the one invitation.
            models.UniqueConstraint(fields=["project", "username"], name="invitation_project_username_uniq"),
        ]
        indexes = [
            # The Projects page lists the invitations of the user's name.
            models.Index(fields=["username"], name="invitation_username_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.username} invited as {self.role} of {self.project}"

    @property
    def expires(self):
        """When it can no longer be accepted (``TOLLGATE_INVITATION_DAYS`` after it was made or renewed)."""
        return self.created + timedelta(days=settings.TOLLGATE_INVITATION_DAYS)

    @property
    def expired(self) -> bool:
        return timezone.now() >= self.expires

    @classmethod
    def valid_since(cls):
        """The oldest ``created`` an invitation may have and still be accepted."""
        return timezone.now() - timedelta(days=settings.TOLLGATE_INVITATION_DAYS)


class ProjectQuota(models.Model):
    """A project's own limits, set by operators in the Django admin (never by project owners); an
    empty field keeps the operator's default from settings (portal.runs.quotas.limits_for)."""

    project = models.OneToOneField(Project, models.CASCADE, related_name="quota")
    max_users = models.PositiveIntegerField(null=True, blank=True)
    max_arrival_rate = models.FloatField(null=True, blank=True, help_text="req/s")
    max_duration_s = models.FloatField(null=True, blank=True, help_text="measured seconds per arm")
    max_warmup_s = models.FloatField(null=True, blank=True, help_text="warm-up seconds per arm")
    max_rounds = models.PositiveIntegerField(null=True, blank=True)
    max_requests_per_run = models.PositiveBigIntegerField(null=True, blank=True)
    max_concurrent_runs = models.PositiveIntegerField(null=True, blank=True)
    max_runs_per_day = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"quota of {self.project}"


def personal_project(user) -> Project:
    """The user's personal project, made on first use (users created after the migration get theirs
    here), named after the user; a name already taken by another project gets a number. A new user's
    first pages may arrive at once (tabs, a load test): the loser of the race reads the winner's."""
    for _ in range(PERSONAL_ATTEMPTS):
        project = Project.objects.filter(personal_of=user).first()
        if project is not None:
            return project
        name, n = user.get_username(), 1
        while Project.objects.filter(name=name).exists():
            n += 1
            name = f"{user.get_username()}-{n}"
        try:
            with transaction.atomic():  # a savepoint: the caller's transaction survives a lost race
                project = Project.objects.create(name=name, personal_of=user)
                Membership.objects.create(project=project, user=user, role=Role.OWNER)
            return project
        except IntegrityError:
            continue  # made meanwhile (or the name taken): look again
    raise RuntimeError(f"no personal project could be made or read for {user.get_username()}")
