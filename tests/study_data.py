"""Synthetic but real study inputs: model runs with images, ground truths with colorings.

Model outputs go through the engine's own bookkeeping (`evaluation.pipeline.runs`), images and
colorings through `annotation.files`, so a study reads them exactly as it would read a
real run's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from annotation.concepts import sync_concepts
from annotation.files import store_png
from annotation.study.design import GroundTruth, GroundTruthSource, ModelSource
from evaluation.color.palette import load_uw71
from evaluation.concepts import load_concepts
from evaluation.pipeline import runs

MODELS = ("omnigen", "sana", "sdxl")
RUN = "study-run"
CFG = 4.5
STYLE = "clipart"


def _swatch(data_dir: Path, hex_color: str, folder: str) -> str:
    rgb = np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)
    return store_png(data_dir, np.broadcast_to(rgb, (8, 8, 3)).copy(), folder=folder).path


def sparse_distribution(rng: np.random.Generator, k: int = 4) -> np.ndarray:
    """A (71,) distribution with mass on `k` random bins."""
    p = np.zeros(71)
    p[rng.choice(71, size=k, replace=False)] = rng.dirichlet(np.ones(k))
    return p


def populate(
    db, data_dir: Path, n_concepts: int, rng: np.random.Generator, *, models=MODELS
) -> tuple[dict[str, np.ndarray], dict[tuple[str, str], np.ndarray]]:
    """Store concepts, one run with two images per (model, concept), and return the truths.

    Each model's distribution is a mix of the truth and a random sparse distribution,
    with a mixing weight drawn per (concept, model), so the models' distances to the
    truth differ from pair to pair.

    Returns
    -------
    truths : dict of concept key to (71,) ndarray
    outputs : dict of (concept, model) to (71,) ndarray
    """
    sync_concepts(db)
    keys = [c.key for c in load_concepts()][:n_concepts]
    palette = load_uw71()
    truths = {key: sparse_distribution(rng) for key in keys}
    outputs = {
        (key, model): (w := rng.uniform(0.0, 1.0)) * truths[key] + (1 - w) * sparse_distribution(rng)
        for key in keys
        for model in models
    }
    items = [
        {
            "model": m,
            "concept": key,
            "noun": key,
            "style": STYLE,
            "cfg": CFG,
            "sample": s,
            "seed": s,
            "prompt": f"A clip-art cartoon of a {key}",
        }
        for m in models
        for key in keys
        for s in range(2)
    ]
    runs.create_run(db, RUN, items, {"models": list(models)})
    updates = []
    for item in runs.items(db, RUN):
        p = outputs[item["concept"], item["model"]]
        path = _swatch(data_dir, palette.hex[int(np.argmax(p))], "runs")
        updates.append({"id": item["id"], "status": "segmented", "segment_status": "ok", "image_path": path})
    runs.record_items(db, updates)
    for (key, model), p in outputs.items():
        runs.store_model_distribution(db, RUN, model, key, STYLE, CFG, p, 2, 0)
    return truths, outputs


def sources(models=MODELS) -> list[ModelSource]:
    return [ModelSource(m, RUN, CFG) for m in models]


def truth_source(data_dir: Path, truths: dict[str, np.ndarray]) -> GroundTruthSource:
    """Ground truths with five coloring images each and a dominant-color strip."""
    palette = load_uw71()

    def get(db, key):
        if key not in truths:
            return None
        top = np.argsort(-truths[key], kind="stable")[:2]
        colorings = tuple(_swatch(data_dir, palette.hex[top[i % 2]], "colorings") for i in range(5))
        return GroundTruth(truths[key], 5, ((palette.hex[top[0]], 3), (palette.hex[top[1]], 2)), colorings)

    return GroundTruthSource("synthetic colorings", get)
