"""What `tphyolo bench` and `tphyolo profile` run: timing and peak memory (`timing`), original-computation twins
of the attention blocks and loss (`baselines`, `baseline_loss`), the sub-benchmarks (`model`, `export`, `data`,
`startup`, `serve/`), module labels for the profiler (`profile`), the report (`report`) and `suite/`, which runs
the chosen ones as `tphyolo bench` does. Studies against other implementations are scripts in benchmarks/."""
