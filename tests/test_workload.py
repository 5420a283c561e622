"""Units and the α-β cost model (DESIGN §1)."""

import pytest

from topofinder.errors import TopofinderError
from topofinder.workload.cost import Workload, parse_bandwidth, parse_size, parse_time


def test_paper_table4_allreduce_time():
    # paper 001 Table 4: L^3(C(16,{3,4})) with T_L = 6, τ = 1.0195 M/B, α = 10 µs,
    # M/B = 1 MB / 100 Gbps = 83.886 µs → 2(60 + 1.0195·83.886) = 291.0 µs
    w = Workload.from_strings("10us", "100Gbps", "1MB")
    assert w.allreduce_time(6, 1.0195) * 1e6 == pytest.approx(291.0, abs=0.05)


def test_units_are_powers_of_1024_bytes_and_1000_bits():
    assert parse_size("1MB") == 1024 ** 2 == parse_size("1MiB")
    assert parse_size("2KB") == 2048 and parse_size("4096") == 4096
    assert parse_bandwidth("100Gbps") == 100e9 / 8 == parse_bandwidth("100Gb/s")
    assert parse_bandwidth("50GBps") == 50e9
    assert parse_time("10us") == pytest.approx(1e-5) == parse_time("10µs")
    assert parse_time("1.5ms") == pytest.approx(1.5e-3)


def test_size_profile_weights_normalise_and_average():
    w = Workload.from_strings(size="1MB:3,100MB:1")
    assert [round(x, 3) for _, x in w.sizes] == [0.75, 0.25]
    single = [Workload.from_strings(size=s).allreduce_time(5, 1.0) for s in ("1MB", "100MB")]
    assert w.allreduce_time(5, 1.0) == pytest.approx(0.75 * single[0] + 0.25 * single[1])


def test_alltoall_time_and_mix():
    w = Workload.from_strings("10us", "100Gbps", "1MB", alltoall_share=0.5)
    # (M/N)/(f·b), b = B/d: N = 32, d = 4, f = 0.0571
    t = w.alltoall_time(32, 4, 0.0571)
    assert t == pytest.approx((1024 ** 2 / 32) / (0.0571 * 100e9 / 8 / 4))
    assert w.objective(2.0, 4.0) == pytest.approx(3.0)


@pytest.mark.parametrize("bad", ["ten", "10", "10 parsecs", "-1us"])
def test_bad_latency(bad):
    with pytest.raises(TopofinderError):
        parse_time(bad)


@pytest.mark.parametrize("bad", ["1XB", "0MB", "MB", "1MB:-1"])
def test_bad_sizes(bad):
    with pytest.raises(TopofinderError):
        Workload.from_strings(size=bad)


def test_bad_share():
    with pytest.raises(TopofinderError):
        Workload.from_strings(alltoall_share=1.5)
