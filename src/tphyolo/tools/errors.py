"""Errors of the command line that both `tphyolo.cli` and the command modules raise or catch.

They live here, below the command registry, so that a command module never imports `tphyolo.cli` (which
imports the command modules).
"""


class UsageError(ValueError):
    """A bad value on the command line, found after parsing; reported in one line with exit code 2."""
