"""Server-side probes over SSH (and the same sampler on the local host).

Django-free. One SSH connection per run: a host key pinned on first use (a changed key stops the
probe), a CPU sampler streaming ``/proc/stat`` and ``/proc/<pid>/stat`` of the named processes once
a second over one exec channel, and one-shot commands (``openssl speed``, ``cryptsetup benchmark``).

A server that goes away never hangs a run: the connection is lost (``SshSession.lost``, every later
command fails at once) when the sampler's stream ends or stays silent for ``SILENCE_S``, when a
command's channel is silent and the server does not answer a keepalive within ``SILENCE_S``, or when
TCP gives up on unacknowledged data (``TCP_USER_TIMEOUT``, with SSH keepalives every
``KEEPALIVE_S`` so there always is some).
"""

from __future__ import annotations

import contextlib
import io
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass

import paramiko

from portal.lib.runs.names import process_name_problem
from portal.lib.security.sshkeys import PublicKey, key_from_known_hosts, known_hosts_line
from workers.probes.cpu import Sample
from workers.probes.parsers import parse_proc_pid_stat, parse_proc_stat_cpu

CONNECT_TIMEOUT_S = 10.0
# How long a command that ended its output may take to send its exit status.
EXIT_STATUS_WAIT_S = 2.0
SILENCE_S = 5.0  # the sampler writes every second; a command's channel is pinged after this long
KEEPALIVE_S = 2.0
TCP_GIVE_UP_MS = 10_000


class ProbeError(Exception):
    """A probe could not run; the message says why in words a user can act on."""


class HostKeyChanged(ProbeError):
    pass


def public_key(key: paramiko.PKey) -> PublicKey:
    return PublicKey(key.get_name(), key.asbytes())


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's SHA256 fingerprint of a key the server offered."""
    return public_key(key).fingerprint


def load_private_key(pem: str) -> paramiko.PKey:
    errors = []
    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(pem))
        except (paramiko.SSHException, ValueError) as exc:
            errors.append(str(exc))
    raise ProbeError("the private key is not an unencrypted OpenSSH/PEM Ed25519, ECDSA or RSA key")


class _Pin(paramiko.MissingHostKeyPolicy):
    """Accept the server's key only if it matches the pinned one; with no pin, remember it (TOFU)."""

    def __init__(self, pinned: PublicKey | None) -> None:
        self.pinned = pinned
        self.seen: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key) -> None:
        self.seen = key
        if self.pinned is not None and self.pinned != public_key(key):
            raise HostKeyChanged(
                f"the host key of {hostname} changed: pinned {self.pinned.fingerprint}, offered "
                f"{fingerprint(key)} — the probe stopped. If the server was re-installed, forget the "
                "pinned key on the target's SSH settings and pin again."
            )


@dataclass
class SshTarget:
    host: str
    port: int
    user: str
    private_key: str  # PEM text, decrypted only in memory
    known_hosts: str = ""  # pinned key, OpenSSH known_hosts format
    address: str = ""  # the address the outbound policy checked; empty: resolve host (tests only)


class SshSession:
    """One SSH connection for the whole run."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.client = paramiko.SSHClient()
        self.host_key: paramiko.PKey | None = None
        self.lost: str | None = None  # why the connection was given up (``mark_lost``)

    def connect(self) -> SshSession:
        t = self.target
        pinned = key_from_known_hosts(t.known_hosts, t.host, t.port) if t.known_hosts else None
        policy = _Pin(pinned)
        self.client.set_missing_host_key_policy(policy)
        pkey = load_private_key(t.private_key)
        try:
            sock = socket.create_connection((t.address or t.host, t.port), timeout=CONNECT_TIMEOUT_S)
            _give_up_on_silence(sock)
            self.client.connect(
                t.host,
                port=t.port,
                sock=sock,
                username=t.user,
                pkey=pkey,
                timeout=CONNECT_TIMEOUT_S,
                banner_timeout=CONNECT_TIMEOUT_S,
                auth_timeout=CONNECT_TIMEOUT_S,
                allow_agent=False,
                look_for_keys=False,
            )
        except HostKeyChanged:
            self.client.close()
            raise
        except paramiko.AuthenticationException as exc:
            self.client.close()
            raise ProbeError(
                f"SSH authentication as {t.user}@{t.host}:{t.port} failed ({exc}): is Tollgate's public key "
                "in that user's ~/.ssh/authorized_keys?"
            ) from None
        except (OSError, paramiko.SSHException, EOFError):
            # One message for a closed port, a timeout and a non-SSH answer alike: the probe must not
            # tell them apart, or it would be a port scanner.
            self.client.close()
            raise ProbeError(f"could not open an SSH session to {t.host}:{t.port}") from None
        self.host_key = policy.seen or self.client.get_transport().get_remote_server_key()
        self.client.get_transport().set_keepalive(KEEPALIVE_S)
        return self

    def mark_lost(self, reason: str) -> None:
        """Give the connection up: every read on it ends now and every later command fails at once."""
        if self.lost is None:
            self.lost = f"the SSH connection to {self.target.host}:{self.target.port} was lost ({reason})"
        self.client.close()

    def _channel(self) -> paramiko.Channel:
        transport = self.client.get_transport()
        if self.lost is None and (transport is None or not transport.is_active()):
            self.lost = f"the SSH connection to {self.target.host}:{self.target.port} was lost (closed)"
        if self.lost:
            raise ProbeError(self.lost)
        try:
            return transport.open_session(timeout=CONNECT_TIMEOUT_S)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.mark_lost(f"no channel: {exc}")
            raise ProbeError(self.lost) from None

    def answers(self, timeout_s: float = SILENCE_S) -> bool:
        """Whether the server answers a keepalive request within ``timeout_s`` (OpenSSH refuses it,
        which is an answer)."""
        transport = self.client.get_transport()
        done = threading.Event()

        def ping() -> None:
            with contextlib.suppress(Exception):
                transport.global_request("keepalive@openssh.com", wait=True)
                done.set()

        threading.Thread(target=ping, daemon=True, name="ssh-ping").start()
        return done.wait(timeout_s)

    @property
    def host_public(self) -> PublicKey:
        return public_key(self.host_key)

    @property
    def host_key_line(self) -> str:
        return known_hosts_line(self.target.host, self.target.port, self.host_public)

    def run(self, command: list[str], timeout_s: float = 300.0) -> tuple[int, str]:
        """Run one command; (exit status, stdout + stderr). A silent channel is checked every
        ``SILENCE_S``: a server that does not answer then is lost (ProbeError), not waited for."""
        channel = self._channel()
        try:
            channel.set_combine_stderr(True)
            channel.settimeout(SILENCE_S)
            channel.exec_command(shlex.join(command))
            chunks = []
            deadline = time.monotonic() + timeout_s
            try:
                while data := self._recv(channel, deadline):
                    chunks.append(data)
            except TimeoutError:
                raise ProbeError(f"{command[0]} took longer than {timeout_s:.0f} s") from None
            channel.status_event.wait(SILENCE_S)  # the exit status follows the output's end
            status = channel.recv_exit_status() if channel.exit_status_ready() else -1
            if status == -1 and (self.lost or not self.client.get_transport().is_active()):
                raise ProbeError(self.lost or f"the SSH connection to {self.target.host} was lost")
            return status, b"".join(chunks).decode("utf-8", "replace")
        finally:
            channel.close()

    def _recv(self, channel: paramiko.Channel, deadline: float) -> bytes:
        while True:
            try:
                return channel.recv(65536)
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                if not self.answers():
                    self.mark_lost(f"no answer for {2 * SILENCE_S:.0f} s")
                    raise ProbeError(self.lost) from None

    def stream(self, script: str):
        """A line iterator over a long-running shell script's stdout (a read waits ``SILENCE_S`` at
        most: TimeoutError), a closer, and its exit status once it has exited (else None: output
        that ended without one means the connection went)."""
        channel = self._channel()
        channel.settimeout(SILENCE_S)
        channel.exec_command("sh -c " + shlex.quote(script))

        def exit_status() -> int | None:  # paramiko says -1 for a channel closed without one
            # The status message may trail the end of the output by a moment: wait for it briefly.
            deadline = time.monotonic() + EXIT_STATUS_WAIT_S
            while not channel.exit_status_ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            status = channel.recv_exit_status() if channel.exit_status_ready() else -1
            return None if status == -1 else status

        return channel.makefile("r"), channel.close, exit_status

    def close(self) -> None:
        self.client.close()


def _give_up_on_silence(sock: socket.socket) -> None:
    """TCP ends the connection when sent data stays unacknowledged for TCP_GIVE_UP_MS (a host gone
    from the network), and probes an idle one (Linux; elsewhere the defaults stay)."""
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPIDLE", None), 5),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPINTVL", None), 2),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPCNT", None), 3),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", None), TCP_GIVE_UP_MS),
    ]
    for level, name, value in options:
        if name is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(level, name, value)


def sampler_script(process: str, interval_s: float = 1.0) -> str:
    """Shell that prints, every interval: ``T <uptime>``, the cpu line of /proc/stat, the stat line of
    every process named ``process``, then ``E``. POSIX sh and procps' pgrep only. The name is checked
    once more here (the forms, the model and the CLI check it first): a bad one is a ProbeError."""
    problem = process_name_problem(process)
    if problem:
        raise ProbeError(f"refused to sample {process!r}. {problem}")
    name = shlex.quote(process)
    return (
        "echo HZ $(getconf CLK_TCK); while :; do echo T $(cut -d' ' -f1 /proc/uptime); "
        f"head -n1 /proc/stat; for p in $(pgrep -x -- {name}); do cat /proc/$p/stat 2>/dev/null; done; "
        f"echo E; sleep {interval_s}; done"
    )


class CpuSampler:
    """Reads the sampler script's output in a thread and keeps every sample. Output that ends before
    ``stop`` (or, over SSH, stays away for ``SILENCE_S``) is an ``error``, and over SSH the session is
    given up (``SshSession.mark_lost``): its later commands fail at once instead of waiting."""

    def __init__(self, lines, close, on_lost=None, exit_status=None) -> None:
        self.lines = lines
        self._close = close
        self._on_lost = on_lost
        self._exit_status = exit_status or (lambda: None)
        self.stopping = False
        self.samples: list[Sample] = []
        self.hz = 100
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, daemon=True, name="cpu-sampler")

    @classmethod
    def over_ssh(cls, session: SshSession, process: str, interval_s: float = 1.0) -> CpuSampler:
        script = sampler_script(process, interval_s)  # checks the name before anything is sent
        lines, close, exit_status = session.stream(script)
        return cls(lines, close, session.mark_lost, exit_status).start()

    @classmethod
    def local(cls, process: str, interval_s: float = 1.0) -> CpuSampler:
        proc = subprocess.Popen(  # noqa: S603 - our own fixed script
            ["/bin/sh", "-c", sampler_script(process, interval_s)],
            stdout=subprocess.PIPE,
            text=True,
            # Its own process group: a Ctrl-C of `tollgate run` (the terminal signals the foreground
            # group) cancels the run, it must not end the sampling. Orphaned, it dies at its next
            # line (SIGPIPE).
            process_group=0,
        )
        return cls(proc.stdout, proc.kill).start()

    def start(self) -> CpuSampler:
        self.thread.start()
        return self

    def _read(self) -> None:
        try:
            self._parse()
            status = None if self.stopping else self._exit_status()
            if status is not None:  # the script ended there (a shell without its tools)
                self.error = f"the sampler exited with status {status}"
            elif not self.stopping:
                self._lose("the sampler's output ended")
        except TimeoutError:
            self._lose(f"no sample for {SILENCE_S:.0f} s")
        except (OSError, EOFError, paramiko.SSHException) as exc:
            if not self.stopping:
                self._lose(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a sample it cannot read: reported, the connection stays
            self.error = f"{type(exc).__name__}: {exc}"

    def _lose(self, reason: str) -> None:
        self.error = f"lost at {time.strftime('%H:%M:%S')}: {reason}"
        if self._on_lost is not None:
            self._on_lost(reason)

    def _parse(self) -> None:
        current: Sample | None = None
        for raw in self.lines:
            line = raw.rstrip("\n")
            if line.startswith("HZ "):
                self.hz = int(line.split()[1])
            elif line.startswith("T "):
                current = Sample(t=time.time(), uptime_s=float(line.split()[1]), host_busy=0, host_total=0)
            elif current is None:
                continue
            elif line.startswith("cpu "):
                cpu = parse_proc_stat_cpu(line)
                fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
                current.host_total = sum(int(cpu.get(f) or 0) for f in fields)
                current.host_busy = (
                    current.host_total - int(cpu.get("idle") or 0) - int(cpu.get("iowait") or 0)
                )
            elif line == "E":
                self.samples.append(current)
                current = None
            elif line:
                stat = parse_proc_pid_stat(line)
                current.procs[stat["pid"]] = {
                    "cpu": stat["utime"] + stat["stime"],
                    "threads": stat["num_threads"],
                    "comm": stat["comm"],
                }

    def wait_past(self, t: float, timeout_s: float = 5.0) -> bool:
        """Wait until a sample taken after ``t`` (wall clock) has arrived, so a window ending at ``t``
        is bracketed on both sides."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.samples and self.samples[-1].t >= t:
                return True
            if not self.thread.is_alive():
                return False
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self.stopping = True
        try:
            self._close()
        finally:
            self.thread.join(timeout=5)
