"""What operators record about their generator hosts: ``bench/generator``'s figures per host."""

from __future__ import annotations

from django.db import models


class GeneratorBench(models.Model):
    """The last ``bench/generator`` run recorded for a generator host (``manage.py tollgate record-bench``):
    the engine's requests per generator CPU-second per arm, beside what its runs measured."""

    host = models.CharField(max_length=255, unique=True)
    recorded = models.DateTimeField()
    # portal.lib.stats.hostcapacity.bench_figures: {"plain", "tls", "tls_new"} requests per CPU-s, "cores".
    figures = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"bench of {self.host}"
