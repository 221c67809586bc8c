"""The generate stage of one run, in-process and on a local Ray cluster, with SDXL's architecture.

SDXL with random weights (`bench.bench_generation.sdxl_random_pipeline`) is saved with
``save_pretrained`` into a folder and registered as a local model (the registry's ``sdxl``
entry with that folder as its source), so both executors load it the way a run loads any
model: `evaluation.models.registry.load_pipeline`, through ``from_pretrained``. The same
items (``concepts`` concepts x 1 style x 1 CFG x ``samples`` seeds, batches of the
registry's size) then go through `evaluation.pipeline.stages.run_stage` with
`GenerationWork`, the generate stage of `evaluation.pipeline.jobs.run_pipeline`: first
in-process, then on Ray (`evaluation.pipeline.ray_executor`, one worker holding the GPU),
each in a fresh database and data folder. PNG writing is part of both.

Reported per executor: wall time of the stage, start-up (from the stage's start to its first
recorded batch: process start, imports, model loading), and the steady rate (images recorded
after the first batch over the time since). Same images: SHA-256 of every PNG, else the
largest difference in uint8 levels.

    python -m bench.bench_ray_gpu [--samples 4] [--concepts 6] [--steps 50] [--tiny]

``--tiny`` runs the same code with a few-channel SDXL on the CPU (a check, not a figure).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path


def save_random_sdxl(path: Path, *, tiny: bool) -> Path:
    """Build SDXL with random weights (float16 on the GPU; tiny float32 on the CPU) and save it."""
    import torch

    from bench.bench_generation import sdxl_random_pipeline

    if tiny:
        pipe = sdxl_random_pipeline("cpu", torch.float32, tiny=True)
    else:
        pipe = sdxl_random_pipeline("cuda", torch.float16)
    pipe.save_pretrained(path)
    del pipe
    _free()
    return path


def _free() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def model_spec(path: Path, *, steps: int, resolution: int, batch: int):
    """The registry's ``sdxl`` entry loading from `path`, at one CFG scale."""
    from evaluation.models.registry import load_registry, with_source

    return replace(
        with_source(load_registry()["sdxl"], path),
        steps=steps,
        resolution=resolution,
        cfg_scales=(7.5,),
        batch_size=batch,
    )


def timed_stage(root: Path, label: str, spec, concepts: int, samples: int, executor, device: str) -> dict:
    """Create the run in a fresh database under `root`/`label` and time its generate stage."""
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs
    from evaluation.pipeline.stages import GenerationWork, plan_run, run_stage

    folder = root / label.replace(" ", "-").replace(",", "")
    db = runs.connect(folder / "db.sqlite")
    try:
        items, config = plan_run([spec], load_concepts()[:concepts], ["natural"], samples)
        runs.create_run(db, "bench", items, config)
        work = GenerationWork.from_run(config, folder, device=device)
        marks: list[tuple[int, float]] = []
        start = time.perf_counter()
        run_stage(
            db,
            "bench",
            "generate",
            work,
            spec.batch_size,
            executor=executor,
            progress=lambda done, total: marks.append((done, time.perf_counter())),
            data_dir=folder,
        )
        seconds = time.perf_counter() - start
        rows = runs.items(db, "bench")
    finally:
        db.close()
    del work
    _free()
    (first_done, first_t), (last_done, last_t) = marks[0], marks[-1]
    return {
        "label": label,
        "items": len(rows),
        "generated": sum(r["status"] == "generated" for r in rows),
        "seconds": seconds,
        "startup_s": first_t - start,
        "steady_images_per_s": (last_done - first_done) / (last_t - first_t) if last_t > first_t else None,
        "gen_seconds_per_image": sum(r["gen_seconds"] or 0 for r in rows) / len(rows),
        "folder": str(folder),
        "paths": [r["image_path"] for r in rows],
        "digests": [r["image_sha256"] for r in rows],
    }


def _max_difference(a: dict, b: dict) -> int:
    """Largest uint8 difference between the two runs' images, item by item."""
    import numpy as np
    from PIL import Image

    worst = 0
    for pa, pb in zip(a["paths"], b["paths"]):
        with (
            Image.open(io.BytesIO((Path(a["folder"]) / pa).read_bytes())) as ia,
            Image.open(io.BytesIO((Path(b["folder"]) / pb).read_bytes())) as ib,
        ):
            delta = np.abs(np.asarray(ia, dtype=np.int16) - np.asarray(ib, dtype=np.int16))
        worst = max(worst, int(delta.max()))
    return worst


def run(
    *,
    samples: int = 4,
    concepts: int = 6,
    steps: int = 50,
    batch: int = 4,
    tiny: bool = False,
    root: Path | None = None,
) -> dict:
    """Time the generate stage in-process and on Ray; see the module docstring."""
    import ray
    import torch

    from evaluation.pipeline.executors import InProcessExecutor
    from evaluation.pipeline.ray_executor import RayExecutor, connect, shutdown

    device = "cpu" if tiny else "cuda"
    with tempfile.TemporaryDirectory(prefix="bench-ray-gpu-", dir=root) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tmp = Path(tmp)
        start = time.perf_counter()
        model_dir = save_random_sdxl(tmp / "sdxl-random", tiny=tiny)
        save_s = time.perf_counter() - start
        spec = model_spec(model_dir, steps=steps, resolution=64 if tiny else 1024, batch=batch)
        rows = [timed_stage(tmp, "in-process", spec, concepts, samples, InProcessExecutor(), device)]
        start = time.perf_counter()
        cluster = connect("local")
        ray_init_s = time.perf_counter() - start
        try:
            executor = RayExecutor.for_stage("generate", cluster)
            rows.append(timed_stage(tmp, "ray, 1 worker", spec, concepts, samples, executor, "auto"))
            workers = {name: vars(p) for name, p in executor.progress().items()}
        finally:
            shutdown()
        identical = rows[0]["digests"] == rows[1]["digests"]
        max_diff = 0 if identical else _max_difference(rows[0], rows[1])
    for row in rows:
        for key in ("folder", "paths", "digests"):
            del row[key]
    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else "CPU",
        "model": "SDXL architecture, random weights, " + ("tiny, float32" if tiny else "float16"),
        "steps": steps,
        "batch": batch,
        "resolution": spec.resolution,
        "versions": {"torch": torch.__version__, "ray": ray.__version__, **_versions()},
        "save_pretrained_s": save_s,
        "ray_init_s": ray_init_s,
        "cluster": cluster.describe(),
        "workers": workers,
        "rows": rows,
        "identical": identical,
        "max_abs_diff": max_diff,
    }


def _versions() -> dict:
    import diffusers
    import transformers

    return {"diffusers": diffusers.__version__, "transformers": transformers.__version__}


def markdown(f: dict) -> str:
    """A table of `run`'s figures."""
    lines = [
        f"Device: {f['device']}; {f['model']}; {f['resolution']}², {f['steps']} steps, batch {f['batch']}; "
        + ", ".join(f"{k} {v}" for k, v in f["versions"].items())
        + ".",
        "",
        "| executor | images | wall s | start-up s (to first batch) | images/s, whole stage "
        "| images/s, steady state |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in f["rows"]:
        steady = "-" if r["steady_images_per_s"] is None else f"{r['steady_images_per_s']:.3f}"
        lines.append(
            f"| {r['label']} | {r['generated']}/{r['items']} | {r['seconds']:.1f} | {r['startup_s']:.1f} "
            f"| {r['items'] / r['seconds']:.3f} | {steady} |"
        )
    same = "yes (same SHA-256)" if f["identical"] else f"no: max abs diff {f['max_abs_diff']} uint8 levels"
    lines += [
        "",
        f"Cluster: {f['cluster']}; `ray.init` {f['ray_init_s']:.1f} s (not counted above); "
        f"save_pretrained of the random model {f['save_pretrained_s']:.1f} s. Same images: {same}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_ray_gpu", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--samples", type=int, default=4, help="seeds per concept (default 4)")
    parser.add_argument("--concepts", type=int, default=6, help="concepts (default 6: 24 images)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="few-channel SDXL on the CPU (a check)")
    parser.add_argument("--root", type=Path, default=None, help="folder for the temporary model and runs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(**{name: value for name, value in vars(args).items() if name != "json"})
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
