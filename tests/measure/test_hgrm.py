"""Bulk histogram path, .hgrm round trip, encoded-histogram merge."""

import numpy as np
import pytest

from lob.measure.hgrm import decode, encode, hgrm_text, merge, parse_hgrm, read_hgrm, write_hgrm
from lob.measure.latency import PERCENTILES, LatencyStats, histogram_from, new_histogram


def _samples(n=20_000, seed=7):
    rng = np.random.default_rng(seed)
    s = rng.lognormal(6.5, 1.7, n).astype(np.int64)
    s[:4] = [0, 1, 2047, 3_000_000]  # zero, the lowest value, a bucket edge, a large value
    return s


def _per_value(samples):
    h = new_histogram()
    for v in samples.tolist():
        assert h.record_value(v)
    return h


def test_bulk_path_equals_record_value():
    s = _samples()
    bulk, clamped = histogram_from(s)
    ref = _per_value(s)
    assert clamped == 0
    for q in (*PERCENTILES, 0.0, 25.0, 75.0, 99.999, 100.0):
        assert bulk.get_value_at_percentile(q) == ref.get_value_at_percentile(q), q
    assert LatencyStats.of(bulk) == LatencyStats.of(ref)
    assert bulk.get_min_value() == ref.get_min_value() == 0
    assert bulk.encode() == ref.encode()


def test_bulk_adds_to_existing_histogram():
    a, b = _samples(5000, 1), _samples(5000, 2)
    h, _ = histogram_from(a)
    histogram_from(b, h)
    ref = _per_value(np.concatenate([a, b]))
    assert h.encode() == ref.encode()


def test_values_above_one_second_are_clamped_and_counted():
    s = np.array([10, 20, 2_000_000_000, 5_000_000_000], dtype=np.int64)
    h, clamped = histogram_from(s)
    assert clamped == 2
    st = LatencyStats.of(h, clamped)
    assert st.count == 4 and st.clamped == 2
    assert st.max == h.get_highest_equivalent_value(1_000_000_000)


def test_negative_sample_is_an_error():
    with pytest.raises(ValueError, match=">= 0"):
        histogram_from(np.array([5, -1]))


def test_empty_samples():
    h, c = histogram_from(np.zeros(0, dtype=np.int64))
    assert h.get_total_count() == 0 and c == 0
    assert LatencyStats.of(h).count == 0


def test_hgrm_round_trip(tmp_path):
    h, _ = histogram_from(_samples())
    path = write_hgrm(h, tmp_path / "x.hgrm")
    back = read_hgrm(path)
    for q in (*PERCENTILES, 100.0):
        assert back.value_at_percentile(q) == h.get_value_at_percentile(q), q
    assert back.total_count == h.get_total_count()
    assert back.max == h.get_max_value()
    assert back.mean == pytest.approx(h.get_mean_value(), abs=1e-3)
    assert np.all(np.diff(back.percentiles) >= 0)  # plotters need increasing rows
    assert back.total_counts[-1] == h.get_total_count()
    df = back.frame()  # the table an HDR plot draws (value against 1/(1-percentile))
    assert list(df.columns) == ["value_ns", "percentile", "count", "inv"]
    assert df["inv"].iloc[0] == pytest.approx(1.0) and np.isinf(df["inv"].iloc[-1])


def test_hgrm_has_standard_header_and_footer():
    h, _ = histogram_from(_samples(1000))
    text = hgrm_text(h)
    first = text.splitlines()[0].split()
    assert first == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    assert "#[Mean" in text and "#[Max" in text and "#[Buckets" in text


def test_parse_rejects_non_hgrm():
    with pytest.raises(ValueError, match="hgrm"):
        parse_hgrm("hello\n")


def test_encoded_histograms_merge_losslessly():
    a, b = _samples(3000, 3), _samples(4000, 4)
    ha, _ = histogram_from(a)
    hb, _ = histogram_from(b)
    merged = merge([encode(ha), encode(hb)])
    ref = _per_value(np.concatenate([a, b]))
    assert merged.get_total_count() == 7000
    for q in PERCENTILES:
        assert merged.get_value_at_percentile(q) == ref.get_value_at_percentile(q)
    assert decode(encode(ha)).encode() == ha.encode()
