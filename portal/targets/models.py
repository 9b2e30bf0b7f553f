"""What is measured: a Target (the service, reachable over plain HTTP and/or TLS) and how Tollgate
reaches its server for probes (SshAccess). Its saved scenarios are ``portal.scenarios.models``.

A target belongs to a project (``portal.projects``); who may see it is decided by
``portal.projects.access``.
"""

from __future__ import annotations

from uuid import uuid4

from django.db import models

from portal.lib.security.verification import new_token
from portal.validators import validate_process_name


class Target(models.Model):
    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="targets")
    name = models.CharField(max_length=200)
    plain_url = models.URLField(max_length=500, blank=True)
    tls_url = models.URLField(max_length=500, blank=True)
    # Where the server asks for a client certificate, when not at the TLS URL: the tls_mtls arm goes
    # there (``portal.runs.services.create_run``), so the other arms' handshakes stay those of a server
    # that asks for none. The demo's Caddy asks on a port of its own (``portal.console.demo``). Its
    # default is the database's too: a row written by code of an earlier schema (a rolling deploy, a
    # migration test) gets "" instead of a NOT NULL error.
    mtls_url = models.URLField(max_length=500, blank=True, default="", db_default="")
    created = models.DateTimeField(auto_now_add=True)
    # The run others are compared against by default (pinned on the run page).
    baseline = models.ForeignKey(
        "runs.Run", models.SET_NULL, null=True, blank=True, related_name="baseline_of", db_constraint=True
    )
    # Ownership verification (portal/targets/verification.py): the token the target's origins serve,
    # when and how it was last seen, and why the last attempt failed.
    verification_token = models.CharField(max_length=64, default=new_token, editable=False)
    verified_at = models.DateTimeField(null=True, blank=True)
    verified_by_method = models.CharField(max_length=16, blank=True)  # "file" or "header"
    verification_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            # One target per project and URL pair: the form reuses it, so runs group by target.
            models.UniqueConstraint(
                fields=["project", "plain_url", "tls_url"], name="target_project_urls_uniq"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SshAccess(models.Model):
    """How Tollgate reaches a target's server for probes. The private key is stored Fernet-encrypted
    (``portal.lib.security.secrets``) and never rendered; the host key is pinned on first use."""

    target = models.OneToOneField(Target, models.CASCADE, related_name="ssh")
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField(default=22)
    username = models.CharField(max_length=64)
    private_key_enc = models.TextField()
    public_key = models.TextField()  # OpenSSH line, safe to show: the user copies it to the server
    known_hosts = models.TextField(blank=True)  # the pinned host key, OpenSSH known_hosts format
    host_key_fingerprint = models.CharField(max_length=100, blank=True)
    pinned_at = models.DateTimeField(null=True, blank=True)
    # Sampled with pgrep -x; the same rule as the forms (portal.lib.runs.names).
    server_process = models.CharField(max_length=64, default="nginx", validators=[validate_process_name])
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.username}@{self.host}:{self.port}"


class ClientCertificate(models.Model):
    """A client certificate (mutual TLS) the target's runs present: one per key type, so the matrix
    can compare RSA and ECDSA (``portal.lib.tls.clientcerts``). The certificate and its key are stored
    Fernet-encrypted together (``portal.lib.security.secrets``: ``{"cert", "key"}``) and never rendered; the
    facts beside them are public (what the page and the report show)."""

    class KeyType(models.TextChoices):
        RSA = "rsa", "RSA"
        ECDSA = "ecdsa", "ECDSA"

    target = models.ForeignKey(Target, models.CASCADE, related_name="client_certs")
    key_type = models.CharField(max_length=8, choices=KeyType.choices)
    pair_enc = models.TextField()
    subject = models.CharField(max_length=500)
    issuer = models.CharField(max_length=500)
    not_after = models.DateTimeField()
    fingerprint_sha256 = models.CharField(max_length=95)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # One per key type: a new one of the same type replaces it (the run picks by type).
            models.UniqueConstraint(fields=["target", "key_type"], name="clientcert_target_type_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.get_key_type_display()} {self.subject}"
