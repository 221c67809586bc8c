"""Scores of model distributions against human ones: the long-form metrics frame.

`score` pairs every stored P_M(x|c) (per model, concept, style, cfg) with P_H(x|c) of one
human source and computes the per-concept metrics of `evaluation.color.metrics` in batches. The
paper's tables are built from its output by `evaluation.analysis.tables`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from evaluation.color import metrics
from evaluation.concepts import Concept
from evaluation.pipeline import runs
from storage import human

LONG_COLUMNS = [
    "run",
    "model",
    "concept",
    "base",
    "modifier_type",
    "style",
    "cfg",
    "n_images",
    "n_excluded",
    "pcc",
    "emd",
    "ed",
    "dominant_human",
    "dominant_model",
    "hue_diff",
]


def concept_metrics(human: np.ndarray, model: np.ndarray) -> dict[str, np.ndarray]:
    """Row-wise metrics of (N, 71) human and model distributions (EMD solved in one batch).

    Both arrays are checked once (`evaluation.color.metrics.check_pair`); the metrics are
    its kernels, so the values equal the public metrics' bit for bit.

    Parameters
    ----------
    human, model : array_like, shape (N, 71)
        Mass vectors (`storage.distributions.check_masses`), row i against row i.

    Returns
    -------
    dict of str to ndarray
        Each (N,): ``pcc``, ``emd`` (CIELAB ΔE), ``ed`` (nats), ``dominant_human``,
        ``dominant_model`` (``color_index``) and ``hue_diff`` (degrees, NaN where a
        dominant bin is achromatic).

    Raises
    ------
    ValueError
        On invalid masses or different shapes, naming `human` or `model`.
    """
    human, model = metrics.check_pair(np.atleast_2d(human), np.atleast_2d(model), ("human", "model"))
    dominant_h, dominant_m = metrics._dominant(human), metrics._dominant(model)
    return {
        "pcc": metrics._pcc(human, model),
        "emd": metrics._emd_rows(human, model),
        "ed": metrics._entropy_difference(human, model),
        "dominant_human": dominant_h,
        "dominant_model": dominant_m,
        "hue_diff": metrics._hue_differences(dominant_h, dominant_m),
    }


def score(
    model_rows: Sequence[Mapping],
    human: Mapping[str, np.ndarray],
    concepts: Sequence[Concept],
) -> pd.DataFrame:
    """Per-concept metrics of model distributions against one human source.

    Parameters
    ----------
    model_rows : sequence of Mapping
        Rows of `evaluation.pipeline.runs.model_distributions`: ``run, model, concept, style, cfg,
        p`` ((71,) or None), ``n_images, n_excluded``.
    human : Mapping of str to ndarray
        P_H(x|c) by concept key, each (71,) summing to 1.
    concepts : sequence of Concept
        The concept list, for each key's base noun and modifier type.

    Returns
    -------
    pandas.DataFrame
        One row per model distribution that has both a ``p`` and a human distribution, with
        columns `LONG_COLUMNS`: PCC in [-1, 1], EMD in CIELAB units (>= 0), ED in nats
        (>= 0), dominant bins (``color_index``; DCA is derived from them by
        `evaluation.analysis.tables.with_dca`), and ``hue_diff`` in degrees [0, 180] (NaN when a
        dominant bin is achromatic). This is the metrics frame of `evaluation.analysis.tables`.
    """
    by_key = {c.key: c for c in concepts}
    rows = [r for r in model_rows if r["p"] is not None and r["concept"] in human]
    unknown = sorted({r["concept"] for r in rows} - set(by_key))
    if unknown:
        raise ValueError(f"`model_rows` name concepts missing from `concepts`: {unknown[:5]}")
    if not rows:
        return pd.DataFrame(columns=LONG_COLUMNS)
    table = pd.DataFrame(
        {
            "run": [r["run"] for r in rows],
            "model": [r["model"] for r in rows],
            "concept": [r["concept"] for r in rows],
            "base": [by_key[r["concept"]].base for r in rows],
            "modifier_type": [by_key[r["concept"]].modifier_type for r in rows],
            "style": [r["style"] for r in rows],
            "cfg": [float(r["cfg"]) for r in rows],
            "n_images": [r["n_images"] for r in rows],
            "n_excluded": [r["n_excluded"] for r in rows],
        }
    )
    computed = concept_metrics(
        np.stack([human[r["concept"]] for r in rows]), np.stack([r["p"] for r in rows])
    )
    for name, values in computed.items():
        table[name] = values
    return table[LONG_COLUMNS]


def stored_scores(db, source: str, concepts: Sequence[Concept]) -> pd.DataFrame:
    """The metrics frame of every stored model distribution against `source`, from the store.

    Scores are computed once per (model row, human row) and kept in the ``scores`` table
    (`evaluation.pipeline.runs.store_scores`); a score is used only while both rows are the ones it
    was computed from, so a changed P_H or a re-extracted P_M is rescored here, in one batch,
    the next time the frame is asked for. At the full study's size this turns a view from
    ~54,000 EMD solves into one query (`BENCHMARKS.md`, "Full study size").

    Parameters
    ----------
    db : sqlite_utils.Database
    source : str
        A human source (`storage.human.sources`).
    concepts : sequence of Concept

    Returns
    -------
    pandas.DataFrame
        As `score` returns it (`LONG_COLUMNS`), one row per stored model row (every run),
        plus ``created_at`` (the model row's, to pick the newest of a cell).
    """
    frame = runs.scored_distributions(db, source)
    # Usually every score is valid already; else the unscored rows (read with their
    # distributions) are scored, stored, and the frame read again.
    missing = [] if frame["scored"].astype(bool).all() else runs.unscored_distributions(db, source)
    if missing:
        computed = concept_metrics(
            np.stack([r["human_p"] for r in missing]), np.stack([r["p"] for r in missing])
        )
        for i, row in enumerate(missing):
            row.update({name: values[i].item() for name, values in computed.items()})
        runs.store_scores(db, source, missing)
        frame = runs.scored_distributions(db, source)
    frame = frame[frame["scored"].astype(bool)].reset_index(drop=True)
    by_key = {c.key: c for c in concepts}
    unknown = sorted(set(frame["concept"].unique()) - set(by_key))
    if unknown:
        raise ValueError(f"stored distributions name concepts missing from `concepts`: {unknown[:5]}")
    frame = frame.reindex(columns=[*LONG_COLUMNS, "created_at"])
    frame["base"] = frame["concept"].map({k: c.base for k, c in by_key.items()})
    frame["modifier_type"] = frame["concept"].map({k: c.modifier_type for k, c in by_key.items()})
    frame["cfg"] = frame["cfg"].astype(float)
    frame["hue_diff"] = frame["hue_diff"].astype(float)
    return frame[[*LONG_COLUMNS, "created_at"]]


def score_every_source(db, concepts: Sequence[Concept]) -> None:
    """`stored_scores` for every human source (`storage.human.sources`), so that the first
    research view after new distributions finds them scored."""
    for source in human.sources(db):
        stored_scores(db, source, concepts)
