"""Scores of model distributions against human ones, and the paper's Table 1 / Table 2 layouts.

`score` pairs every stored P_M(x|c) (per model, concept, style, cfg) with P_H(x|c) of one
human source and computes the per-concept metrics of `evaluation.metrics` in batches.
`table1` and `table2` average them per model over concepts, by concept type (Original /
Visual state / Emotional) and style (Natural / Clipart).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from evaluation import metrics
from evaluation.concepts import Concept

TYPE_LABELS = {"original": "Original", "visual_state": "Visual state", "emotional": "Emotional"}
STYLE_LABELS = {"natural": "Natural", "clipart": "Clipart"}
TABLE1_METRICS = {"pcc": "PCC", "emd": "EMD", "ed": "ED"}
TABLE2_METRICS = {"dca": "DCA", "delta_hue": "ΔHue"}
LONG_COLUMNS = [
    "run", "model", "concept", "base", "modifier_type", "style", "cfg", "n_images", "n_excluded",
    "pcc", "emd", "ed", "dominant_human", "dominant_model", "dca", "delta_hue",
]


def _concept_metrics(human: np.ndarray, model: np.ndarray) -> dict[str, np.ndarray]:
    """Row-wise metrics of (N, 71) human and model distributions (EMD solved in one batch)."""
    dominant_h, dominant_m = metrics.dominant_bins(human), metrics.dominant_bins(model)
    return {
        "pcc": np.atleast_1d(metrics.pcc(human, model)),
        "emd": metrics.emd_rows(human, model),
        "ed": np.atleast_1d(metrics.entropy_difference(human, model)),
        "dominant_human": dominant_h,
        "dominant_model": dominant_m,
        "dca": (dominant_h == dominant_m).astype(np.float64),
        "delta_hue": metrics.hue_differences(human, model),
    }


def score(
    model_rows: Sequence[Mapping], human: Mapping[str, np.ndarray], concepts: Sequence[Concept],
) -> pd.DataFrame:
    """Per-concept metrics of model distributions against one human source.

    Parameters
    ----------
    model_rows : sequence of Mapping
        Rows of `evaluation.runs.model_distributions`: ``run, model, concept, style, cfg,
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
        (>= 0), dominant bins (``color_index``), ``dca`` 1.0 if the dominant bins agree else
        0.0, and ``delta_hue`` in degrees [0, 180] (NaN when a dominant bin is achromatic).
    """
    by_key = {c.key: c for c in concepts}
    rows = [r for r in model_rows if r["p"] is not None and r["concept"] in human]
    unknown = sorted({r["concept"] for r in rows} - set(by_key))
    if unknown:
        raise ValueError(f"`model_rows` name concepts missing from `concepts`: {unknown[:5]}")
    if not rows:
        return pd.DataFrame(columns=LONG_COLUMNS)
    table = pd.DataFrame({
        "run": [r["run"] for r in rows], "model": [r["model"] for r in rows],
        "concept": [r["concept"] for r in rows], "base": [by_key[r["concept"]].base for r in rows],
        "modifier_type": [by_key[r["concept"]].modifier_type for r in rows],
        "style": [r["style"] for r in rows], "cfg": [float(r["cfg"]) for r in rows],
        "n_images": [r["n_images"] for r in rows], "n_excluded": [r["n_excluded"] for r in rows],
    })
    computed = _concept_metrics(np.stack([human[r["concept"]] for r in rows]), np.stack([r["p"] for r in rows]))
    for name, values in computed.items():
        table[name] = values
    return table[LONG_COLUMNS]


def _layout(long: pd.DataFrame, labels: Mapping[str, str], cfg: float | None) -> pd.DataFrame:
    if cfg is not None:
        long = long[np.isclose(long["cfg"], cfg)]
    # Mean over the cfg scales of each concept first, so every concept weighs the same.
    per_concept = long.groupby(["model", "modifier_type", "style", "concept"])[list(labels)].mean()
    means = per_concept.groupby(["model", "modifier_type", "style"]).mean()
    wide = means.unstack(["modifier_type", "style"])
    wide.columns = wide.columns.reorder_levels([1, 2, 0])
    order = [(TYPE_LABELS[t], STYLE_LABELS[s], labels[m]) for t in TYPE_LABELS for s in STYLE_LABELS for m in labels]
    wide.columns = pd.MultiIndex.from_tuples(
        [(TYPE_LABELS[t], STYLE_LABELS[s], labels[m]) for t, s, m in wide.columns], names=["type", "style", "metric"]
    )
    return wide.reindex(columns=pd.MultiIndex.from_tuples(order, names=["type", "style", "metric"]))


def table1(long: pd.DataFrame, *, cfg: float | None = None) -> pd.DataFrame:
    """Table 1 layout: mean PCC, EMD, ED per model by concept type x style.

    Parameters
    ----------
    long : pandas.DataFrame
        The output of `score`.
    cfg : float, optional
        Keep one guidance scale. By default each concept's metrics are first averaged over
        all scales (the paper pools its CFG sweep without saying how).

    Returns
    -------
    pandas.DataFrame
        Index: model. Columns: (type, style, metric), type in Original / Visual state /
        Emotional, style in Natural / Clipart; NaN where a cell has no concept.
    """
    return _layout(long, TABLE1_METRICS, cfg)


def table2(long: pd.DataFrame, *, cfg: float | None = None) -> pd.DataFrame:
    """Table 2 layout: DCA (fraction of concepts whose dominant bins agree) and mean ΔHue.

    ΔHue averages over the concepts whose two dominant bins are both chromatic (a hue is
    undefined for the six achromatic UW-71 colors). Parameters as `table1`.
    """
    return _layout(long, TABLE2_METRICS, cfg)


def format_table(table: pd.DataFrame, *, digits: int = 3) -> str:
    """A plain-text rendering of a `table1` / `table2` frame (three header rows) for the terminal."""
    return table.to_string(float_format=lambda v: f"{v:.{digits}f}", na_rep="-")
