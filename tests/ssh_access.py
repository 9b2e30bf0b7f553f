"""The SSH access of a target to the tests' own sshd (``tests.conftest.Sshd``): its port, user, key
(encrypted as the portal stores it) and pinned host key, sampling the sshd process itself."""

from __future__ import annotations

from portal import vault
from portal.targets.models import SshAccess, Target


def ssh_access(target: Target, sshd) -> SshAccess:
    return SshAccess.objects.create(
        target=target,
        host="127.0.0.1",
        port=sshd.port,
        username=sshd.user,
        private_key_enc=vault.encrypt(sshd.private_key),
        known_hosts=sshd.known_hosts,
        server_process="sshd",
    )
