"""What `tphyolo bench` and `tphyolo profile` run: timing and peak memory (`timing`), the sub-benchmarks
(`model`, `export`, `data`, `startup`, `serve/`), module labels for the profiler (`profile`), the report
(`report`) and `suite/`, which runs the chosen ones as `tphyolo bench` does. Studies against other
implementations (the original computation's twins among them) are scripts in benchmarks/."""
