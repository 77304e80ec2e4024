"""The cost model: a profile turned into the times and watts the planner uses.

    CostModel(profile).kernel_time(kernel, device, workload, batch) -> Estimate(seconds, extrapolated, source,
                                                                                scaled_from)
        (workload: a key of the profile's, or a Workload, scaled from the nearest measured one when the profile
        has not measured it)
    CostModel(profile).transfer_time(src, dst, nbytes, arrays=1)   -> Estimate
    CostModel(profile).env_step_time(env)                          -> Estimate
    CostModel(profile).power(device)                               -> PowerEstimate(idle_w, busy_w, source, method)
It scales between workloads by their roofline work (pearl.roofline, below both this and the profiler's what-if
devices, which it costs).

Pure Python + numpy: importing it loads no torch and no pyopencl.
"""

from pearl.costmodel.estimate import Estimate, PowerEstimate
from pearl.costmodel.model import CostModel

__all__ = ["CostModel", "Estimate", "PowerEstimate"]
