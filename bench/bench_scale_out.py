"""Scale-out benchmark: the same tiny-model run in-process and on a local Ray cluster.

A run of the tiny random pipeline (`evaluation.models.tiny`) over 2 concepts x 2 styles x 2 CFG
x `samples` seeds goes through generate -> segment -> extract
(`evaluation.pipeline.jobs.run_pipeline`) three times, each in a fresh database and data folder:
in-process, then on Ray with 1 and with 2 workers per stage. A no-op work through
`RayExecutor` (one worker, one item per batch) gives Ray's own cost per item: a call to an
actor, its result back, and the head's bookkeeping. Torch runs on one thread in this
process, as in Ray's one-CPU workers, so the three runs make identical images (checked).

    python -m bench.bench_scale_out [--samples 4] [--noop-items 200]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

#: A real model's cost per image (SDXL at 1024x1024 on an H100 is 2.0 s, BENCHMARKS.md).
REAL_SECONDS_PER_IMAGE = 2.0


class _NoOp:
    """Work that does nothing: what is left of a batch's time is the executor's."""

    def __call__(self, batch):
        return [{"id": item["id"]} for item in batch]


def _store_run(db, name: str, models_dir: Path, samples: int) -> int:
    from evaluation.concepts import load_concepts
    from evaluation.models.registry import load_registry, with_source
    from evaluation.pipeline import runs
    from evaluation.pipeline.stages import plan_run

    spec = replace(
        with_source(load_registry()["tiny-random"], str(models_dir / "tiny-random")), cfg_scales=(2.0, 7.5)
    )
    concepts = [c for c in load_concepts() if c.key in ("apple", "banana")]
    items, config = plan_run([spec], concepts, ["natural", "clipart"], samples)
    return runs.create_run(db, name, items, config)


def _timed_run(root: Path, models_dir: Path, label: str, samples: int, executor) -> dict:
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import run_pipeline, segmenter_preset

    folder = root / label
    db = runs.connect(folder / "db.sqlite")
    try:
        n = _store_run(db, "bench", models_dir, samples)
        stage, marks, starts = [""], [], {}

        def begin(name: str) -> None:
            stage[0] = name
            starts[name] = time.perf_counter()

        def mark() -> bool:  # called after every recorded batch
            marks.append((stage[0], time.perf_counter()))
            return False

        start = time.perf_counter()
        run_pipeline(
            db,
            "bench",
            folder,
            segmenter_preset("tiny-random", models_dir, 0.0, 0.0),
            device="cpu",
            executor=executor,
            should_stop=mark,
            on_stage=begin,
        )
        seconds = time.perf_counter() - start
        generated = [t for name, t in marks if name == "generate"]
        # Start-up: from each stage's start to its first recorded batch (workers start, models load).
        startup = sum(
            min(t for name, t in marks if name == s) - starts[s]
            for s in starts
            if any(name == s for name, _ in marks)
        )
        digests = [row["image_sha256"] for row in runs.items(db, "bench")]
    finally:
        db.close()
    # Steady state: images recorded after the first one, over the time since (one image per batch).
    steady = (len(generated) - 1) / (generated[-1] - generated[0])
    return {
        "label": label,
        "items": n,
        "seconds": seconds,
        "images_per_s": n / seconds,
        "steady_generate_images_per_s": steady,
        "startup_s": startup,
        "digests": digests,
    }


def _noop_overhead(items: int) -> float:
    """Seconds per item of Ray's dispatch, one worker, one item per batch."""
    from evaluation.pipeline.ray_executor import RayExecutor

    batches = [[{"id": i}] for i in range(items)]
    executor = RayExecutor(1)
    executor.run(_NoOp(), batches[:4], lambda results: None)  # actor start-up, not per item
    start = time.perf_counter()
    executor.run(_NoOp(), batches, lambda results: None)
    return (time.perf_counter() - start) / items


def run(samples: int = 4, noop_items: int = 200) -> dict:
    """Time the run in-process and on Ray (1 and 2 workers); see the module docstring.

    Returns
    -------
    dict
        ``rows`` (label, items, seconds, images_per_s, steady_generate_images_per_s: the
        generate stage after its first image, i.e. without start-up), ``ray_init_s``,
        ``noop_overhead_ms`` (Ray's cost per item), ``overhead_per_item_s`` (Ray with one
        worker minus in-process, per item), ``identical`` (same image digests everywhere),
        ``cluster`` (what Ray saw).
    """
    from evaluation.models.tiny import build_all, one_cpu_thread
    from evaluation.pipeline.jobs import ExecutorChoice
    from evaluation.pipeline.ray_executor import connect, shutdown

    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-out-") as tmp,
        one_cpu_thread(),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        root = Path(tmp)
        models_dir = root / "models"
        build_all(models_dir)
        rows = [_timed_run(root, models_dir, "in-process", samples, ExecutorChoice())]
        start = time.perf_counter()
        cluster = connect("local", num_cpus=2)
        ray_init = time.perf_counter() - start
        try:
            for workers in (1, 2):
                rows.append(
                    _timed_run(
                        root,
                        models_dir,
                        f"ray, {workers} worker{'s' * (workers > 1)}",
                        samples,
                        ExecutorChoice("ray", workers=workers),
                    )
                )
            noop = _noop_overhead(noop_items)
        finally:
            shutdown()
    identical = all(row["digests"] == rows[0]["digests"] for row in rows)
    for row in rows:
        del row["digests"]
    items = rows[0]["items"]
    return {
        "rows": rows,
        "ray_init_s": ray_init,
        "noop_overhead_ms": 1000 * noop,
        "overhead_per_item_s": (rows[1]["seconds"] - rows[0]["seconds"]) / items,
        "steady_overhead_per_item_ms": 1000
        * (1 / rows[1]["steady_generate_images_per_s"] - 1 / rows[0]["steady_generate_images_per_s"]),
        "identical": identical,
        "cluster": cluster.describe(),
        "samples": samples,
        "noop_items": noop_items,
    }


def markdown(f: dict) -> str:
    """The "Scale-out" section of BENCHMARKS.md for the figures of `run`."""
    lines = [
        "| executor | images | wall s (generate + mask + extract) | of which start-up s | images/s, whole run "
        "| generate images/s, steady state |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['label']} | {r['items']} | {r['seconds']:.1f} | {r['startup_s']:.1f} | {r['images_per_s']:.2f} | "
        f"{r['steady_generate_images_per_s']:.2f} |"
        for r in f["rows"]
    ]
    share = f["noop_overhead_ms"] / 1000 / REAL_SECONDS_PER_IMAGE
    lines += [
        "",
        f"Cluster: local, {f['cluster']}; `ray.init` took {f['ray_init_s']:.1f} s (once per process, not counted "
        f"above). Same images in every run: {'yes' if f['identical'] else 'NO'}.",
        f"Ray's own cost per item (no-op work, one worker, one item per call, {f['noop_items']} calls): "
        f"**{f['noop_overhead_ms']:.1f} ms**, {100 * share:.2f} % of a real model's "
        f"{REAL_SECONDS_PER_IMAGE:.0f} s per image. Whole-run difference, Ray with one worker minus in-process: "
        f"{f['overhead_per_item_s']:.2f} s per item (actor start-up and each worker loading its models once, "
        "spread over only "
        f"{f['rows'][0]['items']} items; it does not grow with the run).",
        "Start-up is, summed over the three stages, the time from a stage's start to its first recorded "
        "batch: worker processes starting and importing torch, and each loading its models. "
        "Steady state is the generate stage from its first recorded image to its last: the rate once "
        "the workers have started and loaded their models. There, Ray with one worker costs "
        f"{f['steady_overhead_per_item_ms']:.0f} ms more per image than in-process "
        f"({f['steady_overhead_per_item_ms'] / 10 / REAL_SECONDS_PER_IMAGE:.1f} % of a real image's "
        f"{REAL_SECONDS_PER_IMAGE:.0f} s).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_scale_out", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--samples", type=int, default=4, help="seeds per cell (default 4: 32 images)")
    parser.add_argument("--noop-items", type=int, default=200, help="calls timed for Ray's own cost")
    args = parser.parse_args(argv)
    result = run(args.samples, args.noop_items)
    print(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
