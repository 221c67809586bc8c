"""What the per-prompt browser shows: each image of a prompt, its objects' masks, the dominant
color beside the target and its candidates, every metric and its verdict.

Plain data for the app (issue 17's research view); no Gradio here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sqlite_utils

from evaluation.color.colorspace import lab_to_srgb_uint8
from evaluation.color.systems import load_system
from evaluation.explicit.candidates import K_NEIGHBOURS, candidate_indices
from evaluation.explicit.rules import get_rules
from evaluation.pipeline import runs


def _hex(rgb: np.ndarray) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(v) for v in rgb))


@dataclass(frozen=True)
class ObjectView:
    """One object of one image.

    Attributes
    ----------
    object, target : str
        The object and its target color name.
    candidates : tuple of (str, str)
        (name, ``#rrggbb``) of the candidate set, the target first.
    present : bool
        Passed the presence check.
    segment_status : str
        ``ok``, ``no_detection`` or ``empty_mask``.
    mask_path : str or None
        The object's mask, relative to the data folder.
    dominant_hex : str or None
        The dominant color as sRGB (gamut-clipped), None when not scored.
    dominant_lab : tuple of float or None
        (L*, a*, b*).
    metrics : dict
        ``delta_chroma, delta_e00, hue_error`` (None when not scored).
    verdicts : dict
        ``chroma_pass, e00_pass, hue_pass, correct`` as bool (None when not scored).
    """

    object: str
    target: str
    candidates: tuple[tuple[str, str], ...]
    present: bool
    segment_status: str
    mask_path: str | None
    dominant_hex: str | None
    dominant_lab: tuple[float, float, float] | None
    metrics: dict
    verdicts: dict


@dataclass(frozen=True)
class ImageView:
    """One image of a prompt: where it is, and its objects.

    ``scored`` when every object is present and masked, ``correct`` when every one is.
    """

    item_id: int
    model: str
    cfg: float
    sample: int
    image_path: str
    objects: tuple[ObjectView, ...]
    scored: bool
    correct: bool


def _object_view(row: dict, k: int) -> ObjectView:
    system = load_system(row["system"])
    rows = candidate_indices(system, row["target"], k)
    scored = row["dominant_l"] is not None
    lab = (row["dominant_l"], row["dominant_a"], row["dominant_b"]) if scored else None
    return ObjectView(
        object=row["object"],
        target=row["target"],
        candidates=tuple((system.names[i], _hex(system.rgb[i])) for i in rows),
        present=bool(row["present"]),
        segment_status=row["segment_status"],
        mask_path=row["mask_path"],
        dominant_hex=_hex(lab_to_srgb_uint8(np.array(lab))) if scored else None,
        dominant_lab=lab,
        metrics={name: row[name] for name in ("delta_chroma", "delta_e00", "hue_error")},
        verdicts={
            name: None if row[name] is None else bool(row[name])
            for name in ("chroma_pass", "e00_pass", "hue_pass", "correct")
        },
    )


def prompt_view(
    db: sqlite_utils.Database, run: str, prompt_id: str, *, scoring: str = "paper", k: int = K_NEIGHBOURS
) -> list[ImageView]:
    """Every judged image of one prompt of explicit run `run`, under rule set `scoring`.

    Parameters
    ----------
    k : int
        Neighbours shown in each candidate set (the run's scoring used `K_NEIGHBOURS`).

    Returns
    -------
    list of ImageView
        In item order (model, cfg, sample as stored); empty when nothing is judged yet.

    Raises
    ------
    ValueError
        If `scoring` is unknown.
    """
    get_rules(scoring)
    rows = runs.explicit_results(db, run=run, scoring=scoring, prompt_id=prompt_id)
    images: dict[int, list[dict]] = {}
    for row in rows:
        images.setdefault(row["item_id"], []).append(row)
    views = []
    for item_id, objects in images.items():
        shown = tuple(_object_view(row, k) for row in objects)
        scored = all(o.present and o.segment_status == "ok" for o in shown)
        first = objects[0]
        views.append(
            ImageView(
                item_id=item_id,
                model=first["model"],
                cfg=first["cfg"],
                sample=first["sample"],
                image_path=first["image_path"],
                objects=shown,
                scored=scored,
                correct=scored and all(o.verdicts["correct"] for o in shown),
            )
        )
    return views
