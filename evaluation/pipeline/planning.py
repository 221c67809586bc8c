"""Planning an evaluation from the app: concept selection, the grid, its size and its time.

A researcher picks models from the registry, concepts (by key, category, modifier type,
text search and a seeded random sample), styles, guidance scales and seeds per cell;
`plan_evaluation` turns that into the run items of `evaluation.pipeline.stages.plan_run`, and
`estimate_seconds` says roughly how long they take on this machine.

Time estimates
--------------
Seconds per image (generation plus GroundingDINO + SAM masking) come from, in order:

1. the typical ``gen_seconds + seg_seconds`` of items already done for that model
   (measured on this installation by `measured_seconds`, passed in as `measured`): the
   median, leaving out the first image of each run, which also paid for warming the newly
   loaded model up (a short try-out's mean was several times a long run's per-image time);
2. the defaults below, per device kind. Masking is 0.45 s per 1024x1024 image on one
   H200 (grounding-dino-base + sam-vit-huge architectures in float32,
   ``bench/bench_research.py segment``); SDXL's generate stage is 2.4 s per image on one
   H100 at 50 steps, 4 images per call, PNG written and row stored (2.0 s for the bare
   pipeline call; BENCHMARKS.md, "Generation" and "Scale-out (Ray)"). The other full-size
   models are scaled from SDXL by their size and published speed: rough figures, to be
   replaced by measured ones. ``tiny-random`` on a CPU is the whole job measured by
   ``bench/bench_research.py job``. CPU figures of full-size models multiply the GPU
   figure by `CPU_SLOWDOWN` (minutes per image). A model missing from the table uses
   `UNKNOWN_MODEL_SECONDS`, or tiny-random's figures when its registry entry is as small
   (`TINY_WORK`: parameters x steps x pixels).

These figures are of concept (implicit) runs: one masking per image. An explicit run
(`evaluation.explicit.mode`) scores every object of a prompt (presence, masks minus negative
labels, verdicts), so its images are estimated as generation + objects x scoring seconds per
object (`evaluation.explicit.mode.plan_summary`), from `explicit_seconds` (generation per
model and scoring per object, measured in explicit runs) or else `seconds_per_image` for
generation and `seconds_per_object` for scoring.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import sqlite_utils

from evaluation.concepts import CATEGORIES, MODIFIER_TYPES, Concept, key_meant
from evaluation.models.generation import MAX_GUIDANCE, STYLES
from evaluation.models.registry import ModelSpec, RegistryError, in_data_folder
from evaluation.pipeline import runs
from evaluation.pipeline.stages import plan_run
from storage.shown import shown
from storage.spreadsheet import number_cell

#: Seconds per image on one H100-class GPU (generation + masking) for the registry's settings.
GPU_SECONDS_PER_IMAGE = {
    "sdxl": 2.9,
    "sd3": 3.0,
    "sd35": 3.5,
    "flux-dev": 12.0,
    "sana15": 2.5,
    "qwen-image": 40.0,
    "omnigen2": 30.0,
    "tiny-random": 0.1,
    "tiny-random-b": 0.1,
}
#: How much slower a CPU is than one H100 for the full-size models (order of magnitude).
CPU_SLOWDOWN = 150.0
#: Measured on a shared 2-core CPU (one torch thread): the 64x64, 2-step tiny model's whole job.
CPU_SECONDS_PER_IMAGE = {"tiny-random": 0.35, "tiny-random-b": 0.35}
#: Explicit mode, CPU: seconds to score one object of a generated image (presence detection,
#: mask minus negative labels, dominant color and verdicts under every rule set), the median
#: of `seg_seconds` / objects over the items of
#: ``python -m evaluation explicit --run measure --model tiny-random --systems iscc-nbs-l2
#: --size 1 --objects car,apple,chair --samples 2 --segmenter tiny-random --device cpu
#: --db /tmp/estimate-measure/db.sqlite --data-dir /tmp/estimate-measure`` (a run's first
#: item left out; 289 items, 174 with one object and 116 with two), measured 2026-12-02 on
#: a shared 2-core CPU whose load average (`uptime`, 1 min) fell from 12.6 at the start to 1.7
#: at the end: quartiles 0.08 / 0.12 / 1.2 s per object, 10th-90th percentile 0.05-3.6 s (a
#: tenth of a second unloaded, seconds while loaded). The tiny offline masker, so a lower
#: bound for the paper's masker on a CPU.
CPU_SECONDS_PER_OBJECT = 0.12
#: Explicit mode, GPU: one GroundingDINO + SAM masking per object, 0.45 s on an H200 (the
#: module notes; ``bench/bench_research.py segment``); a lower bound, as an object's masks
#: less its negative labels take more than one. No explicit run was measured on a GPU.
GPU_SECONDS_PER_OBJECT = 0.45
#: GPU seconds per image assumed for a model absent from the table.
UNKNOWN_MODEL_SECONDS = 20.0
#: Models that run in seconds on a CPU; every other model gets a CPU warning.
CPU_FRIENDLY = frozenset({"tiny-random", "tiny-random-b"})
#: Parameters x steps x pixels per image up to which a model absent from the tables takes
#: tiny-random's figures (its entry: 0.2M parameters, 2 steps, 64 x 64; five times that).
TINY_WORK = 5 * 0.2e6 * 2 * 64**2
_PARAM_UNITS = {"K": 1e3, "M": 1e6, "B": 1e9}


def _figures_of(model: str, specs: Mapping[str, ModelSpec] | None) -> str:
    """The model whose figures `model` takes: itself, or ``tiny-random`` for a registry entry
    (in `specs`) absent from the tables and as small as the tiny test models by its
    parameters, steps and resolution (a lab's own tiny model was estimated at 50 min an
    image, and warned of as a full-size one)."""
    spec = (specs or {}).get(model)
    if model in GPU_SECONDS_PER_IMAGE or spec is None:
        return model
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMB])\s*", spec.params or "")
    if found is None:
        return model
    work = float(found[1]) * _PARAM_UNITS[found[2]] * spec.steps * spec.resolution**2
    return "tiny-random" if work <= TINY_WORK else model


@dataclass(frozen=True)
class ConceptQuery:
    """Which concepts to evaluate; every filter that is empty keeps everything.

    Attributes
    ----------
    keys : tuple of str
        Start from these concept keys (in this order) instead of all 1,278.
    categories : tuple of str
        Keep concepts of these categories (`evaluation.concepts.CATEGORIES`).
    modifier_types : tuple of str
        Keep these modifier types (`evaluation.concepts.MODIFIER_TYPES`).
    search : str
        Keep keys containing this text (case-insensitive).
    sample_size : int
        If > 0, keep a random sample of this many of the remaining concepts.
    sample_seed : int
        Seed of that sample (`numpy.random.default_rng`); the same seed gives the same sample.
    """

    keys: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    modifier_types: tuple[str, ...] = ()
    search: str = ""
    sample_size: int = 0
    sample_seed: int = 0


def run_exists(db: sqlite_utils.Database, name: str) -> bool:
    """Whether a run called `name` is stored."""
    try:
        runs.run_config(db, name)
    except runs.RunError:
        return False
    return True


def _check_subset(name: str, values: Sequence[str], allowed: Sequence[str]) -> None:
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise ValueError(f"`{name}` must be among {list(allowed)}, got {unknown}")


def _described(query: ConceptQuery) -> str:
    """`query`'s filters in words, a long search text cut to 80 characters."""
    parts = [f"{len(query.keys)} named concept(s)"] if query.keys else []
    parts += [f"categories {list(query.categories)}"] if query.categories else []
    parts += [f"modifier types {list(query.modifier_types)}"] if query.modifier_types else []
    if query.search:
        cut = f"… ({len(query.search):,} characters)" if len(query.search) > 80 else ""
        parts.append(f"text containing {query.search[:80]!r}{cut}")
    return " and ".join(parts) or "all concepts"


def unknown_names(keys: Sequence[str], known: Collection[str] = ()) -> str:
    """The first five of `keys` (names no concept has), each cut as a refusal cuts user text
    (`shown`: a 10,000-character one was echoed whole, outside probe 124), and how many more.

    A name that spells one of `known` otherwise (``'Apple'``: `evaluation.concepts.key_meant`)
    is followed by the key it meant, as a reference CSV's row is."""

    def named(key: str) -> str:
        meant = key_meant(key, known) if known else None
        return shown(key) + (f" (write {meant!r})" if meant else "")

    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return "[" + ", ".join(named(k) for k in keys[:5]) + "]" + more


def select_concepts(concepts: Sequence[Concept], query: ConceptQuery) -> list[Concept]:
    """The concepts `query` picks, in concept-list order (or in `query.keys` order).

    Raises
    ------
    ValueError
        For an unknown key, category or modifier type, a negative sample size, or an
        empty selection (the message says which filter left nothing).
    """
    _check_subset("categories", query.categories, CATEGORIES)
    _check_subset("modifier_types", query.modifier_types, MODIFIER_TYPES)
    if query.sample_size < 0:
        raise ValueError(f"`sample_size` must be >= 0 (0 keeps all), got {query.sample_size}")
    chosen = list(concepts)
    if query.keys:
        by_key = {c.key: c for c in concepts}
        missing = [k for k in query.keys if k not in by_key]
        if missing:
            raise ValueError(
                f"`keys` names unknown concepts {unknown_names(missing, by_key)}; keys are the concept text, "
                "e.g. 'rotten apple'"
            )
        chosen = [by_key[k] for k in dict.fromkeys(query.keys)]
    if query.categories:
        chosen = [c for c in chosen if c.category in query.categories]
    if query.modifier_types:
        chosen = [c for c in chosen if c.modifier_type in query.modifier_types]
    text = query.search.strip().lower()
    if text:
        chosen = [c for c in chosen if text in c.key.lower()]
    if not chosen:
        raise ValueError(f"no concept matches the selection: {_described(query)}")
    if 0 < query.sample_size < len(chosen):
        picked = np.random.default_rng(query.sample_seed).choice(
            len(chosen), query.sample_size, replace=False
        )
        chosen = [chosen[i] for i in sorted(picked)]
    return chosen


def resolve_models(
    registry: Mapping[str, ModelSpec],
    keys: Sequence[str],
    *,
    cfg_scales: Sequence[float] = (),
) -> list[ModelSpec]:
    """The registry entries `keys`, ready for a run of this installation.

    Parameters
    ----------
    registry : Mapping of str to ModelSpec
        From `evaluation.models.registry.load_registry`.
    keys : sequence of str
        Registry keys, at least one.
    cfg_scales : sequence of float
        Guidance scales for every model instead of each model's own sweep; each > 0.

    Raises
    ------
    ValueError
        For no key, an unknown key, or a scale outside (0, `MAX_GUIDANCE`].
    """
    if not keys:
        raise ValueError("`models` must name at least one registry model, got none")
    unknown = [k for k in keys if k not in registry]
    if unknown:
        raise RegistryError(f"unknown model(s) {unknown}; the registry has {sorted(registry)}")
    bad = [s for s in cfg_scales if not 0 < s <= MAX_GUIDANCE]
    if bad:
        raise ValueError(
            f"`cfg_scales` must be numbers in (0, {MAX_GUIDANCE:g}], got {shown(list(cfg_scales))}"
        )
    specs = []
    for key in dict.fromkeys(keys):
        spec = registry[key]
        if spec.build == "tiny":  # from the data folder's models/<key>, built on first use
            spec = in_data_folder(spec)
        if cfg_scales:
            spec = replace(spec, cfg_scales=tuple(sorted({float(s) for s in cfg_scales})))
        specs.append(spec)
    return specs


def plan_evaluation(
    specs: Sequence[ModelSpec],
    concepts: Sequence[Concept],
    styles: Sequence[str],
    seeds: int,
) -> tuple[list[dict], dict]:
    """Items and configuration of a run: models x concepts x styles x cfg x `seeds`.

    Checks the styles and the number of seeds per (model, concept, style, cfg) cell, then
    calls `evaluation.pipeline.stages.plan_run` (which derives each item's seed from its cell).
    """
    if not styles:
        raise ValueError(f"`styles` must name at least one of {sorted(STYLES)}, got none")
    _check_subset("styles", styles, sorted(STYLES))
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(
            f"`seeds` (images per concept, style and cfg) must be a positive integer, got {shown(seeds)}"
        )
    return plan_run(list(specs), list(concepts), list(dict.fromkeys(styles)), seeds)


@dataclass(frozen=True)
class Estimate:
    """How long a planned run should take.

    Attributes
    ----------
    seconds : float
        Total, >= 0.
    per_model : dict of str to (int, float, str)
        Images, seconds per image and where that figure comes from (``"measured"``,
        ``"default"`` or ``"unknown model"``).
    """

    seconds: float
    per_model: dict[str, tuple[int, float, str]]


def measured_seconds(db: sqlite_utils.Database) -> dict[str, float]:
    """Typical generation + masking seconds per image, per model, measured on this installation
    in concept (implicit) runs.

    The median over run items that have both times, leaving out the first item (by id) of
    each run and model that has more than one: its generation was the freshly loaded
    pipeline's first call, which also warms it up. Model loading itself is never timed.
    Items of explicit runs (those with ``explicit_prompts``) are left out: their
    ``seg_seconds`` scores every object of a prompt, not one masking (`explicit_seconds`).
    """
    sql = (
        "SELECT run, model, gen_seconds + seg_seconds FROM run_items "
        "WHERE gen_seconds IS NOT NULL AND seg_seconds IS NOT NULL "
        "AND run NOT IN (SELECT run FROM explicit_prompts) ORDER BY run, model, id"
    )
    return {model: float(np.median(s)) for model, s in _without_first(db.execute(sql).fetchall()).items()}


def _without_first(rows: Sequence[Sequence]) -> dict[str, list[float]]:
    """``(run, model, value)`` rows in (run, model, id) order -> values per model, leaving out
    the first of each run and model that has more than one (its model was warming up)."""
    by_run: dict[tuple[str, str], list[float]] = {}
    for run, model, value in rows:
        by_run.setdefault((run, model), []).append(float(value))
    by_model: dict[str, list[float]] = {}
    for (_, model), values in by_run.items():
        by_model.setdefault(model, []).extend(values[1:] if len(values) > 1 else values)
    return by_model


@dataclass(frozen=True)
class ExplicitSeconds:
    """Times measured in explicit runs on this installation (`explicit_seconds`).

    Attributes
    ----------
    generation : dict of str to float
        Median generation seconds per image (``gen_seconds``), per model.
    per_object : float or None
        Median scoring seconds per object (an item's ``seg_seconds`` over its prompt's
        objects), pooled over models (scoring uses the masker, not the text-to-image model);
        None when no explicit image is scored yet.
    """

    generation: dict[str, float]
    per_object: float | None


def explicit_seconds(db: sqlite_utils.Database) -> ExplicitSeconds:
    """Generation and per-object scoring seconds measured in explicit runs: medians over their
    items, leaving out the first item (by id) of each run and model with more than one, as
    `measured_seconds` does (the freshly loaded generator or masker warming up)."""
    sql = (
        "SELECT i.run, i.model, i.gen_seconds, i.seg_seconds, p.objects FROM run_items i "
        "JOIN explicit_prompts p ON p.run = i.run AND p.prompt_id = i.concept "
        "ORDER BY i.run, i.model, i.id"
    )
    rows = db.execute(sql).fetchall()
    generation = _without_first([(run, model, gen) for run, model, gen, _, _ in rows if gen is not None])
    scoring = _without_first(
        [
            (run, model, seg / max(1, len(json.loads(objects))))
            for run, model, _, seg, objects in rows
            if seg is not None
        ]
    )
    pooled = [seconds for values in scoring.values() for seconds in values]
    return ExplicitSeconds(
        {model: float(np.median(values)) for model, values in generation.items()},
        float(np.median(pooled)) if pooled else None,
    )


def seconds_per_object(device_kind: str, measured: float | None = None) -> tuple[float, str]:
    """Seconds to score one object of an explicit run's image on a ``"cuda"`` or ``"cpu"``
    device, and its origin: `measured` (`ExplicitSeconds.per_object`) when given, else
    `CPU_SECONDS_PER_OBJECT` or `GPU_SECONDS_PER_OBJECT` (``"default"``)."""
    if device_kind not in ("cuda", "cpu"):
        raise ValueError(f"`device_kind` must be 'cuda' or 'cpu', got {shown(device_kind)}")
    if measured:
        return float(measured), "measured"
    return (GPU_SECONDS_PER_OBJECT if device_kind == "cuda" else CPU_SECONDS_PER_OBJECT), "default"


def seconds_per_image(
    model: str,
    device_kind: str,
    measured: Mapping[str, float] | None = None,
    specs: Mapping[str, ModelSpec] | None = None,
) -> tuple[float, str]:
    """Seconds per image for `model` on a ``"cuda"`` or ``"cpu"`` device, and its origin;
    `specs` (the registry) lets a model absent from the tables that is as small as the tiny
    test models take their figures."""
    if device_kind not in ("cuda", "cpu"):
        raise ValueError(f"`device_kind` must be 'cuda' or 'cpu', got {shown(device_kind)}")
    if measured and measured.get(model):
        return float(measured[model]), "measured"
    figures = _figures_of(model, specs)
    gpu = GPU_SECONDS_PER_IMAGE.get(figures)
    origin = "unknown model" if gpu is None else "default" if figures == model else "as small as tiny-random"
    gpu = UNKNOWN_MODEL_SECONDS if gpu is None else gpu
    if device_kind == "cuda":
        return gpu, origin
    return CPU_SECONDS_PER_IMAGE.get(figures, gpu * CPU_SLOWDOWN), origin


def estimate_seconds(
    items: Sequence[Mapping],
    device_kind: str,
    measured: Mapping[str, float] | None = None,
    specs: Mapping[str, ModelSpec] | None = None,
) -> Estimate:
    """Estimated wall time of `items` (run items with a ``model`` key); see the module notes
    and `seconds_per_image`."""
    counts = Counter(item["model"] for item in items)
    per_model = {}
    for model, n in counts.items():
        each, origin = seconds_per_image(model, device_kind, measured, specs)
        per_model[model] = (n, each, origin)
    return Estimate(sum(n * each for n, each, _ in per_model.values()), per_model)


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"3 h 20 min"`` or ``"2.5 days"`` (rounded)."""
    if seconds < 0 or not np.isfinite(seconds):
        raise ValueError(f"`seconds` must be a finite number >= 0, got {seconds}")
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        hours, minutes = divmod(round(seconds / 60), 60)
        return f"{hours} h {minutes} min"
    return f"{seconds / 86400:.1f} days"


@dataclass(frozen=True)
class DeviceInfo:
    """The device runs use: ``device`` (``"cuda"`` or ``"cpu"``) and a display ``name``."""

    device: str
    name: str

    @property
    def kind(self) -> str:
        """``"cuda"`` or ``"cpu"``."""
        return "cuda" if self.device.startswith("cuda") else "cpu"


def detect_device() -> DeviceInfo:
    """The first GPU if torch sees one, else the CPU."""
    import torch

    if torch.cuda.is_available():
        return DeviceInfo("cuda", torch.cuda.get_device_name(0))
    return DeviceInfo("cpu", "CPU")


def cpu_warning(
    device: DeviceInfo, model_keys: Sequence[str], specs: Mapping[str, ModelSpec] | None = None
) -> str:
    """A warning when full-size models would run on a CPU, else ``""`` (`specs` as in
    `seconds_per_image`)."""
    slow = [k for k in model_keys if _figures_of(k, specs) not in CPU_FRIENDLY]
    if device.kind != "cpu" or not slow:
        return ""
    return (
        f"No GPU: {', '.join(slow)} would run on the CPU in float32, at minutes per image. "
        "Use tiny-random to try the whole path, or run on a GPU machine."
    )


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything a researcher chooses for a new run (see `plan_request`).

    Attributes
    ----------
    models : tuple of str
        Registry keys.
    query : ConceptQuery
    styles : tuple of str
        Keys of `evaluation.models.generation.STYLES`.
    cfg_scales : tuple of float
        Scales for every model; empty keeps each model's own sweep.
    seeds : int
        Images per (model, concept, style, cfg), each with its own seed.
    """

    models: tuple[str, ...]
    query: ConceptQuery
    styles: tuple[str, ...]
    cfg_scales: tuple[float, ...] = ()
    seeds: int = 5


def parse_scales(text: str) -> tuple[float, ...]:
    """``"3, 7.5"`` -> ``(3.0, 7.5)``; ``""`` -> ``()``. Raises ValueError naming `cfg_scales`,
    also for an empty item (``"7.5,,3"`` was taken as 7.5 and 3: a number lost in typing
    went unsaid, outside probe 234)."""
    parts = [part.strip() for part in (text or "").replace(";", ",").split(",")]
    if parts == [""]:
        return ()
    try:
        if "" in parts:
            raise ValueError("an empty item")
        return tuple(number_cell(part) for part in parts)  # ASCII digits: float read "١٢" as 12
    except ValueError:
        raise ValueError(
            f"`cfg_scales` must be comma-separated numbers such as '3, 7.5', got {shown(text)}"
        ) from None


def plan_request(
    request: EvaluationRequest,
    registry: Mapping[str, ModelSpec],
    concepts: Sequence[Concept],
) -> tuple[list[dict], dict]:
    """Items and configuration of the run `request` describes (checks every choice first)."""
    specs = resolve_models(registry, request.models, cfg_scales=request.cfg_scales)
    chosen = select_concepts(concepts, request.query)
    return plan_evaluation(specs, chosen, request.styles, request.seeds)
