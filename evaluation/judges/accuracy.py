"""Run a judge over probe items and score it: pair-wise accuracy, plain accuracy, splits.

Each probe is a pair of tuples sharing one image: (image, matching description) and
(image, foil). A judge is right on the pair when it accepts the match *and* rejects the
foil (the Rainbow paper's **pair-wise accuracy**; four outcomes per pair, so chance is 0.25
for two independent yes/no decisions). **Plain accuracy** counts the tuples: the mean of
"match accepted" and "foil rejected" over all pairs. A contrastive judge only ranks: a pair
is right when the match outscores the foil, and its two tuples count as accepted / rejected
when it is (a tie is wrong: the match counts as not accepted, the foil as rejected).

Pairs frame (`PAIR_COLUMNS`), one row per (judge, item, foil):
``judge, item_id, source, kind, true_term, foil_term, relation, match, foil,
match_accepted, foil_rejected, pair_correct, match_score, foil_score``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from evaluation.color.naming import BASIC_TERMS
from evaluation.color.wheel import relation
from evaluation.judges.probes import ProbeItem
from storage.shown import shown

PAIR_COLUMNS = (
    "judge",
    "item_id",
    "source",
    "kind",
    "true_term",
    "foil_term",
    "relation",
    "match",
    "foil",
    "match_accepted",
    "foil_rejected",
    "pair_correct",
    "match_score",
    "foil_score",
)
#: Rows of `summary`: all pairs, each foil kind, and the replacement pairs by color relation.
SPLITS = ("all", "replacement", "swap", "adjacent", "complementary", "other")
SUMMARY_COLUMNS = ("judge", "split", "pairs", "pairwise_accuracy", "pairwise_macro", "accuracy", "chance")


def run_audit(
    judge, items: Sequence[ProbeItem], *, progress: Callable[[int, int], None] | None = None
) -> pd.DataFrame:
    """The pairs frame of `judge` on `items` (see the module docstring).

    Parameters
    ----------
    judge : callable
        ``judge(item, texts) -> evaluation.judges.judges.Verdicts`` with a ``name``.
    items : sequence of ProbeItem
    progress : callable, optional
        Called as ``progress(done, total)`` after each item.

    Raises
    ------
    ValueError
        If `items` is empty or a judge returns the wrong number of verdicts.
    """
    if len(items) == 0:
        raise ValueError("`items` is empty")
    rows = []
    for done, item in enumerate(items, start=1):
        texts = [item.description, *(f.text for f in item.foils)]
        verdicts = judge(item, texts)
        if len(verdicts.scores) != len(texts):
            raise ValueError(
                f"judge {judge.name!r} gave {len(verdicts.scores)} verdicts for {len(texts)} texts"
            )
        rows += _pairs(judge.name, item, verdicts)
        if progress is not None:
            progress(done, len(items))
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def _pairs(name: str, item: ProbeItem, verdicts) -> list[dict]:
    rows = []
    for j, foil in enumerate(item.foils, start=1):
        match_score, foil_score = float(verdicts.scores[0]), float(verdicts.scores[j])
        if verdicts.accepted is None:
            match_accepted = foil_rejected = match_score > foil_score
        else:
            match_accepted, foil_rejected = bool(verdicts.accepted[0]), not bool(verdicts.accepted[j])
        rows.append(
            {
                "judge": name,
                "item_id": item.item_id,
                "source": item.source,
                "kind": foil.kind,
                "true_term": foil.true_term,
                "foil_term": foil.foil_term,
                "relation": relation(foil.true_term, foil.foil_term),
                "match": item.description,
                "foil": foil.text,
                "match_accepted": match_accepted,
                "foil_rejected": foil_rejected,
                "pair_correct": match_accepted and foil_rejected,
                "match_score": match_score,
                "foil_score": foil_score,
            }
        )
    return rows


def pairwise_accuracy(pairs: pd.DataFrame) -> float:
    """Share of pairs whose match is accepted and foil rejected (NaN without pairs)."""
    return float(pairs["pair_correct"].mean()) if len(pairs) else float("nan")


def accuracy(pairs: pd.DataFrame) -> float:
    """Share of right tuples: the mean of ``match_accepted`` and ``foil_rejected``."""
    if not len(pairs):
        return float("nan")
    return float((pairs["match_accepted"].astype(float) + pairs["foil_rejected"].astype(float)).mean() / 2)


def _split(pairs: pd.DataFrame, split: str) -> pd.DataFrame:
    if split == "all":
        return pairs
    if split in ("replacement", "swap"):
        return pairs[pairs["kind"] == split]
    return pairs[(pairs["kind"] == "replacement") & (pairs["relation"] == split)]


def summary(pairs: pd.DataFrame, chance: dict[str, float] | None = None) -> pd.DataFrame:
    """Accuracy per judge and split (`SPLITS`).

    Parameters
    ----------
    pairs : pandas.DataFrame
        Pairs frames of `run_audit`, one or several judges concatenated.
    chance : dict, optional
        Judge name -> its chance pair-wise accuracy (``judge.chance``); NaN where absent.

    Returns
    -------
    pandas.DataFrame
        Columns `SUMMARY_COLUMNS`; ``pairwise_macro`` is the mean over (true term, foil
        term) cells of their pair-wise accuracy, as the paper macro-averages over color
        pairs. Splits without pairs are left out.
    """
    rows = []
    for judge, part in pairs.groupby("judge", sort=False):
        for split in SPLITS:
            chosen = _split(part, split)
            if not len(chosen):
                continue
            macro = chosen.groupby(["true_term", "foil_term"])["pair_correct"].mean().mean()
            rows.append(
                {
                    "judge": judge,
                    "split": split,
                    "pairs": len(chosen),
                    "pairwise_accuracy": pairwise_accuracy(chosen),
                    "pairwise_macro": float(macro),
                    "accuracy": accuracy(chosen),
                    "chance": (chance or {}).get(judge, float("nan")),
                }
            )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def failure_matrix(pairs: pd.DataFrame, *, kind: str = "replacement") -> pd.DataFrame:
    """Where a judge fails: 1 - pair-wise accuracy per (true term, foil term).

    Parameters
    ----------
    pairs : pandas.DataFrame
        One judge's pairs frame.
    kind : str
        ``"replacement"``, ``"swap"`` or ``"all"``.

    Returns
    -------
    pandas.DataFrame
        11 x 11, index ``true_term`` and columns ``foil_term`` in `BASIC_TERMS` order;
        NaN where there are no pairs (the diagonal always).
    """
    if kind not in ("replacement", "swap", "all"):
        raise ValueError(f"`kind` must be 'replacement', 'swap' or 'all', got {shown(kind)}")
    if pairs["judge"].nunique() > 1:
        raise ValueError(f"`pairs` must hold one judge, got {sorted(pairs['judge'].unique())}")
    chosen = pairs if kind == "all" else pairs[pairs["kind"] == kind]
    failures = 1.0 - chosen.groupby(["true_term", "foil_term"])["pair_correct"].mean()
    matrix = failures.unstack("foil_term").reindex(index=list(BASIC_TERMS), columns=list(BASIC_TERMS))
    matrix.index.name, matrix.columns.name = "true_term", "foil_term"
    return matrix.astype(np.float64)
