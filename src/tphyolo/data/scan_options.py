"""How commands scan a dataset, as plain data (no numpy, no OpenCV): `ScanOptions` and its flag."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import flag


def scan_cache_flag() -> bool:
    """The dataclass field (and command-line flag) that turns the scan cache off, for every command that scans."""
    return flag(
        True,
        "--no-scan-cache",
        "--no-cache",
        help="neither read nor write the dataset's scan cache (<label folder>.cache.json)",
    )


@dataclass(frozen=True)
class ScanOptions:
    """How commands scan a dataset; each field is also a command-line flag."""

    scan_cache: bool = scan_cache_flag()
