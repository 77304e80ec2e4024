"""Philox2x32-10 in numpy: known properties, and the block cache giving exactly the per-call bits."""

from __future__ import annotations

import numpy as np
from scipy import stats

from pearl import rng


def test_counter_draws_equal_direct_philox_across_blocks_and_sizes() -> None:
    draws = rng.CounterDraws(key=77, block=8)
    for call, n in enumerate([1, 1, 3, 3, 3, 1] + [2] * 20):  # size changes and block boundaries
        r0, r1 = draws.next(n)
        want0, want1 = rng.philox2x32(77, np.arange(n), np.uint32(call))
        np.testing.assert_array_equal(r0, want0)
        np.testing.assert_array_equal(r1, want1)


def test_bits_depend_on_key_and_both_counters() -> None:
    base = rng.philox2x32(1, np.arange(100), np.uint32(5))[0]
    assert not np.array_equal(base, rng.philox2x32(2, np.arange(100), np.uint32(5))[0])
    assert not np.array_equal(base, rng.philox2x32(1, np.arange(100), np.uint32(6))[0])
    assert len(set(base.tolist())) == 100


def test_uniform_below_and_normal_are_distributed_as_claimed() -> None:
    r0, r1 = rng.philox2x32(3, np.arange(200_000), np.uint32(0))
    u = rng.uniform(r0)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    counts = np.bincount(rng.below(r1, 6), minlength=6)
    assert counts.size == 6 and stats.chisquare(counts).pvalue > 1e-3
    assert stats.kstest(rng.normal(r0, r1), "norm").pvalue > 1e-3
