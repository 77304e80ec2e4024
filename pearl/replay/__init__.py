"""Replay bookkeeping in numpy: a K-ary sum tree and the host-side index of a replay buffer."""

from pearl.replay.index import ReplayIndex, SampledIndices, linear_beta
from pearl.replay.sumtree import SumTree

__all__ = ["ReplayIndex", "SampledIndices", "SumTree", "linear_beta"]
