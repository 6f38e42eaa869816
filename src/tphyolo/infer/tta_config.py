"""The passes of test-time augmentation (scales and flips) as plain data, without importing torch.

`tphyolo.infer.tta` runs them; this module only names and validates them, so that command-line parsers and
configs can use them cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.errors import InputError

FLIPS = ("none", "lr", "ud")
PAPER_SCALES = (1.3, 1.0, 0.83, 0.67)  # TPH-YOLOv5's test-time scales
DEFAULT_FLIPS = ("none", "lr")


@dataclass(frozen=True)
class TTAConfig:
    """scales: input size multipliers; flips: "none", "lr" (left-right) or "ud" (up-down). Every scale is run
    with every flip."""

    scales: tuple[float, ...] = PAPER_SCALES
    flips: tuple[str, ...] = DEFAULT_FLIPS

    def __post_init__(self) -> None:
        if not self.scales or any(not s > 0 for s in self.scales):
            raise InputError(f"TTA scales must be positive numbers, got {self.scales}")
        unknown = [f for f in self.flips if f not in FLIPS]
        if not self.flips or unknown:
            raise InputError(f"TTA flips must be some of {FLIPS}, got {self.flips}")

    def passes(self) -> list[tuple[float, str]]:
        """(scale, flip) of every pass, scales outer."""
        return [(s, f) for s in self.scales for f in self.flips]


PLAIN = TTAConfig(scales=(1.0,), flips=("none",))
