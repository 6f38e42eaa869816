"""Errors of the original-checkpoint reader."""

from tphyolo.errors import InputError


class LegacyCheckpointError(InputError):
    """A file that cannot be read as a pickled PyTorch checkpoint; the message names the file."""


class ForbiddenGlobalError(LegacyCheckpointError):
    """The pickle references a global outside the allowlist (it would run code if loaded normally)."""


class MalformedRecordError(InputError):
    """A pickled value that does not rebuild; `read_archive` reports it as a LegacyCheckpointError naming the file."""
