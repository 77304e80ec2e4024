"""Profiling: the profile file format (torch-free) and the profiler that measures a machine."""
