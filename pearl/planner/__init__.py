"""The planner: from a profile to a deployment plan (which device runs each kernel, how many actors).

Pure Python + PuLP: it imports no torch and no pyopencl, so a plan can be made anywhere from a profile file.
`pearl.planner.make.make_plan` is the entry point; `problem` holds the numbers, `ilp` the integer program.
"""
