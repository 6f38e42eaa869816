"""The benchmarks of `tphyolo bench` run as one suite: their settings (`settings.BenchSettings`) and
`run.run_benchmarks`, which runs the chosen ones and returns their rows and the machine they ran on.

Importing this package imports none of its modules; import them directly (`tphyolo.bench.suite.run`).
"""
