"""The cost model: a profile turned into the times and watts the planner uses, and the roofline what-if model.

    CostModel(profile).kernel_time(kernel, device, workload, batch) -> Estimate(seconds, extrapolated, source,
                                                                                scaled_from)
        (workload: a key of the profile's, or a Workload, scaled from the nearest measured one when the profile
        has not measured it)
    CostModel(profile).transfer_time(src, dst, nbytes, arrays=1)   -> Estimate
    CostModel(profile).env_step_time(env)                          -> Estimate
    CostModel(profile).power(device)                               -> PowerEstimate(idle_w, busy_w, source, method)
    kernel_work(kernel, workload, batch) -> Work(flops, bytes, launches);  roofline_time(work, figures) -> seconds

Pure Python + numpy: importing it loads no torch and no pyopencl.
"""

from pearl.costmodel.model import CostModel, Estimate, PowerEstimate
from pearl.costmodel.roofline import Work, kernel_work, roofline_time

__all__ = ["CostModel", "Estimate", "PowerEstimate", "Work", "kernel_work", "roofline_time"]
