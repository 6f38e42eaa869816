"""How commands scan a dataset, as plain data (no numpy, no OpenCV): `ScanOptions` and its flag; what
`tphyolo data` reads (`DataCommandInputs`) and its flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tphyolo.data.dataset_config import SPLITS
from tphyolo.flags import NON_NEGATIVE, check_field_types, flag


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


@dataclass(frozen=True)
class DataCommandInputs:
    """The dataset `tphyolo data check|slice` reads, the splits, how much a check lists and where a slice goes;
    each field is also the command's flag."""

    data: str | None = flag(None, "--data", required=True,
                            help="data yaml, built-in name (visdrone, synthetic) or image folder")  # fmt: skip
    datasets_dir: str | None = flag(
        None, "--datasets-dir", help="folder that built-in configs' relative paths start from (./datasets)"
    )
    splits: str = flag(",".join(SPLITS), "--splits", help="comma-separated splits to scan")
    max_problems: int = flag(20, "--max-problems", help="problems listed per split", bounds=NON_NEGATIVE)
    out: Path | None = flag(None, "--out", metavar="DIR", help="slice: the new dataset's folder")

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
