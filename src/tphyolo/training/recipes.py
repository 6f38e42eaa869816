"""Training recipes: the defaults of the settings that depend on the dataset (hyp file, optimiser, nominal batch).

One table (`RECIPES`) is the source of truth. A `TrainConfig` leaves these settings at None ("from the
recipe"); `resolve_recipe` fills each one the user did not give from the dataset's recipe, once, at the start of
a run, and the resolved values are what args.yaml and the checkpoints save (so a resume trains with them).

Which recipe a dataset gets (`recipe_name`): the one its yaml names (`recipe: visdrone`; the built-in synthetic
sets name `synthetic`), else `visdrone` when its classes are VisDrone's ten, else `default`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.errors import InputError
from tphyolo.flags import setting_name
from tphyolo.training.config import TrainConfig

RECIPE_SETTINGS = ("hyp", "optimizer", "nominal_batch")  # the TrainConfig fields a recipe sets


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
    # TPH-YOLOv5's VisDrone hyperparameters, with the original's SGD and 64 images per optimiser step.
    "visdrone": Recipe("visdrone", "SGD", 64, "VisDrone2019-DET, the original's settings"),
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

    def describe(self, cfg: TrainConfig, *, resumed: bool = False) -> str:
        """One line for the run's log: `recipe: visdrone (hyp visdrone, SGD, nbs 64) -- from the dataset's
        yaml; --optimizer given`, or `recipe: none (...) -- all given` when the user gave every setting. A
        `resumed` run's settings are those its checkpoint saved, whoever chose them: `recipe settings of the
        resumed run (...)`."""
        values = f"hyp {cfg.hyp}, {cfg.optimizer}, nbs {cfg.nominal_batch}"
        if resumed:
            return f"recipe settings of the resumed run ({values})"
        if self.given == RECIPE_SETTINGS:
            return f"recipe: none ({values}) -- all given"
        given = f"; {', '.join(setting_name(cfg, f) for f in self.given)} given" if self.given else ""
        return f"recipe: {self.name} ({values}) -- {self.reason}{given}"


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
