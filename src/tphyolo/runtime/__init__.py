"""How the process runs: device, precision, memory format and compile settings (`RuntimeConfig`), their flags,
CPU memory, the compile cache, the attention-kernel probe, console output, distributed process groups and run
folders.

Importing this package imports none of its modules; import them directly (`tphyolo.runtime.config`).
"""
