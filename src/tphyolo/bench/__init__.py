"""Benchmarks of our implementation against the original computation (`tphyolo bench`) and profiling helpers
(`tphyolo profile`): timing and peak memory (`timing`), original-computation twins of the attention blocks
(`baselines`), the sub-benchmarks (`attention`, `model`, `wbf`, `eval`, `data`), module labels for the
profiler (`profile`), the report (`report`) and `suite/`, which runs the chosen ones as `tphyolo bench` does."""
