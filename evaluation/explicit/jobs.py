"""Explicit-color runs as background jobs, on the Evaluate tab's job machinery.

`evaluation.pipeline.jobs.JobManager` takes a run through generate -> segment -> extract. An
explicit run (configuration ``mode == "explicit"``) has two stages instead: generate (the
same) and score (`evaluation.explicit.mode.score_explicit`: masks, presence, dominant
color and verdicts). `run_explicit_pipeline` is that pipeline with `jobs.run_pipeline`'s
arguments, and `ExplicitJobManager` is a `JobManager` that sends explicit runs to it and
every other run to `jobs.run_pipeline`: one queue, one job at a time, for both modes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from evaluation.explicit.presence import PRESENCE_THRESHOLD
from evaluation.models.registry import ModelSpec
from evaluation.pipeline import jobs, runs
from evaluation.pipeline.executors import Executor
from evaluation.pipeline.ray_storage import location

IN_PROCESS = jobs.ExecutorChoice()


@dataclass(frozen=True)
class ExplicitRequest:
    """An explicit run as the Evaluate tab describes it (checked by `plan_explicit_request`).

    Attributes
    ----------
    models : tuple of str
        Registry keys, at least one.
    tasks, systems : tuple of str, or None
        Subsets of `evaluation.explicit.prompts.TASKS` and of the color systems, at least one
        each (`build_prompts` refuses none); None means every task, and the default systems
        (`evaluation.explicit.prompts.DEFAULT_SYSTEMS`).
    size : str or int
        ``"compact"``, ``"full"`` or rounds per color (`evaluation.explicit.prompts.build_prompts`).
    seed : int
        Seed of the prompt set.
    samples : int
        Images per prompt (and guidance scale), >= 1.
    cfg_scales : tuple of float
        Guidance scales; empty: each model's own default (`mode.default_guidance`).
    colors, objects : tuple of str
        Only these color names / objects; empty: all.
    presence_threshold : float
        Detection score an object needs to count as present, in [0, 1].
    """

    models: tuple[str, ...]
    tasks: tuple[str, ...] | None = None
    systems: tuple[str, ...] | None = None
    size: str | int = "compact"
    seed: int = 0
    samples: int = 4
    cfg_scales: tuple[float, ...] = ()
    colors: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    presence_threshold: float = PRESENCE_THRESHOLD


def plan_explicit_request(
    request: ExplicitRequest, registry: Mapping[str, ModelSpec]
) -> tuple[list[dict], dict, list]:
    """Items, configuration and prompts of the explicit run `request` describes.

    Every choice is checked first (ValueError naming the field); the configuration stores the
    prompt selection and the presence check, so the run is the same when resumed.
    """
    from evaluation.explicit.mode import at_default_guidance, plan_explicit_run
    from evaluation.explicit.prompts import build_prompts
    from evaluation.pipeline.planning import resolve_models

    if not 0.0 <= request.presence_threshold <= 1.0:
        raise ValueError(f"`presence threshold` must be in [0, 1], got {request.presence_threshold}")
    specs = resolve_models(registry, request.models, cfg_scales=request.cfg_scales)
    if not request.cfg_scales:
        specs = at_default_guidance(specs)
    selection = {
        "tasks": None if request.tasks is None else list(request.tasks),
        "systems": None if request.systems is None else list(request.systems),
        "size": request.size,
        "seed": request.seed,
        "colors": list(request.colors) or None,
        "objects": list(request.objects) or None,
        "categories": None,
    }
    prompts = build_prompts(**selection)
    settings = {
        "prompts": selection,
        "presence": "detection",
        "presence_threshold": request.presence_threshold,
    }
    items, config = plan_explicit_run(specs, prompts, request.samples, settings)
    return items, config, prompts


def explicit_progress(done: runs.RunProgress) -> tuple[float, bool]:
    """The fraction of an explicit run's work done, in [0, 1], and whether it is complete.

    An explicit run has two stages (generate, score) and no distributions, so its
    `RunProgress` counts ``generated`` and ``segmented`` (scored) images; it is complete when
    every item is scored.
    """
    if done.items == 0:
        return 0.0, False
    return (done.generated + done.segmented) / (2 * done.items), done.segmented == done.items


def presence_settings(config: dict) -> dict:
    """The presence check stored in an explicit run's configuration, as keyword arguments of
    `evaluation.explicit.mode.LazyExplicitWork`: ``presence`` (``"detection"``, the
    default, or a VQA model's hub id or folder) and ``presence_threshold`` (the detection
    score; default `evaluation.explicit.presence.PRESENCE_THRESHOLD`)."""
    settings = config.get("explicit", {})
    return {
        "presence": settings.get("presence", "detection"),
        "presence_threshold": float(settings.get("presence_threshold", PRESENCE_THRESHOLD)),
    }


def run_explicit_pipeline(
    db: sqlite_utils.Database,
    run: str,
    data_dir: str | Path,
    segmenter: jobs.SegmenterSpec,
    *,
    device: str,
    should_stop: Callable[[], bool] = lambda: False,
    on_stage: Callable[[str], None] | None = None,
    executor: jobs.ExecutorChoice = IN_PROCESS,
    on_executor: Callable[[str, Executor], None] | None = None,
) -> None:
    """Take explicit run `run` through its pending work: generate, then score.

    Arguments as `evaluation.pipeline.jobs.run_pipeline`. The presence check is the run's
    own, stored in its configuration's ``explicit`` settings (`presence_settings`), so a
    resumed run checks presence as it started.

    Raises
    ------
    evaluation.pipeline.runs.RunError
        If `run` is not an explicit run.
    evaluation.pipeline.jobs.Cancelled
        If `should_stop` returned True (what was recorded stays).
    """
    from evaluation.explicit.mode import LazyExplicitWork, score_explicit

    data_dir = location(data_dir)
    config = runs.run_config(db, run)
    if not runs.is_explicit(config):
        raise runs.RunError(f"run {run!r} is not an explicit-color run")
    runs.claim_masking(db, run, jobs.masking_of(segmenter))
    cluster = jobs.cluster_of(executor)
    check = jobs.stop_check(run, should_stop)
    with jobs.job_lease(db, run):  # one process at a time works on a run
        # 1. Generate the pending (or failed) images, as for a concept run.
        jobs.generate_pending(db, run, data_dir, device, cluster, executor, check, on_stage, on_executor)
        # 2. Mask, check presence and score every generated image.
        if runs.pending_items(db, run, "segment"):
            jobs.announce(on_stage, "score")
            jobs.build_tiny_segmenter(segmenter)
            prompts = {row["prompt_id"]: row for row in runs.explicit_prompts(db, run)}
            work = LazyExplicitWork(
                segmenter,
                data_dir,
                prompts,
                device=device if cluster is None else "auto",
                **presence_settings(config),
            )
            score_on = jobs.stage_executor(executor, cluster, "segment", on_executor)
            score_explicit(db, run, work, jobs.SEGMENT_BATCH, executor=score_on, progress=check)


class ExplicitJobManager(jobs.JobManager):
    """A `JobManager` whose jobs run explicit runs through `run_explicit_pipeline` and any
    other run through `evaluation.pipeline.jobs.run_pipeline` (one queue for both)."""

    def pipeline_for(self, db: sqlite_utils.Database, run: str) -> Callable[..., None]:
        try:
            explicit = runs.is_explicit(runs.run_config(db, run))
        except runs.RunError:
            explicit = False  # the concept pipeline reports the unknown run
        return run_explicit_pipeline if explicit else jobs.run_pipeline
