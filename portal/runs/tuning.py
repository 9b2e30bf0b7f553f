"""The run form's TLS matrix, WAN projection and saturation search: their checks, and the saturation
search's fields, kept beside ``RunForm`` (``tls_matrix``, ``wan_rtt_ms`` and ``generators`` are fields
of ``portal.lib.runs.runspec.RunSpec``, made by ``portal.runs.specform``).

``tls_matrix`` goes to the engine (``EngineConfig.tls_matrix``: which dimensions ``tls_new`` and
``h2_new`` are repeated under, ``portal.lib.tls.matrix``); ``wan_rtt_ms`` is portal-only
(``portal.runs.configs``): the RTTs of the report's WAN projection (``portal.lib.stats.wan``). The
``saturation_*`` fields make ``EngineConfig.saturation`` (``portal.lib.stats.saturation``; issue 15): the
capacity search after the arms.
"""

from __future__ import annotations

from django import forms

from portal.lib.runs import runspec
from portal.lib.runs.protocol import ARMS
from portal.lib.stats import capacity, saturation, wan
from portal.lib.stats.costs import UNCONFIRMED
from portal.lib.tls import advice, matrix

SATURATION_FIELDS = (
    "saturation_arms",
    "saturation_mode",
    "saturation_start",
    "saturation_max",
    "saturation_stage_s",
)


class TuningFields(forms.Form):
    saturation_arms = forms.MultipleChoiceField(
        label="Saturation search",
        required=False,
        choices=[(arm, arm) for arm in ARMS],
        widget=forms.CheckboxSelectMultiple,
        help_text="After the run's arms, each ticked arm (it must be among the arms) runs again in stages of "
        "rising load — coarse steps × 2, then smaller ones around the knee — until throughput stops "
        "rising, latency knees or errors appear. A saturated generator is reported as the limit, never "
        "as the server's. The report's capacity chart: tick plain and tls_new for the capacity cost of TLS.",
    )
    saturation_mode = forms.ChoiceField(
        label="Search by",
        required=False,
        initial="users",
        choices=[("users", "users (closed loop)"), ("rate", "arrival rate, req/s (open loop)")],
    )
    saturation_start = forms.FloatField(
        label="Start load",
        required=False,
        min_value=0.001,
        help_text="Users or req/s; blank: 1 user / 1 req/s.",
    )
    saturation_max = forms.FloatField(
        label="Maximum load",
        required=False,
        min_value=0.001,
        help_text=f"Users or req/s; blank: {saturation.DEFAULTS['max']}. Held to the project's limits.",
    )
    saturation_stage_s = forms.FloatField(
        label="Seconds per stage",
        required=False,
        min_value=saturation.MIN_STAGE_S,
        max_value=saturation.MAX_STAGE_S,
        help_text=f"Measured window of each stage (plus {saturation.DEFAULTS['warmup_s']:g} s warm-up); "
        f"blank: {saturation.DEFAULTS['stage_s']:g}.",
    )

    def _listed(self, field: str, parse) -> list:
        """A list field given as a list (API) or as comma-separated text (form, CLI), parsed."""
        value = self.cleaned_data.get(field) or ""
        if not isinstance(value, str | list):
            raise forms.ValidationError("Expected a list or a string.")
        try:
            return parse(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_wan_rtt_ms(self) -> list[float]:
        return self._listed("wan_rtt_ms", wan.parse_rtts)

    def clean_tls_groups(self) -> list[str]:
        return self._listed("tls_groups", matrix.parse_groups)

    def clean_generators(self) -> int:
        """A number of processes, or "auto" (stored as 0: one per core of each generator host)."""
        try:
            value = self.cleaned_data.get("generators")
            if isinstance(value, int):  # typed (the API, a saved scenario): 0 is auto as stored
                return value if value == 0 else runspec.parse_generators(value)
            return runspec.parse_generators(value or "1")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_tuning(self, data: dict) -> None:
        """The matrix repeats tls_new or h2_new: without either there is nothing to repeat. The
        saturation search's settings, checked (``portal.lib.stats.saturation.normalise``), become
        ``data["saturation"]``."""
        if data.get("tls_matrix") and matrix.needs_arm_error(data.get("arms") or []):
            self.add_error(
                "tls_matrix",
                "The TLS matrix repeats the tls_new arm (and h2_new, for HTTP/2): add tls_new or h2_new to "
                'the arms (tick it, or list it in --arms / "arms").',
            )
        if data.get("tls_matrix") and data.get("generators", 1) != 1:
            self.add_error("generators", "The TLS matrix runs with one generator process (1).")
        data["saturation"] = None
        if data.get("saturation_arms"):
            wanted = {"arms": data["saturation_arms"], "mode": data.get("saturation_mode") or "users"}
            for key in ("start", "max", "stage_s"):
                if data.get(f"saturation_{key}") is not None:
                    wanted[key] = data[f"saturation_{key}"]
            try:
                data["saturation"] = saturation.normalise(wanted, list(data.get("arms") or []))
            except ValueError as exc:
                self.add_error("saturation_arms", str(exc).removeprefix("saturation: ").capitalize() + ".")

    def tuning_config(self) -> dict:
        data = self.cleaned_data
        return {
            "tls_matrix": matrix.parse_dimensions(data.get("tls_matrix") or []),
            "tls_groups": data.get("tls_groups") or [],
            "wan_rtt_ms": data.get("wan_rtt_ms") or list(wan.DEFAULT_RTTS_MS),
            "generators": data.get("generators", 1),
            "saturation": data.get("saturation"),
        }


def report_lines(report: dict) -> list[str]:
    """The matrix's refusals, the advice and the WAN projection as ``tollgate run`` prints them
    without ``--json`` (the arms' lines come before; measured sub-arms are among them)."""
    lines = [
        f"refused  {m['arm']}: {m.get('detail_words') or m['detail']}"
        for m in report.get("matrix") or []
        if m["status"] == "refused"
    ]
    for item in report.get("advice") or []:
        low_high = item["ci95"]
        # No verdict without an interval (portal.lib.stats.costs.UNCONFIRMED).
        ci = (
            f"95% CI {low_high[0] / 1000:.3f} … {low_high[1] / 1000:.3f} ms, {item['verdict']}"
            if low_high
            else f"unconfirmed: {UNCONFIRMED}"
        )
        saving = item["saving_us"] / 1000
        lines.append(f"advice   {item['title']}: saves {saving:.3f} ms TTLB per request ({ci})")
        if item.get("hybrid"):
            lines.append(f"         {advice.hybrid_words(item['hybrid']).strip()}")
    rows = report.get("wan") or []
    if rows:
        rtts = list(dict.fromkeys(row["rtt_ms"] for row in rows))
        formula = (report.get("wan_model") or {}).get("formula", wan.FORMULA)
        lines.append(f"WAN      {formula}; projected TTLB (ms) at RTT")
        lines.append(f"  {'arm':28} {'round trips':>11} " + " ".join(f"{rtt:>9g} ms" for rtt in rtts))
        for name in dict.fromkeys(row["arm"] for row in rows):
            mine = [row for row in rows if row["arm"] == name]
            cells = " ".join(f"{row['projected_ttlb_ms']:>12.3f}" for row in mine)
            lines.append(f"  {name:28} {mine[0]['round_trips']:>11g} {cells}")
    return lines + capacity.report_lines(report)
