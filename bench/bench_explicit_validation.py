"""Explicit-color scores on a held-out seed of the validation renders (issue 27): not independent data.

The scorer's bands were chosen on seed 1 of the same generator (written apart from the
scorer, this project's own). Renders made by another renderer, apart from the scorer, are
scored by :mod:`bench.bench_explicit_independent` (far lower).

Run: ``python -m bench.bench_explicit_validation [--quick] [--write]``; ``--write`` puts the
tables between the ``<!-- bench:explicit-validation -->`` markers of BENCHMARKS.md
(:func:`bench` gives ``python -m bench`` its rows and that section).

Renders: :mod:`evaluation.explicit.validation_renders`, every color of ISCC-NBS L2, L3 and
CSS3/X11 on each of its five shapes, 96 px. Two sets, both drawn with seed 27 (the default
rules' percentiles were chosen on seed 1, never on 27):

- *conditions*: the camera metered on the key light (exposure 0); every other axis of
  :data:`~evaluation.explicit.validation_renders.AXES` drawn per render, uniformly over its
  levels, so each level's row averages over the others;
- *exposure*: the same colors, one shape each (in turn), at every exposure level, the other
  axes drawn as above.

Each render is scored under every rule set against its own candidate set (``correct``) and
against the candidate sets of ``FOREIGN`` = 4 colors drawn among those whose candidate set
does not hold it (``false passes``: the share of (render, foreign color) pairs called correct,
i.e. images of color X that pass as color Y). Rules whose dominant color depends on the target
(``released-closest`` looks for it among the pixels; ``paper`` takes the nearer of its two
readings) recompute the dominant color for each foreign target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evaluation.color.colorspace import delta_e_2000
from evaluation.color.systems import load_system
from evaluation.explicit import validation_renders as vr
from evaluation.explicit.candidates import candidate_indices
from evaluation.explicit.dominant import dominant_color, masked_lab
from evaluation.explicit.rules import DEFAULT_SCORING, SCORINGS, get_rules
from evaluation.explicit.scoring import score

SYSTEMS = ("iscc-nbs-l2", "iscc-nbs-l3", "css3")
SYSTEM_NAMES = {"iscc-nbs-l2": "ISCC-NBS L2", "iscc-nbs-l3": "ISCC-NBS L3", "css3": "CSS3/X11"}
FOREIGN = 4
SEED = 27
SIZE = 96
BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def _verdicts(
    lab: np.ndarray, system, own: np.ndarray, foreign: list[np.ndarray], nearest: np.ndarray, scorings
) -> dict:
    """Per rule set: (correct against ``own``, how many ``foreign`` candidate sets passed,
    whether the ``nearest`` foreign candidate set passed)."""
    out = {}
    for name in scorings:
        rules = get_rules(name)
        own_dominant = dominant_color(lab, scoring=rules, target=system.lab[own[0]]).lab
        correct = score(own_dominant, system.lab[own], scoring=rules).correct
        passed = []
        for other in [*foreign, nearest]:
            dominant = own_dominant
            if rules.uses_target:
                dominant = dominant_color(lab, scoring=rules, target=system.lab[other[0]]).lab
            passed.append(score(dominant, system.lab[other], scoring=rules).correct)
        out[name] = (correct, sum(passed[:-1]), passed[-1])
    return out


def score_renders(
    key: str,
    renders: Iterable[tuple[int, vr.ValidationRender]],
    *,
    rng: np.random.Generator,
    rows: Sequence[int] | None = None,
    scorings: Sequence[str] = SCORINGS,
    foreign: int = FOREIGN,
) -> pd.DataFrame:
    """One row per (render, rule set): system, color, shape, the conditions, correct, false passes.

    Besides ``foreign`` random foreign colors, each render is scored against the *nearest*
    foreign color (the color nearest its own in CIEDE2000 whose candidate set does not hold
    it: a lighter or darker sibling, the hardest case).

    Parameters
    ----------
    key : str
        The color system the renders' colors come from.
    renders : iterable of (int, ValidationRender)
        As :func:`evaluation.explicit.validation_renders.validation_set` yields them.
    rng : numpy.random.Generator
        Draws the foreign colors.
    rows : sequence of int, optional
        The system rows the renders' indices refer to (all rows when None).
    scorings : sequence of str
        Rule sets.
    foreign : int
        Foreign colors per render.

    Returns
    -------
    pandas.DataFrame
        Columns ``system, color, shape, <axes...>, scoring, correct, false_passes, foreign,
        nearest_pass``.
    """
    system = load_system(key)
    candidates = [candidate_indices(system, row) for row in range(len(system))]
    records = []
    for index, render in renders:
        row = index if rows is None else rows[index]
        outside = [other for other in range(len(system)) if row not in candidates[other]]
        chosen = [candidates[int(o)] for o in rng.choice(outside, size=foreign, replace=False)]
        nearest = candidates[outside[int(np.argmin(delta_e_2000(system.lab[row], system.lab[outside])))]]
        lab = masked_lab(render.image, render.mask)
        verdicts = _verdicts(lab, system, candidates[row], chosen, nearest, scorings)
        base = {"system": key, "color": system.names[row], "shape": render.shape} | vars(render.conditions)
        for name, (correct, passes, near) in verdicts.items():
            records.append(
                base
                | {
                    "scoring": name,
                    "correct": correct,
                    "false_passes": passes,
                    "foreign": foreign,
                    "nearest_pass": near,
                }
            )
    return pd.DataFrame.from_records(records)


def run(quick: bool = False) -> dict[str, pd.DataFrame]:
    """Score both sets; ``quick`` takes every 6th color. Returns the per-render frames."""
    step = 6 if quick else 1
    conditions, exposure = [], []
    for key in SYSTEMS:
        colors = load_system(key).rgb
        rows = list(range(0, len(colors), step))
        rng = np.random.default_rng([SEED, SYSTEMS.index(key)])
        renders = vr.validation_set(colors[rows], rng=rng, size=SIZE, exposure=0.0)
        conditions.append(score_renders(key, renders, rng=rng, rows=rows))
        sweep = (
            (
                i,
                vr.render(
                    colors[row],
                    vr.SHAPES[i % len(vr.SHAPES)],
                    vr.draw_conditions(rng, exposure=e),
                    size=SIZE,
                    rng=rng,
                ),
            )
            for i, row in enumerate(rows)
            for e in vr.AXES["exposure"]
        )
        exposure.append(score_renders(key, sweep, rng=rng, rows=rows))
    return {
        "conditions": pd.concat(conditions, ignore_index=True),
        "exposure": pd.concat(exposure, ignore_index=True),
    }


def rates(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Renders, share correct, share of false passes (``false``, random foreign colors) and of
    passes against the nearest foreign color (``nearest``) per group of ``by`` and rule set."""
    grouped = frame.groupby(by + ["scoring"], sort=False)
    out = grouped.agg(
        renders=("correct", "size"),
        correct=("correct", "mean"),
        passes=("false_passes", "sum"),
        nearest=("nearest_pass", "mean"),
    )
    out["false"] = out.pop("passes") / (out["renders"] * frame["foreign"].iloc[0])
    return out.reset_index()


def _cell(row) -> str:
    return f"{row['correct']:.1%} / {row['false']:.1%}"


def _wide(table: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    table = table.assign(cell=table.apply(_cell, axis=1))
    return table.pivot(index=index, columns="scoring", values="cell")[list(SCORINGS)].reset_index()


def level_table(frame: pd.DataFrame, axes: list[str], heading: str | None = None) -> list[str]:
    """Markdown lines of a table with one row per level of each of `axes` (pooled over the
    rest): renders and, per rule set, correct / false passes. With a `heading` the axis is a
    column of that name; without, the one axis is numeric (stops) and heads the table."""
    if heading is None:
        [axis] = axes
        lines = [f"| {axis} (stops) | renders | " + " | ".join(f"`{s}`" for s in SCORINGS) + " |"]
        lines += ["|---:|---:|" + "---:|" * len(SCORINGS)]
    else:
        lines = [f"| {heading} | level | renders | " + " | ".join(f"`{s}`" for s in SCORINGS) + " |"]
        lines += ["|---|---|---:|" + "---:|" * len(SCORINGS)]
    for axis in axes:
        table = rates(frame, [axis])
        counts = table.groupby(axis, sort=False)["renders"].first()
        for _, r in _wide(table, [axis]).sort_values(axis).iterrows():
            level = f"{r[axis]:+g}" if heading is None else f"{axis} | {r[axis]}"
            lines.append(f"| {level} | {counts[r[axis]]} | " + " | ".join(r[s] for s in SCORINGS) + " |")
    return lines


def markdown(frames: dict[str, pd.DataFrame]) -> str:
    """The tables for BENCHMARKS.md and docs/explicit.md."""
    cond, exposure = frames["conditions"], frames["exposure"]
    head = rates(cond, ["system"])
    head = head.assign(system=head["system"].map(SYSTEM_NAMES))
    renders = head.groupby("system", sort=False)["renders"].first()
    wide = _wide(head, ["system"])
    lines = [
        "Conditions set (metered on the key light; every other axis drawn per render). Each cell: "
        "correct / false passes against a foreign color.",
        "",
        "| system | renders | " + " | ".join(f"`{s}`" for s in SCORINGS) + " |",
        "|---|---:|" + "---:|" * len(SCORINGS),
    ]
    lines += [
        f"| {r['system']} | {renders[r['system']]} | " + " | ".join(r[s] for s in SCORINGS) + " |"
        for _, r in wide.iterrows()
    ]
    near = head.assign(cell=head["nearest"].map("{:.1%}".format))
    near = near.pivot(index="system", columns="scoring", values="cell")[list(SCORINGS)].reset_index()
    lines += [
        "",
        "Passes against the *nearest* foreign color (the color nearest the render's own, CIEDE2000, "
        "whose candidate set does not hold it: a lighter, darker or duller sibling), per render:",
        "",
        "| system | " + " | ".join(f"`{s}`" for s in SCORINGS) + " |",
        "|---|" + "---:|" * len(SCORINGS),
    ]
    lines += [f"| {r['system']} | " + " | ".join(r[s] for s in SCORINGS) + " |" for _, r in near.iterrows()]
    lines += ["", "Per condition (all three systems pooled):", ""]
    lines += level_table(cond, [a for a in vr.AXES if a != "exposure"], "axis")
    lines += ["", "Exposure set (one shape per color at every level; other axes drawn):", ""]
    lines += level_table(exposure, ["exposure"])
    return "\n".join(lines)


def bench(quick: bool, row: type) -> tuple[list, dict[str, str]]:
    """For ``python -m bench``: summary rows (of type ``row``, its ``Row``) and the section.

    One row per color system: the default rule set's share correct and false passes on the
    conditions set; the section holds every table of :func:`markdown`.
    """
    frames = run(quick)
    head = rates(frames["conditions"], ["system"])
    rows = [
        row(
            "explicit-validation",
            f"Default rules ({DEFAULT_SCORING}) on validation renders, {SYSTEM_NAMES[r.system]}: correct / false passes",
            f"{r.correct:.1%} / {r.false:.1%}",
            f"{r.renders} renders metered on the key light, other conditions drawn, seed {SEED}",
        )
        for r in head[head["scoring"] == DEFAULT_SCORING].itertuples()
    ]
    return rows, {"explicit-validation": markdown(frames)}


def report(name: str, tables: Callable[[bool], str], doc: str) -> None:
    """A deterministic bench's command line: ``--quick`` and ``--write``. Prints the markdown
    `tables` gives (its argument: ``--quick``) with the command, time and load under it, and
    with ``--write`` puts it between the ``<!-- bench:<name> -->`` markers of BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 6th color or render (a smoke run)")
    parser.add_argument("--write", action="store_true", help="rewrite the section of BENCHMARKS.md")
    args = parser.parse_args()
    load, start = os.getloadavg()[0], time.perf_counter()
    body = tables(args.quick)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    module = name.replace("-", "_")
    body += (
        f"\n\n`python -m bench.bench_{module}{' --quick' if args.quick else ''}`, {stamp}, "
        f"{time.perf_counter() - start:.0f} s, load average {load:.1f} at the start (the figures are "
        "deterministic and do not depend on load)."
    )
    print(body)
    if args.write:
        from bench.__main__ import rewrite_section

        text = BENCHMARKS_MD.read_text(encoding="utf-8")
        BENCHMARKS_MD.write_text(rewrite_section(text, name, body), encoding="utf-8")


def main() -> None:
    report("explicit-validation", lambda quick: markdown(run(quick)), __doc__)


if __name__ == "__main__":
    main()
