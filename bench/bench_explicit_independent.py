"""Explicit-color scores on renders the scorer was not tuned to: Mitsuba 3 product shots.

The renders (``bench/independent_renders/``, its README says how and by whom they were made)
come from another project's released renderer, Mitsuba 3.9.1 (path tracing, BSD-3), set up
by a helper who never saw the scorer, its rules or its earlier validation data, with every
scene choice written down before the set was rendered and none changed after. No score
was computed until the set was final; nothing in the scorer was changed after.

Run: ``python -m bench.bench_explicit_independent [--write]``; ``--write`` puts the tables
between the ``<!-- bench:explicit-independent -->`` markers of BENCHMARKS.md
(:func:`bench` gives ``python -m bench`` its rows and that section).

Scoring is that of :mod:`bench.bench_explicit_validation` (:func:`score_renders`): each
render under every rule set against its own candidate set (``correct``), against the
candidate sets of ``FOREIGN`` foreign colors (``false passes``) and against the nearest
foreign color.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from bench.bench_explicit_validation import (
    SYSTEM_NAMES,
    SYSTEMS,
    _wide,
    level_table,
    rates,
    report,
    score_renders,
)
from evaluation.explicit.rules import DEFAULT_SCORING, SCORINGS

FOLDER = Path(__file__).resolve().parent / "independent_renders"
SEED = 2026
#: The conditions that each get a per-level table (columns of ``renders.csv``, and `load`'s
#: ``fill``: a fill light or none, and ``sweep``: a grey or a colored paper behind the object).
AXES = ("shape", "material", "key", "env", "key_share", "fill", "sweep", "jpeg_quality")
GREY_SWEEPS = ("#505050", "#808080", "#b4b4b4")


@dataclass(frozen=True)
class Render:
    """One render as :func:`bench.bench_explicit_validation.score_renders` reads it."""

    image: np.ndarray
    mask: np.ndarray
    shape: str
    conditions: SimpleNamespace


def load(folder: Path = FOLDER) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The set's table and arrays.

    Returns
    -------
    table : pandas.DataFrame
        One row per render (``renders.csv``).
    images : numpy.ndarray
        ``(N, H, W, 3)`` uint8 sRGB.
    masks : numpy.ndarray
        ``(N, H, W)`` bool, the object's pixels.
    """
    table = pd.read_csv(folder / "renders.csv", keep_default_na=False)
    table["fill"] = np.where(table["fill_ratio"] > 0, "fill", "none")
    table["sweep"] = np.where(table["floor"].isin(GREY_SWEEPS), "grey", "colored")
    with np.load(folder / "renders.npz") as arrays:
        images, masks = arrays["images"], arrays["masks"]
    if not (len(table) == len(images) == len(masks)):
        raise ValueError(f"{folder}: {len(table)} rows, {len(images)} images, {len(masks)} masks")
    return table, images, masks


def _conditions(row: pd.Series, axes: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(
        **{axis: row[axis] for axis in axes if axis != "shape"}, exposure=row["exposure_stops"]
    )


def run(subset: str = "main", step: int = 1, folder: Path = FOLDER) -> pd.DataFrame:
    """Score one subset (``main`` or ``exposure``) of the set; ``step`` takes every n-th render.

    Returns
    -------
    pandas.DataFrame
        :func:`bench.bench_explicit_validation.score_renders`'s columns, one row per
        (render, rule set).
    """
    table, images, masks = load(folder)
    axes = tuple(a for a in AXES if a in table.columns)
    frames = []
    for key in SYSTEMS:
        rows = table[(table["set"] == subset) & (table["system"] == key)].iloc[::step]
        rng = np.random.default_rng([SEED, SYSTEMS.index(key), subset == "exposure"])
        renders = (
            (int(r["color_row"]), Render(images[i], masks[i], str(r["shape"]), _conditions(r, axes)))
            for i, r in rows.iterrows()
        )
        frames.append(score_renders(key, renders, rng=rng))
    return pd.concat(frames, ignore_index=True)


def markdown(main: pd.DataFrame, exposure: pd.DataFrame) -> str:
    """The tables for BENCHMARKS.md and docs/explicit.md."""
    head = rates(main, ["system"])
    head = head.assign(system=head["system"].map(SYSTEM_NAMES))
    counts = head.groupby("system", sort=False)["renders"].first()
    near = head.assign(cell=head["nearest"].map("{:.1%}".format))
    near = near.pivot(index="system", columns="scoring", values="cell")[list(SCORINGS)]
    lines = [
        "Main set (metered as the set's README says; other conditions drawn per render). Each cell: "
        "correct / false passes against a foreign color / passes against the nearest foreign color.",
        "",
        "| system | renders | " + " | ".join(f"`{s}`" for s in SCORINGS) + " |",
        "|---|---:|" + "---:|" * len(SCORINGS),
    ]
    for _, r in _wide(head, ["system"]).iterrows():
        cells = [f"{r[s]} / {near.loc[r['system'], s]}" for s in SCORINGS]
        lines.append(f"| {r['system']} | {counts[r['system']]} | " + " | ".join(cells) + " |")
    lines += ["", "Per condition (all three systems pooled; correct / false passes):", ""]
    lines += level_table(main, [a for a in AXES if a in main.columns], "condition")
    lines += ["", "Exposure set (the metering shifted; other conditions drawn; correct / false passes):", ""]
    lines += level_table(exposure, ["exposure"])
    return "\n".join(lines)


def bench(quick: bool, row: type) -> tuple[list, dict[str, str]]:
    """For ``python -m bench``: one summary row per color system (the default rule set's
    correct / false passes on the main set) and the section of :func:`markdown`."""
    step = 6 if quick else 1
    main = run("main", step)
    head = rates(main, ["system"])
    rows = [
        row(
            "explicit-independent",
            f"Default rules ({DEFAULT_SCORING}) on Mitsuba renders, {SYSTEM_NAMES[r.system]}: correct / false passes",
            f"{r.correct:.1%} / {r.false:.1%}",
            f"{r.renders} path-traced product shots made apart from the scorer (bench/independent_renders)",
        )
        for r in head[head["scoring"] == DEFAULT_SCORING].itertuples()
    ]
    return rows, {"explicit-independent": markdown(main, run("exposure", step))}


def main() -> None:
    def tables(quick: bool) -> str:
        step = 6 if quick else 1
        return markdown(run("main", step), run("exposure", step))

    report("explicit-independent", tables, __doc__)


if __name__ == "__main__":
    main()
