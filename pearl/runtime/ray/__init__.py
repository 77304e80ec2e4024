"""The Ray launcher and its transport: pearl's roles as Ray actors on a local instance or a cluster.

With `pearl.profiler.cluster_nodes`, the only code of pearl that imports Ray, and only inside functions, so
every module here can be imported (and its missing-Ray error raised) where Ray is not installed. It is
imported only when the Ray launcher is chosen (or a running cluster profiled).

- `session`: is Ray installed, starting a local instance on loopback, joining a cluster (token authentication
  when a token is at hand), leaving;
- `placement`: where each role goes (`ShardPlacement`), a cluster plan's nodes (`plan_node_ids`), admission of
  every role against the cluster's nodes (`check_roles`) before any starts;
- `packing`: whether roles fit the nodes one node at a time, and the CPU share with which they do (no Ray);
- `replay_client`: the replay server's shards as Ray actors and `RemoteShardedReplay`, the client over them;
- `learner`: the learner role as a Ray actor (`RayLearnerRole`) and the driver's handle to it;
- `worker`: one actor worker (`ActorWorker`, a plain class that Ray places);
- `runs`: each run's roles named in a namespace of its own with a lease the driver renews, and the removal
  of runs whose driver is gone;
- `launcher`: `RayLauncher` (``--launcher ray``), the segment loop over those roles.
"""
