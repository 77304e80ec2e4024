"""The profile file formats: one host (format.py), a cluster of nodes and links (cluster.py), and the network
descriptors that model links (network.py). The profiler writes them, the cost model and planner read them."""
