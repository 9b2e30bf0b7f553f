"""A Run (one benchmark of a target) and its ArmResults (one per arm, written as each arm ends)."""

from __future__ import annotations

from uuid import uuid4

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.lib.report import evidence
from portal.scenarios.models import Scenario
from portal.targets.models import Target


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # The engine finished and its arms are kept, but none of the costs the run asked for could
        # be computed (their arms refused or invalid): no answer, so no success (docs/ci.md).
        INCOMPLETE = "incomplete"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.INCOMPLETE)

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="runs")
    # Who started it: a member may delete the runs they started.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="runs")
    target = models.ForeignKey(Target, models.CASCADE, related_name="runs")
    scenario = models.ForeignKey(Scenario, models.SET_NULL, null=True, blank=True, related_name="runs")
    scenario_version = models.PositiveIntegerField(null=True, blank=True)  # the scenario's version it ran
    # The engine config as submitted (protocol.EngineConfig): the run's own record of what was
    # asked, immune to later edits of the scenario.
    config = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    # Failed in the engine's preflight of every arm (unreachable, a certificate that does not verify,
    # an answer outside the expected set), before any load: nothing measured, not counted in quotas.
    preflight_failed = models.BooleanField(default=False)
    cancel_requested = models.BooleanField(default=False)
    # Generator facts from the engine's hello: versions, host, CPU.
    engine = models.JSONField(default=dict, blank=True)
    # TLS facts from one real handshake with the TLS URL (workers.engine.tls.facts).
    tls_info = models.JSONField(default=dict, blank=True)
    # The Server header each URL answered the preflight with: {"tls": "nginx/1.26.0", "plain": …}
    # (None: no arm went there, or no header). Empty for runs from before it was recorded.
    server_software = models.JSONField(default=dict, blank=True)
    # The TLS configuration matrix's variants as the engine probed them (portal.lib.tls.matrix): name,
    # variant, status measured|refused, detail, negotiated parameters. Empty without a matrix.
    variants = models.JSONField(default=list, blank=True)
    # The saturation search's stages as the engine ran them (portal.lib.stats.capacity.stage_point):
    # {"settings": EngineConfig.saturation, "arms": {"<arm>": [point, …]}}. Empty without a search.
    capacity = models.JSONField(default=dict, blank=True)
    # Arms the server's protocols could not serve, found in the preflight and not measured (an h2 arm
    # against a server without h2 over ALPN): [{"arm", "url", "reason"}]. Empty when none.
    refused_arms = models.JSONField(default=list, blank=True)
    # Server-side probes: {"openssl_speed": {host: …}, "cryptsetup": …, "host_key": …, "errors": […]}.
    probes = models.JSONField(default=dict, blank=True)
    # Written when the run ends, for lists and trends: {"requests", "costs": [headline costs]}.
    summary = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=16, default="web")  # web, cli, api, webhook, schedule
    # Why a queued run has not started yet, e.g. "waiting for a generator (1 running on HOST)", or
    # "resuming: <why its last attempt ended>". Who executes it, and since when, is its attempts'
    # (RunAttempt): the run keeps what its readers see.
    waiting = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            # Runs list: a project's runs, newest first.
            models.Index(fields=["project", "-created"], name="run_project_created_idx"),
            # Queue view: what is waiting.
            models.Index(fields=["created"], condition=Q(status="queued"), name="run_queued_idx"),
            # Quotas: a project's runs in flight, counted before every start (form, API, webhook).
            models.Index(
                fields=["project"],
                condition=Q(status__in=["queued", "running"]),
                name="run_project_active_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.code} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def failure_reason(self) -> str:
        """Why it failed or is incomplete (the first line of its error), said first wherever its
        status is shown; "" otherwise (``portal.lib.report.evidence.failure_reason``)."""
        return evidence.failure_reason(self.status, self.error)

    @property
    def error_detail(self) -> str:
        """Its error after the line its status already says (``evidence.error_detail``)."""
        return evidence.error_detail(self.status, self.error)

    @property
    def library_said(self) -> str:
        """The TLS library's text behind its reason in words (``evidence.library_said``)."""
        return evidence.library_said(self.status, self.error)

    @property
    def arm_names(self) -> list[str]:
        return [arm["name"] for arm in self.config.get("arms", [])]


class RunAttempt(models.Model):
    """One execution of a run: each claim (first start or resumption, ``workers.runner.claim``) opens
    one, and only its executor may beat, store arms or finish the run, each write a compare-and-set on
    this row still being open (``ended`` null): an executor that wakes up after its attempt was ended
    (reaped, resumed elsewhere) writes nothing. A running run has exactly one open attempt; every
    change of the run's status out of ``running`` closes it in the same transaction."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()  # 1 for the first claim, then 2, 3 … per resumption
    # Who executes it: "celery@host pid 1234" or "cli@host pid 1234" (workers.attempts.executor_name).
    worker = models.CharField(max_length=255)
    # The generator host it runs on (TOLLGATE_MAX_RUNS_PER_GENERATOR counts open attempts per host).
    host = models.CharField(max_length=255)
    claimed = models.DateTimeField()
    # Touched by the executor every 2 s while the attempt is open; the reaper ends silent ones.
    heartbeat = models.DateTimeField()
    # It must have ended by then (claim time + the remaining arms' run limit + a margin); past it,
    # the reaper acts. Null only for attempts recorded before Tollgate kept deadlines per attempt.
    deadline = models.DateTimeField(null=True, blank=True)
    # The arm being measured, from the heartbeat: what a lost executor was doing.
    current_arm = models.CharField(max_length=80, blank=True)
    # Set when the executing worker is asked to stop (SIGTERM): the executor hands the run back.
    handback = models.BooleanField(default=False)
    ended = models.DateTimeField(null=True, blank=True)
    # running (open), then lost | handed back | succeeded | failed | cancelled | incomplete, and why.
    outcome = models.CharField(max_length=16, default="running")
    reason = models.TextField(blank=True)
    arms = models.JSONField(default=list, blank=True)  # "arm#round" it stored finished, set at its end
    # Arms it left cut short, removed before the next attempt measured them again:
    # [{"arm", "round", "attempt", "worker", "requests", "failures", "measured_s"}].
    partial = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            # One row per claim; also serves a run's history (the report) and its last attempt.
            models.UniqueConstraint(fields=["run", "number"], name="runattempt_run_number_uniq"),
        ]
        indexes = [
            # Claims: the open attempts on a generator host, counted under the host's lock; and the
            # dead-slot check's holders on that host.
            models.Index(fields=["host"], condition=Q(ended__isnull=True), name="runattempt_open_host_idx"),
            # Reaper: open attempts by heartbeat (silent ones first); the deadline is checked on the
            # same few rows (one open attempt per running run).
            models.Index(
                fields=["heartbeat"], condition=Q(ended__isnull=True), name="runattempt_open_heartbeat_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.run_id} ({self.outcome})"

    def entry(self) -> dict:
        """As the report's ``run.attempts`` lists it (docs/report-schema.md)."""
        entry = {
            "attempt": self.number,
            "worker": self.worker,
            "host": self.host,
            "started": self.claimed.isoformat(),
            "ended": self.ended.isoformat() if self.ended else None,
            "outcome": self.outcome,
            "reason": self.reason,
            "arms": self.arms,
        }
        return entry | ({"partial": self.partial} if self.partial else {})


class WorkerSeen(models.Model):
    """A Celery worker as it last reported itself (workers.presence): which queues it consumes and
    when. Queued runs use it to say why nobody has taken them; the reaper to judge resumption."""

    name = models.CharField(max_length=255, unique=True)  # Celery's node name, e.g. celery@host
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField(default=0)
    queues = models.JSONField(default=list)
    last_seen = models.DateTimeField()
    stopping = models.BooleanField(default=False)  # warm shutdown under way

    def __str__(self) -> str:
        return self.name


class GeneratorHost(models.Model):
    """One row per generator host: claims on a host lock its row, so two workers of one host never
    both see a free slot (workers.runner.claim)."""

    host = models.CharField(max_length=255, unique=True)
    last_claim = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.host


class ArmResult(models.Model):
    """One arm of one run. Latencies are encoded HDR histograms in µs (never raw samples)."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="arms")
    # An arm, or a TLS matrix sub-arm such as "tls_new@1.2+x25519+ecdsa+ticket" (portal.lib.tls.matrix).
    arm = models.CharField(max_length=64)
    round = models.PositiveSmallIntegerField(default=0)  # rounds interleave arms: A B C A B C …
    position = models.PositiveSmallIntegerField()
    url = models.URLField(max_length=500)  # what was measured (the final URL after redirects)
    requested_url = models.URLField(max_length=500, blank=True)  # what the user asked for
    targets = models.JSONField(default=list)  # [{"path", "weight", "requested"}]: the request mix
    redirects = models.JSONField(default=list)  # [{"from", "to", "status"}] resolved before measuring
    complete = models.BooleanField(default=True)  # false: cut short by cancel
    # Why the engine stopped the arm early ("target unreachable: 97% of 1,234 attempts failed in the
    # last 3 s (connection refused)", workers/engine/unreachable.py); "" when it was not.
    stopped = models.CharField(max_length=300, blank=True)
    users = models.PositiveIntegerField()
    warmup_s = models.FloatField()
    warmup_requests = models.PositiveIntegerField(default=0)
    # Answers that ended neither in the warm-up nor in the window (started before it, or ended after
    # it closed): sent to the server, never measured.
    unwindowed_requests = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField()  # measured window, warm-up excluded
    requests = models.PositiveBigIntegerField()
    failures = models.PositiveBigIntegerField()
    rps = models.FloatField()
    ttfb_hist = models.TextField(blank=True)
    ttlb_hist = models.TextField(blank=True)
    connect_hist = models.TextField(blank=True)
    tls_handshake_hist = models.TextField(blank=True)
    status_codes = models.JSONField(default=dict)
    response_bytes_min = models.PositiveBigIntegerField(null=True)
    response_bytes_max = models.PositiveBigIntegerField(null=True)
    sizes_by_url = models.JSONField(default=dict)
    # {path: {"content_type": [...], "content_encoding": [...]}}: distinct headers of expected answers
    # per request target ("" when the header was absent).
    content_by_url = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=dict)
    connections_opened = models.PositiveBigIntegerField(default=0)
    # Keep-alive arms: connections opened in the window because the server had closed the user's
    # previous one (its keep-alive limit or idle timeout). Null: stored before the engine counted them.
    connections_reopened = models.PositiveBigIntegerField(null=True, blank=True)
    tls_sessions_reused = models.PositiveBigIntegerField(default=0)
    # Open loop only: requests that started after their scheduled time, and the worst lag in µs.
    late_requests = models.PositiveBigIntegerField(default=0)
    max_schedule_lag_us = models.PositiveBigIntegerField(default=0)
    # Server CPU of the sampled processes in the measured window (workers.probes.cpu.cpu_in_window).
    server_cpu = models.JSONField(default=dict, blank=True)
    window_started = models.FloatField(null=True, blank=True)  # epoch s, wall clock of the generator
    window_ended = models.FloatField(null=True, blank=True)
    series = models.JSONField(default=list)  # one point per measured second
    # Distributed runs: each Locust worker's share of this arm, [{"id", "host", "requests", "failures",
    # "cpu_s", "lost_at", "lost_reason", "hist"}] (workers.engine.distribution.arm); [] on one process.
    generators = models.JSONField(default=list, blank=True)
    # HTTP/2 arms: {"alpn": {protocol: connections}, "peer_max_streams": the server's lowest
    # SETTINGS_MAX_CONCURRENT_STREAMS or null, "streams_peak", "goaway": {error code: count}} in the
    # window (workers.engine.recording.recorder); null on HTTP/1.1 arms.
    http2 = models.JSONField(null=True, blank=True)
    # HTTP/3 arms: the engine's ``result.quic`` (docs/engine-protocol.md, "HTTP/3": version, ALPN, group,
    # 0-RTT accepted/refused, datagrams, packets lost, first flight ...) over the window; null otherwise.
    quic = models.JSONField(null=True, blank=True)
    # The worker and attempt that measured it (RunAttempt.worker, .number): resumed runs mix attempts.
    worker = models.CharField(max_length=255, blank=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    started = models.DateTimeField()
    finished = models.DateTimeField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "arm", "round"], name="armresult_run_arm_round_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.arm} (round {self.round}) of {self.run_id}"


class RunReport(models.Model):
    """The computed report page of a finished run (``portal.runs.reporting.report_page``), stored so
    that no reader pays for computing it from the histograms. ``key`` names the run's finish time
    and the report version; a different key means the stored page is stale and is rebuilt.

    Beside it, the report section of the run's page rendered from it (``portal.runs.pages``):
    HTML with its live slots, and the status line's evidence. ``section_key`` is the report's key
    and a digest of what the HTML is made of; a section stored under another key is rendered again."""

    run = models.OneToOneField(Run, models.CASCADE, related_name="stored_report")
    key = models.CharField(max_length=200)
    page = models.JSONField()
    computed_ms = models.FloatField()  # how long computing it from the histograms took
    created = models.DateTimeField(auto_now=True)
    section_key = models.CharField(max_length=300, blank=True, default="")
    section = models.TextField(blank=True, default="")
    section_evidence = models.JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return f"report of {self.run_id} ({self.key})"
