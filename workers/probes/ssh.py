"""Server-side probes over SSH (and the same sampler on the local host).

Django-free. One SSH connection per run: a host key pinned on first use (a changed key stops the
probe), a CPU sampler streaming ``/proc/stat`` and ``/proc/<pid>/stat`` of the named processes once
a second over one exec channel, and one-shot commands (``openssl speed``, ``cryptsetup benchmark``).
"""

from __future__ import annotations

import io
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import paramiko

from portal.lib.names import process_name_problem
from portal.lib.sshkeys import PublicKey, key_from_known_hosts, known_hosts_line
from workers.probes.parsers import parse_proc_pid_stat, parse_proc_stat_cpu

CONNECT_TIMEOUT_S = 10.0


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

    def connect(self) -> SshSession:
        t = self.target
        pinned = key_from_known_hosts(t.known_hosts, t.host, t.port) if t.known_hosts else None
        policy = _Pin(pinned)
        self.client.set_missing_host_key_policy(policy)
        pkey = load_private_key(t.private_key)
        try:
            sock = socket.create_connection((t.address or t.host, t.port), timeout=CONNECT_TIMEOUT_S)
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
        return self

    @property
    def host_public(self) -> PublicKey:
        return public_key(self.host_key)

    @property
    def host_key_line(self) -> str:
        return known_hosts_line(self.target.host, self.target.port, self.host_public)

    def run(self, command: list[str], timeout_s: float = 300.0) -> tuple[int, str]:
        """Run one command; (exit status, stdout + stderr)."""
        channel = self.client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
        channel.set_combine_stderr(True)
        channel.settimeout(timeout_s)
        channel.exec_command(shlex.join(command))
        chunks = []
        try:
            while True:
                data = channel.recv(65536)
                if not data:
                    break
                chunks.append(data)
        except TimeoutError:
            channel.close()
            raise ProbeError(f"{command[0]} took longer than {timeout_s:.0f} s") from None
        status = channel.recv_exit_status()
        channel.close()
        return status, b"".join(chunks).decode("utf-8", "replace")

    def stream(self, script: str):
        """A line iterator over a long-running shell script's stdout, and a closer."""
        channel = self.client.get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
        channel.exec_command("sh -c " + shlex.quote(script))
        return channel.makefile("r"), channel.close

    def close(self) -> None:
        self.client.close()


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


@dataclass
class Sample:
    t: float  # local wall clock (time.time()) when the sample arrived
    uptime_s: float  # the server's own clock (monotonic), for intervals
    host_busy: int  # jiffies, all CPUs: everything but idle and iowait
    host_total: int
    procs: dict[int, dict] = field(default_factory=dict)  # pid -> {"cpu": utime+stime, "threads", "comm"}


class CpuSampler:
    """Reads the sampler script's output in a thread and keeps every sample."""

    def __init__(self, lines, close) -> None:
        self.lines = lines
        self._close = close
        self.samples: list[Sample] = []
        self.hz = 100
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, daemon=True, name="cpu-sampler")

    @classmethod
    def over_ssh(cls, session: SshSession, process: str, interval_s: float = 1.0) -> CpuSampler:
        script = sampler_script(process, interval_s)  # checks the name before anything is sent
        lines, close = session.stream(script)
        return cls(lines, close).start()

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
        current: Sample | None = None
        try:
            for raw in self.lines:
                line = raw.rstrip("\n")
                if line.startswith("HZ "):
                    self.hz = int(line.split()[1])
                elif line.startswith("T "):
                    current = Sample(
                        t=time.time(), uptime_s=float(line.split()[1]), host_busy=0, host_total=0
                    )
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
        except Exception as exc:  # noqa: BLE001 - reported with the probe, never fatal to the run
            self.error = f"{type(exc).__name__}: {exc}"

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
        try:
            self._close()
        finally:
            self.thread.join(timeout=5)


def _cumulative(samples: list[Sample]) -> list[float]:
    """Total jiffies of the sampled processes at each sample, carried across processes that vanish
    (a worker that exits keeps what it used) and starting new ones from 0."""
    last: dict[int, int] = {}
    totals = []
    for s in samples:
        for pid, proc in s.procs.items():
            last[pid] = proc["cpu"]
        totals.append(float(sum(last.values())))
    return totals


def _at(times: list[float], values: list[float], t: float) -> float:
    """Linear interpolation of values over times at t (clamped to the ends)."""
    if t <= times[0]:
        return values[0]
    for k in range(1, len(times)):
        if t <= times[k]:
            t0, t1 = times[k - 1], times[k]
            frac = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
            return values[k - 1] + frac * (values[k] - values[k - 1])
    return values[-1]


def cpu_in_window(samples: list[Sample], hz: int, start: float, end: float) -> dict | None:
    """CPU seconds the sampled processes used in [start, end] (local wall clock).

    The cumulative jiffies are interpolated linearly at both edges between the samples that bracket
    them, so neither the warm-up before nor the idle time after leaks in. Needs a sample at or before
    ``start`` and one at or after ``end``.
    """
    if not samples or samples[0].t > start or samples[-1].t < end:
        return None
    times = [s.t for s in samples]
    totals = _cumulative(samples)
    cpu_jiffies = _at(times, totals, end) - _at(times, totals, start)
    inside = [s for s in samples if start <= s.t <= end]
    bracket = [s for s in samples if s.t <= start][-1:] + inside + [s for s in samples if s.t >= end][:1]
    host_busy = bracket[-1].host_busy - bracket[0].host_busy
    host_total = bracket[-1].host_total - bracket[0].host_total
    timeline = []
    for a, b in zip(bracket, bracket[1:], strict=False):
        dt = b.uptime_s - a.uptime_s
        if dt <= 0:
            continue
        used = sum(proc["cpu"] - a.procs.get(pid, {"cpu": 0})["cpu"] for pid, proc in b.procs.items())
        timeline.append(
            {
                "epoch_s": round(b.t, 3),
                "cpu_pct": round(100.0 * used / hz / dt, 1),
                "threads": sum(proc["threads"] for proc in b.procs.values()),
                "host_cpu_pct": round(
                    100.0 * (b.host_busy - a.host_busy) / max(b.host_total - a.host_total, 1), 1
                ),
            }
        )
    return {
        "cpu_s": round(cpu_jiffies / hz, 6),
        "window_s": round(end - start, 3),
        "samples": len(inside),
        "processes": len({pid for s in bracket for pid in s.procs}),
        "host_cpu_pct": round(100.0 * host_busy / host_total, 1) if host_total else None,
        "timeline": timeline,
    }


def moving_average(values: list[float | None], width: int = 15) -> list[float | None]:
    """Trailing moving average over ``width`` points (the SAP study's 15 s average)."""
    out: list[float | None] = []
    for i in range(len(values)):
        window = [v for v in values[max(0, i - width + 1) : i + 1] if v is not None]
        out.append(round(sum(window) / len(window), 1) if window else None)
    return out
