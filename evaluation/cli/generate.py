"""Generate the images of a run (creating the run first, or resuming it).

A new run needs --model; the grid is models x concepts x styles x cfg scales x samples,
with the registry's defaults (evaluation/models/models.toml) unless overridden. Running the same
command again skips finished images. `--run NAME` alone resumes a stored run.

Example:
  python -m evaluation generate --run demo --model tiny-random --concepts apple,rotten\\ apple --samples 2
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from evaluation.cli import (
    add_device_arguments,
    add_executor_arguments,
    add_storage_arguments,
    count,
    leased_stage,
    models_dir,
    open_db,
    print_workers,
    resolve_device,
    resumed_run,
    stage_executor,
    whole,
)
from storage.shown import shown

HELP = "generate a run's images (resumable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `generate`."""
    parser.add_argument("--run", required=True, help="run name (folder data/runs/<run>/)")
    parser.add_argument(
        "--model", action="append", default=[], help="registry key; repeat for several models"
    )
    parser.add_argument(
        "--registry", default=None, help="registry TOML (default: evaluation/models/models.toml)"
    )
    parser.add_argument(
        "--source", default=None, help="load the (single) model from this hub id or directory"
    )
    parser.add_argument("--concepts", default=None, help="comma-separated concept keys (default: all 1,278)")
    parser.add_argument(
        "--modifier-type",
        action="append",
        choices=["original", "visual_state", "emotional"],
        help="keep concepts of this type; repeatable",
    )
    parser.add_argument("--limit", type=whole, default=None, help="keep the first N concepts after filtering")
    parser.add_argument("--styles", default="natural,clipart", help="comma-separated: natural, clipart")
    parser.add_argument(
        "--cfg", default=None, help="comma-separated guidance scales (default: the model's 7)"
    )
    parser.add_argument(
        "--samples", type=count, default=5, help="seeds per (concept, style, cfg) (default: 5)"
    )
    parser.add_argument(
        "--steps", type=whole, default=None, help="denoising steps (default: the model's, 50)"
    )
    parser.add_argument(
        "--resolution", type=whole, default=None, help="image side in pixels (default: the model's, 1024)"
    )
    parser.add_argument(
        "--batch-size", type=whole, default=None, help="images per pipeline call (default: the model's)"
    )
    parser.add_argument(
        "--dtype",
        choices=["float16", "bfloat16", "float32"],
        default=None,
        help="override the weight dtype (default: the model's on a GPU, float32 on a CPU)",
    )
    add_device_arguments(parser)
    add_executor_arguments(parser)
    add_storage_arguments(parser)


def select_concepts(concepts, keys=None, modifier_types=None, limit=None):
    """Concepts named by `keys` (comma-separated, in that order), of `modifier_types`, first `limit`."""
    if keys is not None:
        by_key = {c.key: c for c in concepts}
        wanted = [k.strip() for k in keys.split(",") if k.strip()]
        if not wanted:  # an empty --concepts ran every concept: 1,278 images per seed and scale
            raise ValueError(f"--concepts names no concept, got {shown(keys)}; leave it out for all 1,278")
        missing = [k for k in wanted if k not in by_key]
        if missing:
            from evaluation.pipeline.planning import unknown_names

            raise ValueError(
                f"--concepts names unknown concepts {unknown_names(missing, by_key)}; keys are the concept text, e.g. 'rotten apple'"
            )
        concepts = [by_key[k] for k in dict.fromkeys(wanted)]
    if modifier_types:
        concepts = [c for c in concepts if c.modifier_type in modifier_types]
    if limit is not None:
        if limit < 1:
            raise ValueError(f"--limit must be a positive integer, got {limit}")
        concepts = concepts[:limit]
    if not concepts:
        raise ValueError("the concept selection is empty")
    return concepts


def model_specs(args: argparse.Namespace) -> tuple[list, list[str]]:
    """The models and styles that ``--model``, ``--source``, ``--cfg``, ``--steps``,
    ``--resolution``, ``--batch-size``, ``--registry`` and ``--styles`` ask for.

    Returns
    -------
    specs : list of evaluation.models.registry.ModelSpec
        One per ``--model``, with the overrides applied (``--cfg``: comma-separated
        guidance scales) and ``--source`` as the weights of the single model.
    styles : list of str
        Keys of `evaluation.models.generation.STYLES`.

    Raises
    ------
    ValueError
        For an unknown model, ``--source`` with several models, or unknown styles.
    """
    from evaluation.models.generation import STYLES
    from evaluation.models.registry import get_model, in_data_folder, load_registry, with_source
    from evaluation.pipeline.ray_storage import is_uri

    registry = load_registry(args.registry) if args.registry else load_registry()
    # A value given twice counts once, as on the Evaluate tab (a run's items are unique: a
    # repeat failed with a traceback, outside probe 186); so do --concepts and --cfg.
    specs = [get_model(key, registry) for key in dict.fromkeys(args.model)]
    if args.source and len(specs) != 1:
        raise ValueError(f"--source needs exactly one --model, got {len(specs)}")
    overrides = _overrides(args)
    specs = [replace(spec, **overrides) for spec in specs]
    if args.source:
        source = Path(args.source).expanduser()
        if str(args.source).startswith(("/", ".", "~")) and not (source / "model_index.json").is_file():
            # A tiny model is built where its folder is missing: anywhere on the disk, here.
            raise ValueError(f"--source {args.source!r}: no diffusers pipeline there (model_index.json)")
        specs = [with_source(specs[0], args.source)]
    elif not is_uri(args.data_dir):  # a tiny test model lives in --data-dir/models, as in the app
        specs = [in_data_folder(s) if s.build == "tiny" else s for s in specs]
    styles = list(dict.fromkeys(s.strip() for s in args.styles.split(",") if s.strip()))
    bad = [s for s in styles if s not in STYLES]
    if bad or not styles:
        raise ValueError(
            f"--styles must be a comma-separated subset of {sorted(STYLES)}, got {shown(args.styles)}"
        )
    return specs, styles


def _overrides(args: argparse.Namespace) -> dict:
    """The registry fields ``--steps``, ``--resolution``, ``--batch-size`` and ``--cfg`` set,
    each checked here: refused later, after the run is stored, they left a run that could
    never run."""
    from evaluation.models.generation import MAX_RESOLUTION, MAX_STEPS
    from evaluation.pipeline.planning import MAX_GUIDANCE, parse_scales

    overrides = {}
    for name, option, most in (
        ("steps", "--steps", MAX_STEPS),
        ("resolution", "--resolution", MAX_RESOLUTION),
        ("batch_size", "--batch-size", None),
    ):
        value = getattr(args, name)
        if value is None:
            continue
        if value < 1 or (name == "resolution" and value % 8) or most is not None and value > most:
            what = "a positive multiple of 8" if name == "resolution" else "a whole number, 1 or more"
            upto = f", at most {most:,}" if most is not None else ""
            raise ValueError(f"{option} must be {what}{upto}, got {value:,}")
        overrides[name] = value
    if args.cfg is not None:
        refusal = (
            f"--cfg must be guidance scales in (0, {MAX_GUIDANCE:g}], comma-separated, got {shown(args.cfg)}"
        )
        try:
            scales = parse_scales(args.cfg)
        except ValueError:
            raise ValueError(refusal) from None
        if not scales or not all(0 < s <= MAX_GUIDANCE for s in scales):  # nan fails both
            raise ValueError(refusal)
        overrides["cfg_scales"] = tuple(sorted(set(scales)))  # as `planning.resolve_models`
    return overrides


RUN_OPTIONS = (
    "registry", "source", "concepts", "modifier_type", "limit", "styles", "cfg", "samples", "steps", "resolution",
)  # fmt: skip
"""The options that describe a concept run (refused on a resume: `resumed_run`)."""


def create_or_resume(db, args: argparse.Namespace, check: Callable[[dict], None] | None = None) -> dict:
    """Store the run that the options describe (with --model), then return its configuration.

    `check` sees the configuration first (a missing model, say): a refused run is not stored.
    """
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs
    from evaluation.pipeline.stages import plan_run

    if args.model:
        specs, styles = model_specs(args)
        concepts = select_concepts(load_concepts(), args.concepts, args.modifier_type, args.limit)
        items, config = plan_run(specs, concepts, styles, args.samples)
        if check is not None:
            check(config)
        n = runs.create_run(db, args.run, items, config)
        print(
            f"run {args.run!r}: {n} images over {len(specs)} model(s), {len(concepts)} concept(s), {len(styles)} style(s)"
        )
        return runs.run_config(db, args.run)
    config = resumed_run(db, args, add_arguments, RUN_OPTIONS)
    if check is not None:
        check(config)
    return config


def main(args: argparse.Namespace) -> int:
    """Create or resume the run, then generate its pending images."""
    from evaluation.pipeline import runs
    from evaluation.pipeline.stages import GenerationWork

    executor = stage_executor(args, "generate")  # before storing anything: no cluster, no run
    device = resolve_device(args.device) if executor is None else args.device
    db = open_db(args, create=bool(args.model))
    if executor is None:  # on a cluster the workers hold the weights, not this machine
        from evaluation.pipeline.jobs import check_weights

        config = create_or_resume(db, args, lambda planned: check_weights(planned, None, models_dir(args)))
    else:  # every node: the data folder and the weights, before the first batch
        config = create_or_resume(db, args)
        from evaluation.pipeline.ray_preflight import preflight
        from evaluation.pipeline.ray_storage import is_uri

        if not is_uri(args.data_dir):  # a worker's working folder is not this one's
            args.data_dir = Path(args.data_dir).resolve()
        preflight(args.data_dir, config, None)
    dtype = None
    if args.dtype:
        import torch

        dtype = getattr(torch, args.dtype)
    work = GenerationWork.from_run(config, args.data_dir, device=device, dtype=dtype)
    batch_size = args.batch_size or min(spec.batch_size for spec in work.specs.values())
    where = device if executor is None else f"Ray workers ({device})"
    print(f"generating on {where}, {batch_size} image(s) per pipeline call")
    done = leased_stage(db, args, "generate", work, batch_size, executor)
    print(
        f"{done} image(s) generated; {sum(1 for i in runs.items(db, args.run) if i['status'] == 'failed')} failed"
    )
    print_workers(executor)
    return 0
