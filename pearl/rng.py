"""Philox2x32-10, a counter-based random number generator (Salmon et al., SC'11), in numpy.

Exploration draws its randomness from (key, counter) pairs instead of a stateful stream, so any adapter
that implements the same function — the OpenCL kernels do, in rng.cl — makes the same exploration
decisions for the same seed, call number and element, whatever the device or the order of work-items.

    philox(key, c0, c1) -> (r0, r1): 10 rounds of
        hi, lo = mulhilo32(0xD256D193, c0);  (c0, c1) = (hi ^ key ^ c1, lo);  key += 0x9E3779B9 (before rounds 2..10)

ε-greedy explores element i when uniform(r0) < ε and then takes action below(r1, n_actions); Gaussian noise
for element i is σ · normal(r0, r1), and DDPG's Ornstein–Uhlenbeck noise takes its increment's normal(r0, r1)
from the same counters (pearl/algos/ddpg.py). Uniform floats use the top 24 bits, u = (r >> 8) · 2^-24 ∈ [0, 1),
which float32 holds exactly; a uniform integer in [0, n) is ((r >> 8) · n) >> 24, pure integer arithmetic.
Both are bit-identical in numpy and OpenCL. Gaussians use Box–Muller, whose log/cos differ by a few ulp
between math libraries.
"""

from __future__ import annotations

import numpy as np

M0 = np.uint64(0xD256D193)
W0 = np.uint32(0x9E3779B9)
ROUNDS = 10


def philox2x32(key: int, c0: np.ndarray, c1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two uint32 arrays of random bits for counters (c0, c1) under key."""
    k = np.uint32(key & 0xFFFFFFFF)
    x0 = np.asarray(c0, dtype=np.uint32).copy()
    x1 = np.broadcast_to(np.asarray(c1, dtype=np.uint32), x0.shape).copy()
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            if r:
                k = np.uint32(k + W0)
            prod = x0.astype(np.uint64) * M0
            hi = (prod >> np.uint64(32)).astype(np.uint32)
            lo = prod.astype(np.uint32)
            x0, x1 = hi ^ k ^ x1, lo
    return x0, x1


def uniform(bits: np.ndarray) -> np.ndarray:
    """float32 in [0, 1) from the top 24 bits."""
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def below(bits: np.ndarray, n: int) -> np.ndarray:
    """int64 uniform in [0, n) from the top 24 bits (integer arithmetic only)."""
    return ((bits >> np.uint32(8)).astype(np.uint64) * np.uint64(n) >> np.uint64(24)).astype(np.int64)


def normal(r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
    """Standard normal float32 by Box–Muller: sqrt(−2 ln(1 − u1)) · cos(2π u0)."""
    u0, u1 = uniform(r0), uniform(r1)
    radius = np.sqrt(np.float32(-2.0) * np.log(np.float32(1.0) - u1))
    return (radius * np.cos(np.float32(2.0 * np.pi) * u0)).astype(np.float32)


#: XORed into the run's seed to key a learn kernel's draws (TD3's smoothing noise, SAC's sampled actions), so they
#: are not the act kernels' (keyed by the seed itself)
LEARN_STREAM = 0x4C45524E


def learn_key(seed: int) -> int:
    """The Philox key of a learn kernel's draws for a run's seed; update k's draws are counters (element, k)."""
    return (seed ^ LEARN_STREAM) & 0xFFFFFFFF


class CounterDraws:
    """The (r0, r1) bits of successive calls, counters (i, call) for i < n, computed a block of calls at a time.

    A call on a handful of elements would otherwise spend its time in numpy's per-operation overhead (the ten
    Philox rounds are ~40 small array operations); drawing `block` calls at once makes each call a slice.
    The bits are exactly philox2x32(key, i, call), so any call sequence gives what the OpenCL kernels draw.
    """

    def __init__(self, key: int, block: int = 256) -> None:
        self.key, self.block, self.call = key, block, 0
        self._n, self._first, self._r0, self._r1 = -1, 0, np.empty((0, 0), np.uint32), np.empty((0, 0), np.uint32)

    def next(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Bits for elements 0..n-1 of the next call; advances the call counter."""
        call = self.call
        self.call += 1
        if n != self._n or not self._first <= call < self._first + self.block:
            calls = np.arange(call, call + self.block, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
            c0 = np.tile(np.arange(n, dtype=np.uint32), self.block)
            c1 = np.repeat(calls.astype(np.uint32), n)
            r0, r1 = philox2x32(self.key, c0, c1)
            self._n, self._first = n, call
            self._r0, self._r1 = r0.reshape(self.block, n), r1.reshape(self.block, n)
        row = call - self._first
        return self._r0[row], self._r1[row]
