"""Server-side probes during a run (the worker side of ``Run.config["probes"]``): connect over SSH,
sample the server's CPU while the engine runs, attribute it to each arm as the arm ends, then run
``openssl speed`` (and ``cryptsetup benchmark``) once the load is over.

A probe failure never fails the load run: every error lands in ``Run.probes["errors"]`` and the
report shows it. The private key is decrypted only here, in memory.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time

from django.conf import settings
from django.utils import timezone

from portal import outbound, vault
from portal.runs.models import ArmResult, Run
from portal.targets.models import SshAccess
from workers.probes import parsers
from workers.probes.cpu import cpu_in_window, moving_average
from workers.probes.ssh import CpuSampler, ProbeError, SshSession, SshTarget

log = logging.getLogger(__name__)

OPENSSL_SIGS = ["rsa2048", "rsa3072", "rsa4096", "ecdsap256", "ed25519"]
OPENSSL_EVP = ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]
# How long an arm's end waits for the sample that brackets its window (the sampler ticks each second).
ARM_SAMPLE_WAIT_S = 3.0
# The one-shot probes after the load (option → its name), skipped when the run was cancelled or its
# preflight stopped it (nothing was measured).
ONE_SHOTS = {
    "openssl_speed": "openssl speed",
    "cryptsetup": "cryptsetup benchmark",
    "openssl_speed_local": "openssl speed on the generator",
}


def wanted(run: Run) -> dict:
    return run.config.get("probes") or {}


class ProbeSession:
    """Everything probed for one run; ``start`` before the engine, ``finish`` after it."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.options = wanted(run)
        self.errors: list[str] = []
        self.ssh: SshSession | None = None
        self.sampler: CpuSampler | None = None
        self.local_sampler: CpuSampler | None = None
        self.result: dict = {}
        self.attributed: set[int] = set()  # arms whose CPU is stored already

    def start(self) -> ProbeSession:
        if self.options.get("ssh"):
            try:
                access = self._connect()
                process = self.options.get("server_process") or access.server_process
                self.options["server_process"] = process
                self.sampler = CpuSampler.over_ssh(self.ssh, process)
            except ProbeError as exc:
                self.errors.append(f"server probe: {exc}")
            except Exception as exc:  # noqa: BLE001 - a probe never fails the run
                log.exception("run %s: probe start failed", self.run.code)
                self.errors.append(f"server probe: {type(exc).__name__}: {exc}")
        if self.options.get("local_process") and not settings.TOLLGATE_LOCAL_PROBE:
            # Stored before the operator turned it off, or not through the form: never sampled.
            self.errors.append("local probe: off on this installation (TOLLGATE_LOCAL_PROBE); not sampled")
        elif self.options.get("local_process"):
            try:
                self.local_sampler = CpuSampler.local(self.options["local_process"])
            except ProbeError as exc:
                self.errors.append(f"local probe: {exc}")
        return self

    def _connect(self) -> SshAccess:
        try:
            access = SshAccess.objects.get(target=self.run.target)
        except SshAccess.DoesNotExist:
            raise ProbeError("this target has no SSH access configured") from None
        try:
            key = vault.decrypt(access.private_key_enc)
        except vault.SecretError as exc:
            raise ProbeError(f"the SSH key cannot be decrypted: {exc}") from None
        decision = outbound.check_host(access.host, access.port)
        if not decision.allowed:
            raise ProbeError(f"refused by the outbound address policy: {decision.reason}")
        # Connect to the checked address (the host name stays for the host key and the messages).
        target = SshTarget(
            access.host, access.port, access.username, key, access.known_hosts, decision.pinned
        )
        self.ssh = SshSession(target).connect()
        fp = self.ssh.host_public.fingerprint
        self.result["host_key"] = {"fingerprint": fp, "pinned": bool(access.known_hosts)}
        if not access.known_hosts:
            # Trust on first use: pin what we saw, show its fingerprint.
            SshAccess.objects.filter(pk=access.pk).update(
                known_hosts=self.ssh.host_key_line, host_key_fingerprint=fp, pinned_at=timezone.now()
            )
        self.result["server"] = f"{access.username}@{access.host}:{access.port}"
        return access

    def finishing_note(self) -> str:
        """What the run page says while ``finish`` runs (openssl speed takes half a minute)."""
        steps = ["attributing server CPU to the arms"]
        if self.ssh is not None and self.options.get("openssl_speed"):
            steps.append("running openssl speed on the server (about 30 s)")
        if self.ssh is not None and self.options.get("cryptsetup"):
            steps.append("running cryptsetup benchmark on the server")
        return "Load finished; " + ", then ".join(steps) + "…"

    def samplers(self) -> list[tuple[str, CpuSampler]]:
        pairs = (("server", self.sampler), ("generator", self.local_sampler))
        return [(name, sampler) for name, sampler in pairs if sampler is not None]

    def attribute_arm(self, arm: ArmResult) -> None:
        """As each arm is stored: attribute the sampled CPU to its window and store it at once, so a
        run that fails or is reaped later keeps the server CPU of its finished arms."""
        for name, sampler in self.samplers():
            if arm.window_ended:
                sampler.wait_past(arm.window_ended, timeout_s=ARM_SAMPLE_WAIT_S)
            self._attribute(name, sampler, arm)
        self.attributed.add(arm.pk)

    def finish(self, one_shots: bool = True, not_run: str = "") -> dict:
        """Stop sampling, attribute CPU to arms not yet attributed, run the one-shot probes (not when
        the run is handed back: the worker has seconds to let go; nor, saying ``not_run``, when the
        run ended before any load), store it all."""
        for name, sampler in self.samplers():
            pending = list(ArmResult.objects.filter(run=self.run).exclude(pk__in=self.attributed))
            last_end = max((arm.window_ended for arm in pending if arm.window_ended), default=None)
            if last_end is not None:
                sampler.wait_past(last_end)
            sampler.stop()
            if sampler.error:
                self.errors.append(f"{name} CPU sampler: {sampler.error}")
            for arm in pending:
                self._attribute(name, sampler, arm)
        steps = []
        skipped = ", ".join(label for name, label in ONE_SHOTS.items() if self.options.get(name))
        if skipped and self._cancelled():  # they take half a minute: a cancel ends the run in seconds
            self.errors.append(f"{skipped}: not run, the run was cancelled")
        elif skipped and not_run:
            self.errors.append(f"{skipped}: not run, {not_run}")
        elif one_shots:  # a hand-back leaves them to the attempt that finishes the run
            if self.ssh is not None and self.options.get("openssl_speed"):
                steps.append(("openssl speed", self._openssl_speed))
            if self.ssh is not None and self.options.get("cryptsetup"):
                steps.append(("cryptsetup benchmark", self._cryptsetup))
            if self.options.get("openssl_speed_local") and shutil.which("openssl"):
                steps.append(("openssl speed on the generator", self._openssl_speed_local))
        for label, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - a probe never fails the run; its error is shown
                log.exception("run %s: %s failed", self.run.code, label)
                self.errors.append(f"{label}: {type(exc).__name__}: {exc}")
        if self.ssh is not None:
            self.ssh.close()
        self.result["errors"] = self.errors
        Run.objects.filter(pk=self.run.pk).update(probes=self.result)
        return self.result

    def _cancelled(self) -> bool:
        return Run.objects.filter(pk=self.run.pk, cancel_requested=True).exists()

    def _attribute(self, name: str, sampler: CpuSampler, arm: ArmResult) -> None:
        key = "server_cpu" if name == "server" else "generator_cpu"
        process = self.options.get("server_process" if name == "server" else "local_process")
        if not arm.window_started or not arm.window_ended:
            return
        window = cpu_in_window(sampler.samples, sampler.hz, arm.window_started, arm.window_ended)
        if window is None:
            self.errors.append(f"{name} CPU: no samples around the window of {arm.arm} (round {arm.round})")
            return
        if window["processes"] == 0:
            missing = f"{name} CPU: no process named {process!r} was running"
            if missing not in self.errors:
                self.errors.append(missing)
            return
        window["cpu_ms_per_req"] = round(1000.0 * window["cpu_s"] / arm.requests, 6) if arm.requests else None
        window["cpu_pct_ma15"] = moving_average([p["cpu_pct"] for p in window["timeline"]], 15)
        window["process"] = process
        arm.server_cpu = {**(arm.server_cpu or {}), key: window}
        ArmResult.objects.filter(pk=arm.pk).update(server_cpu=arm.server_cpu)

    def _openssl_speed(self) -> None:
        seconds = int(self.options.get("openssl_seconds") or 1)
        try:
            outputs = []
            status, version = self.ssh.run(["openssl", "version"], timeout_s=30)
            if status != 0:
                raise ProbeError(f"openssl is not installed on the server ({version.strip()[:200]})")
            outputs.append(version)
            for command in parsers.openssl_speed_command(OPENSSL_SIGS, OPENSSL_EVP, seconds):
                status, text = self.ssh.run(command, timeout_s=120 + 30 * seconds)
                outputs.append(text)
            parsed = parsers.parse_openssl_speed("\n".join(outputs))
            self.result.setdefault("openssl_speed", {})[self.ssh.target.host] = parsed
        except ProbeError as exc:
            self.errors.append(f"openssl speed: {exc}")

    def _openssl_speed_local(self) -> None:
        seconds = int(self.options.get("openssl_seconds") or 1)
        outputs = [subprocess.run(["openssl", "version"], capture_output=True, text=True, check=False).stdout]
        for command in parsers.openssl_speed_command(OPENSSL_SIGS, OPENSSL_EVP, seconds):
            proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)  # noqa: S603
            outputs.append(proc.stdout + proc.stderr)
        parsed = parsers.parse_openssl_speed("\n".join(outputs))
        self.result.setdefault("openssl_speed", {})[f"{socket.gethostname()} (generator)"] = parsed

    def _cryptsetup(self) -> None:
        try:
            status, text = self.ssh.run(["cryptsetup", "benchmark"], timeout_s=180)
            if status == 127 or "not found" in text:
                raise ProbeError("cryptsetup is not installed on the server")
            self.result["cryptsetup"] = {self.ssh.target.host: parsers.parse_cryptsetup_benchmark(text)}
        except ProbeError as exc:
            self.errors.append(f"cryptsetup benchmark: {exc}")


def started(run: Run) -> ProbeSession | None:
    if not wanted(run):
        return None
    began = time.monotonic()
    session = ProbeSession(run).start()
    log.info("run %s: probes started in %.1f s", run.code, time.monotonic() - began)
    return session
