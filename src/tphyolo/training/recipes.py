"""Training recipes: the defaults of the settings that depend on the dataset (hyp file, optimiser, nominal batch).

One table (`RECIPES`) is the source of truth. A `TrainConfig` leaves these settings at None ("from the
recipe"); `resolve_recipe` fills each one the user did not give from the dataset's recipe, once, at the start of
a run, and the resolved values are what args.yaml and the checkpoints save (so a resume trains with them).

Which recipe a dataset gets (`recipe_name`): the one its yaml names (`recipe: visdrone`; the built-in synthetic
sets name `synthetic`), else `visdrone` when its classes are VisDrone's ten, else `default`.

A recipe's nominal batch is meant for a full dataset. On a few dozen images it accumulates most of the run into
a handful of optimiser steps, and a fine-tune learns nothing; so once the training set is loaded,
`fit_nominal_batch` lowers a nominal batch the user did not give until the run takes MIN_OPTIMISER_STEPS steps
(or steps every batch where it has fewer batches than that), and the recipe line says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.errors import InputError
from tphyolo.flags import setting_name
from tphyolo.training.config import TrainConfig
from tphyolo.training.optim.optimization import warmup_length
from tphyolo.training.optim.rules import accumulation_steps, optimiser_steps

RECIPE_SETTINGS = ("hyp", "optimizer", "nominal_batch")  # the TrainConfig fields a recipe sets
# The fewest optimiser steps a run with a recipe's nominal batch is left to take: YOLOv5's shortest warm-up, 100
# iterations (`--warmup-min-steps`); a run that takes fewer steps than YOLOv5 spends warming up has, by YOLOv5's
# own yardstick, not trained at all.
MIN_OPTIMISER_STEPS = 100


@dataclass(frozen=True)
class Recipe:
    """Defaults of the dataset-dependent settings: `hyp` (a built-in hyp name), `optimizer`, `nominal_batch`."""

    hyp: str
    optimizer: str
    nominal_batch: int
    about: str


RECIPES: dict[str, Recipe] = {
    # The built-in quick job: AdamW stepping every batch of 8 on the clean synthetic scenes.
    "synthetic": Recipe("synthetic", "AdamW", 8, "the built-in synthetic sets' quick job"),
    # TPH-YOLOv5's VisDrone hyperparameters with the original's Adam (its training commands pass --adam: the hyp's
    # lr0 0.0032 and momentum 0.843 are Adam's rate and beta1) and 64 images per optimiser step.
    "visdrone": Recipe("visdrone", "Adam", 64, "VisDrone2019-DET, the original's settings"),
    # Any other dataset: YOLOv5's from-scratch defaults.
    "default": Recipe("scratch-low", "SGD", 64, "YOLOv5's from-scratch defaults"),
}


@dataclass(frozen=True)
class ResolvedRecipe:
    """The recipe a run uses: its `name`, where the name came from (`reason`), and the settings the user gave
    (`given`: field names of RECIPE_SETTINGS that were not taken from the recipe)."""

    name: str
    reason: str
    given: tuple[str, ...]
    fitted: str = ""  # how `fit_nominal_batch` lowered the nominal batch, '' when it did not

    def describe(self, cfg: TrainConfig, *, resumed: bool = False) -> str:
        """One line for the run's log: `recipe: visdrone (hyp visdrone, Adam, nbs 64) -- from the dataset's
        yaml; --optimizer given`, or `recipe: none (...) -- all given` when the user gave every setting. A
        `resumed` run's settings are those its checkpoint saved, whoever chose them: `recipe settings of the
        resumed run (...)`."""
        values = f"hyp {cfg.hyp}, {cfg.optimizer}, nbs {cfg.nominal_batch}"
        if resumed:
            return f"recipe settings of the resumed run ({values})"
        if self.given == RECIPE_SETTINGS:
            return f"recipe: none ({values}) -- all given"
        given = f"; {', '.join(setting_name(cfg, f) for f in self.given)} given" if self.given else ""
        fitted = f"; {self.fitted}" if self.fitted else ""
        return f"recipe: {self.name} ({values}) -- {self.reason}{given}{fitted}"


def recipe_name(data: DataConfig) -> tuple[str, str]:
    """(recipe name, why) for a dataset. Raises ValueError naming the yaml when it names an unknown recipe."""
    if data.recipe is not None:
        if data.recipe not in RECIPES:
            raise InputError(f"{data.source}: unknown recipe {data.recipe!r}; known: {sorted(RECIPES)}")
        return data.recipe, "named by the dataset's yaml"
    if tuple(data.names) == VISDRONE_NAMES:
        return "visdrone", "the dataset has VisDrone's classes"
    return "default", "the dataset names no recipe"


def resolve_recipe(cfg: TrainConfig, data: DataConfig) -> tuple[TrainConfig, ResolvedRecipe]:
    """`cfg` with each recipe setting left at None filled from the dataset's recipe, and what was done."""
    name, reason = recipe_name(data)
    recipe = RECIPES[name]
    given = tuple(f for f in RECIPE_SETTINGS if getattr(cfg, f) is not None)
    filled = {f: getattr(recipe, f) for f in RECIPE_SETTINGS if f not in given}
    return replace(cfg, **filled), ResolvedRecipe(name, reason, given)


def _steps(count: int) -> str:
    return f"{count} optimiser step{'s' if count != 1 else ''}"


def fit_nominal_batch(
    cfg: TrainConfig, recipe: ResolvedRecipe, *, batches_per_epoch: int, world_size: int, warmup_epochs: float
) -> tuple[TrainConfig, ResolvedRecipe]:
    """`cfg` with the recipe's nominal batch lowered, when the user did not give one (`--nbs`) and the run's
    `epochs * batches_per_epoch` batches (of `batch * world_size` images; the hyp's `warmup_epochs` give the
    warm-up, `warmup_length`) would take fewer than MIN_OPTIMISER_STEPS optimiser steps with it: to the largest
    whole number of batches per step that still takes that many, or one batch when even that takes fewer.
    `recipe.fitted` says what was done (for the recipe line); otherwise both come back as they were."""
    if "nominal_batch" in recipe.given:
        return cfg, recipe
    batches, images = cfg.epochs * batches_per_epoch, cfg.batch * world_size
    warmup_steps = warmup_length(warmup_epochs, batches_per_epoch, cfg.warmup_min_steps, cfg.epochs)
    accumulate = accumulation_steps(cfg.batch, world_size, nominal_batch=cfg.nominal_batch)
    if accumulate == 1 or batches >= MIN_OPTIMISER_STEPS * accumulate:  # no step waits more than `accumulate`
        return cfg, recipe

    def steps(per_step: int) -> int:
        return optimiser_steps(batches=batches, warmup_steps=warmup_steps, accumulate=per_step)

    before = steps(accumulate)
    if before >= MIN_OPTIMISER_STEPS:
        return cfg, recipe
    low, high = 1, accumulate - 1  # fewer steps the more batches each waits for: the largest that takes enough
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if steps(mid) >= MIN_OPTIMISER_STEPS else (low, mid - 1)
    nominal_batch = low * images
    fitted = (f"nbs {cfg.nominal_batch} lowered to {nominal_batch}: this run's {batches} batches of {images} images "
              f"take {_steps(before)} at nbs {cfg.nominal_batch}, {steps(low)} at {nominal_batch} (at least "
              f"{MIN_OPTIMISER_STEPS} where it has them; --nbs to choose)")  # fmt: skip
    return replace(cfg, nominal_batch=nominal_batch), replace(recipe, fitted=fitted)
