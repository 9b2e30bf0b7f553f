"""bench/client_paired runs end to end briefly: the engine's client and the blocking reference take
turns on a throwaway nginx and the last line carries both medians per arm and phase."""

from __future__ import annotations

import pytest

from bench.nginx import find_binary
from tests.conftest import bench_report


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_bench_client_paired_short_run_prints_both_clients(library):
    if not find_binary():
        pytest.skip("needs nginx")
    report = bench_report("client_paired", "--seconds", "0.6", "--repeat", "1", "--tls-library", library)
    assert report["settings"]["tls_library"] == library
    (run,) = report["runs"]
    for arm in ("plain_new", "tls_new"):
        # At least the floor of measured pairs, however slow the machine: 0.6 s alone may not suffice.
        assert run[arm]["pairs"] >= report["settings"]["min_pairs"] == 20
        for phase in ("connect_us", "ttlb_us"):
            row = run[arm][phase]
            assert row["engine_p50"] > 0 and row["blocking_p50"] > 0
            assert isinstance(row["within"], bool)
        # TTLB contains the connect (and for TLS the handshake): same boundaries in both clients.
        assert run[arm]["ttlb_us"]["blocking_p50"] > run[arm]["connect_us"]["blocking_p50"]
        assert run[arm]["ttlb_us"]["engine_p50"] > run[arm]["connect_us"]["engine_p50"]
    assert run["tls_new"]["ttlb_us"]["engine_p50"] > run["plain_new"]["ttlb_us"]["engine_p50"]
    assert report["all_within"] == all(
        run[arm][phase]["within"] for arm in ("plain_new", "tls_new") for phase in ("connect_us", "ttlb_us")
    )
