"""What the Evaluate tab's estimates and progress bar cost: masking time, whole jobs, polls.

Three measurements, each printed as a Markdown table row:

- ``segment``: seconds per image of `evaluation.models.segmentation.segment` with GroundingDINO
  (Swin-B backbone, BERT-base text encoder: grounding-dino-base's architecture) and SAM
  ViT-H (sam-vit-huge's architecture) built from their published configurations with
  random weights (no download; the compute does not depend on the weights), on 1024x1024
  images, thresholds 0 so that every image is masked. Run it on the GPU.
- ``job``: seconds per image of a whole tiny-random job (`evaluation.pipeline.jobs.run_pipeline`:
  generate, mask with the tiny detector and SAM, extract), on this device; the figure the
  estimate table uses for ``tiny-random``.
- ``poll``: milliseconds of one progress poll (`evaluation.pipeline.runs.run_progress` and
  `list_runs`) on a stored run of N items, the query the page's timer repeats.

    python -m bench.bench_research segment|job|poll [--n N] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def _device() -> tuple[str, str]:
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.cuda.get_device_name(0)
    return "cpu", "CPU"


def full_size_segmenters(device: str, root: Path):
    """GroundingDINO-base and SAM ViT-H architectures with random weights, loaded through the app's loaders."""
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SamConfig,
        SamImageProcessor,
        SamModel,
        SamProcessor,
        SamVisionConfig,
        SwinConfig,
    )

    from evaluation.models.segmentation import load_detector, load_sam
    from evaluation.models.tiny import write_bert_vocab

    torch.manual_seed(0)
    write_bert_vocab(root / "vocab")
    swin = SwinConfig(
        image_size=384,
        embed_dim=128,
        depths=[2, 2, 18, 2],
        num_heads=[4, 8, 16, 32],
        window_size=12,
        out_features=["stage2", "stage3", "stage4"],
    )
    config = GroundingDinoConfig(
        backbone_config=swin, text_config=BertConfig(), use_timm_backbone=False, use_pretrained_backbone=False
    )
    GroundingDinoForObjectDetection(config).save_pretrained(root / "gdino")
    GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(), tokenizer=BertTokenizer.from_pretrained(root / "vocab")
    ).save_pretrained(root / "gdino")
    vision = SamVisionConfig(
        hidden_size=1280,
        num_hidden_layers=32,
        num_attention_heads=16,
        global_attn_indexes=[7, 15, 23, 31],
        initializer_range=0.02,
    )
    SamModel(SamConfig(vision_config=vision.to_dict(), initializer_range=0.02)).save_pretrained(root / "sam")
    SamProcessor(image_processor=SamImageProcessor()).save_pretrained(root / "sam")
    return load_detector(root / "gdino", device=device), load_sam(root / "sam", device=device)


def bench_segment(n: int, repeats: int) -> dict:
    """Seconds per 1024x1024 image of `segment` with full-size random segmenters."""
    import torch

    from evaluation.models.segmentation import segment

    device, name = _device()
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8) for _ in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        detector, sam = full_size_segmenters(device, Path(tmp))
        segment(images[0], "apple", 0.0, 0.0, detector=detector, sam=sam)
        times = []
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            statuses = [segment(im, "apple", 0.0, 0.0, detector=detector, sam=sam).status for im in images]
            if device == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) / n)
    return {"device": name, "seconds_per_image": min(times), "statuses": sorted(set(statuses))}


def bench_job(n: int, repeats: int) -> dict:
    """Seconds per image of a whole tiny-random job (generate, mask, extract) on this device."""
    from evaluation.concepts import load_concepts
    from evaluation.models.registry import load_registry
    from evaluation.models.tiny import build_all
    from evaluation.pipeline import runs
    from evaluation.pipeline.jobs import run_pipeline, segmenter_preset
    from evaluation.pipeline.planning import ConceptQuery, EvaluationRequest, plan_request
    from storage import ensure_schema, open_db

    device, name = _device()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        build_all(Path(tmp) / "models")
        db = open_db(Path(tmp) / "db.sqlite")
        ensure_schema(db)
        keys = tuple(c.key for c in load_concepts()[:n])
        for repeat in range(repeats + 1):
            request = EvaluationRequest(("tiny-random",), ConceptQuery(keys=keys), ("natural",), (7.5,), 1)
            items, config = plan_request(request, load_registry(), load_concepts())
            runs.create_run(db, f"r{repeat}", items, config)
            start = time.perf_counter()
            run_pipeline(
                db,
                f"r{repeat}",
                tmp,
                segmenter_preset("tiny-random", Path(tmp) / "models", 0, 0),
                device=device,
            )
            if repeat:  # the first job also loads the libraries
                times.append((time.perf_counter() - start) / len(items))
        db.close()
    return {"device": name, "seconds_per_image": min(times), "images": n}


def bench_poll(n: int, repeats: int) -> dict:
    """Milliseconds of one progress poll on a run of `n` items (all pending)."""
    from evaluation.pipeline import runs
    from storage import ensure_schema, open_db

    with tempfile.TemporaryDirectory() as tmp:
        db = open_db(Path(tmp) / "db.sqlite")
        ensure_schema(db)
        items = [
            {
                "model": "m",
                "concept": f"c{i // 35}",
                "noun": "n",
                "style": "natural",
                "cfg": float(i % 7),
                "sample": (i // 7) % 5,
                "seed": i,
                "prompt": "p",
            }
            for i in range(n)
        ]
        runs.create_run(db, "big", items, {"n": n})
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            runs.run_progress(db, "big")
            runs.list_runs(db)
            times.append(1000 * (time.perf_counter() - start))
        db.close()
    return {"items": n, "ms_per_poll": statistics.median(times)}


def main(argv: list[str] | None = None) -> int:
    """Run one measurement and print it as a Markdown row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["segment", "job", "poll"])
    parser.add_argument("--n", type=int, default=None, help="images (segment, job) or items (poll)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.what == "segment":
        r = bench_segment(args.n or 8, args.repeats)
        print(
            f"| segment | {r['device']} | {r['seconds_per_image']:.3f} s/image | statuses {r['statuses']} |"
        )
    elif args.what == "job":
        r = bench_job(args.n or 8, args.repeats)
        print(
            f"| job tiny-random | {r['device']} | {r['seconds_per_image']:.3f} s/image | {r['images']} images |"
        )
    else:
        r = bench_poll(args.n or 100_000, args.repeats)
        print(f"| poll | {r['items']} items | {r['ms_per_poll']:.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
