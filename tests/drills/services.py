"""Private Redis and PostgreSQL servers for the fault drills: started by the test on free loopback
ports, stopped and started again at will, and killed (process group) when the test is done.

Nothing here touches the shared servers on 6379/5432: a drill may restart or stop its own servers
without disturbing the other tests (or the other helpers) on the machine.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0, sig: int = signal.SIGTERM) -> None:
    """``sig`` to the process group of ``proc`` (started with start_new_session), SIGKILL after
    ``grace_s``; a stopped (SIGSTOP) group is continued first so that it can act on ``sig``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class PrivateRedis:
    """``redis-server`` on its own loopback port, no persistence: a restart loses every key (the
    broker's queues and the cache), as a crashed Redis without AOF does."""

    def __init__(self, workdir: Path) -> None:
        self.binary = shutil.which("redis-server")
        self.dir = workdir
        self.port = free_port()
        self.log = workdir / "redis.log"
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout_s: float = 10) -> PrivateRedis:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [self.binary, *args, "--dir", str(self.dir)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on {self.port}:\n{tail(self.log)}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Gone at once (SIGKILL): clients see refused connections until ``start``."""
        if self.proc is not None:
            kill_group(self.proc, grace_s=5, sig=signal.SIGKILL)

    def restart(self, down_s: float = 0.0) -> None:
        """Stop, stay down ``down_s``, start again on the same port (empty)."""
        self.stop()
        time.sleep(down_s)
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin that has initdb (Debian's layout), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivatePostgres:
    """A PostgreSQL cluster made with initdb in a temporary directory (trust auth, superuser
    ``postgres``), its postmaster a child of the test on its own port and socket directory. Runs
    as the ``postgres`` system user when the test runs as root (initdb refuses root). Durability
    is off (fsync): the drills stop it cleanly or kill it, and throw it away afterwards."""

    SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=60")

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user = "postgres" if os.geteuid() == 0 else None
        # Not under pytest's tmp_path: that is private to root (0700) and the postgres user must
        # reach the data and socket directories.
        self.dir = Path(tempfile.mkdtemp(prefix="tollgate-drill-pg-"))
        self.data, self.sockets, self.log = self.dir / "data", self.dir / "sockets", self.dir / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.sockets.mkdir()
        if self.user:
            entry = pwd.getpwnam(self.user)
            for path in (self.dir, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def _as_owner(self) -> dict:
        return {"user": self.user, "group": pwd.getpwnam(self.user).pw_gid} if self.user else {}

    def init(self) -> PrivatePostgres:
        done = subprocess.run(
            [self.bindir / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            + ["--no-sync", "--locale=C"],
            capture_output=True,
            text=True,
            cwd=self.dir,
            **self._as_owner(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return self

    def url(self, dbname: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self, timeout_s: float = 20) -> PrivatePostgres:
        options = [item for setting in self.SETTINGS for item in ("-c", setting)]
        log = open(self.log, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.proc = subprocess.Popen(
                [self.bindir / "postgres", "-D", self.data, "-p", str(self.port), "-k", self.sockets]
                + ["-c", "listen_addresses=127.0.0.1", *options],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
                **self._as_owner(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while not self.accepts():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start on {self.port}:\n{tail(self.log)}")
            time.sleep(0.05)
        return self

    def accepts(self) -> bool:
        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: str = "fast") -> None:
        """``fast`` (SIGINT: clients are disconnected, a clean shutdown), ``immediate`` (SIGQUIT) or
        ``kill`` (SIGKILL of the whole group, as a crashed host)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT, "kill": signal.SIGKILL}[mode]
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig) if mode != "kill" else os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill_group(self.proc, grace_s=0, sig=signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        """One statement outside a transaction (CREATE/DROP DATABASE)."""
        with psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def destroy(self) -> None:
        if self.proc is not None:
            kill_group(self.proc, grace_s=10, sig=signal.SIGINT)
        shutil.rmtree(self.dir, ignore_errors=True)
