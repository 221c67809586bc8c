"""The pairwise human-judgment study (paper §4.5, Appendix D): set-up, freeze, votes.

A study asks participants which of two model outputs matches the human ground truth
P_H(x|c) better. Its design (`create_study`):

- **Concepts**: a uniform random sample of `n_concepts` (paper: 150) among the concepts
  that have a ground truth and an output of every chosen model source, drawn with
  ``numpy.random.default_rng(seed)``; the seed is part of the design.
- **Models**: two or more `ModelSource` s (model, run, CFG scale) of one style (paper:
  three models, clipart).
- **Pairs**: every concept x unordered pair of models; each gets ``votes_per_pair``
  votes (paper: 6) from different participants, handed out by `annotation.assignment`
  (kind ``judgment``), which also draws and stores which side is shown on the left.
- **Attention checks**: extra pairs (concept, model, `GROUND_TRUTH`) whose second side
  is the ground truth itself, shown like any candidate (its distribution and colorings).
  There are ``round(rate / (1 - rate) * pairs)`` of them, drawn without replacement over
  (concept, model), so that about `attention_rate` of all trials are checks. A check is
  passed when the participant picks the ground-truth side; each participant meets the
  study's share of them, spread over their trials (`annotation.assignment.checks_due`), and
  a check takes any number of answers (``votes_per_pair`` is the model pairs' quota).
  `votes_frame` marks each
  check and whether it passed; `evaluation.analysis.judgments.participant_flags` flags whoever
  failed one, and the analysis keeps their votes unless asked to leave them out.
- **Content**: what the trials show is copied when the study is set up: per concept
  P_H, its dominant colors with sample counts and up to `COLORINGS_SHOWN` colorings;
  per candidate P_M and up to `IMAGES_SHOWN` images (``study_ground_truths``,
  ``study_candidates``). Later changes to colorings or runs do not change a study.

A draft may still change (`update_study`). `open_study` freezes it: ``studies.frozen``
is set, and from then on the code raises `StudyFrozen` and database triggers refuse any
change to the study, its pairs or its content. The design is kept as JSON in
``studies.meta`` (`study_design`). Trials, votes and exports are in
`annotation.study.judging`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import sqlite_utils

from annotation import assignment
from annotation.errors import Conflict, InvalidInput, NotFound, blank, check_text
from annotation.people.accounts import Actor
from evaluation.models.generation import STYLES as GENERATION_STYLES
from evaluation.pipeline import runs
from storage import audit, insert_row, insert_rows, iso, transaction, update_rows, utcnow
from storage import human as human_rows
from storage.distributions import check_distribution
from storage.settings import read_setting, write_setting
from storage.shown import shown

GROUND_TRUTH = "ground truth"
STYLES = tuple(GENERATION_STYLES)
COLORINGS_SHOWN = 3
IMAGES_SHOWN = 4
DEFAULT_CONCEPTS = 150
DEFAULT_MODELS = 3
DEFAULT_STYLE = "clipart"
DEFAULT_VOTES = 6
# About one trial in ten is an attention check (the paper does not say how many it had).
DEFAULT_ATTENTION_RATE = 0.1
MAX_ATTENTION_RATE = 0.5
MAX_VOTES = 1000
"""The most votes a pair may want: 1e12 was taken, a study that never counts as complete
(outside probe 162); the paper's is 6."""
# 2,700 votes from 36 participants in the paper: 75 each.
DEFAULT_TRIALS_PER_PARTICIPANT = 75


class StudyFrozen(Conflict):
    """The study is open: its design can no longer change."""


@dataclass(frozen=True)
class ModelSource:
    """One model's outputs in a study: `model` at CFG scale `cfg` from run `run`."""

    model: str
    run: str
    cfg: float

    @property
    def key(self) -> str:
        """A stable text form (JSON), e.g. for a form's choice value."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_key(cls, key: str) -> ModelSource:
        """Inverse of `key`; raises `InvalidInput` for anything else."""
        try:
            fields = json.loads(key)
            return cls(str(fields["model"]), str(fields["run"]), float(fields["cfg"]))
        except (TypeError, ValueError, KeyError) as error:
            raise InvalidInput(
                f"`source` must be a model source key such as '{cls('sana', 'run1', 4.5).key}', got {shown(key)}"
            ) from error


@dataclass(frozen=True)
class GroundTruth:
    """What a trial shows of P_H(x|c).

    Attributes
    ----------
    p : ndarray, shape (71,)
        The distribution in UW-71 ``color_index`` order, summing to 1.
    n_colorings : int
        Colorings it rests on (0 for an imported reference set).
    dominant : tuple of (str, int)
        Dominant colors as ``"#rrggbb"`` with their sample counts (colorings), most
        samples first; empty when unknown.
    colorings : tuple of str
        Image paths relative to the data folder of some of its colorings.
    """

    p: np.ndarray
    n_colorings: int
    dominant: tuple[tuple[str, int], ...] = ()
    colorings: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroundTruthSource:
    """A named way to get a concept's ground truth: ``get(db, key) -> GroundTruth | None``."""

    name: str
    get: Callable[[sqlite_utils.Database, str], GroundTruth | None]


def designers_ground_truth(*, min_colorings: int = 1) -> GroundTruthSource:
    """P_H from the designers' colorings, as stored (`storage.human`, source ``designers``).

    Parameters
    ----------
    min_colorings : int
        Concepts with fewer counted colorings have no ground truth here.

    Notes
    -----
    The dominant colors are those of the extraction's visual groups (each group's
    heaviest merged color), counted in colorings, as in the paper's Figure 3.
    """
    _check_whole("min_colorings", min_colorings, 1)

    def get(db, key: str) -> GroundTruth | None:
        human = human_rows.read(db, human_rows.DESIGNERS, [key]).get(key)
        if human is None or human.n_colorings < min_colorings:
            return None
        dominant = tuple(
            ("#{:02x}{:02x}{:02x}".format(*g["rgb"][0]), len(g["image_indices"])) for g in human.groups
        )
        paths = tuple(db["colorings"].get(i)["image_path"] for i in human.coloring_ids)
        return GroundTruth(human.p, human.n_colorings, dominant, paths)

    return GroundTruthSource(human_rows.DESIGNERS, get)


def reference_ground_truth(db: sqlite_utils.Database, label: str) -> GroundTruthSource:
    """P_H from a stored reference set (`storage.human`, kind ``reference``).

    Reference sets have no colorings, so their trials show the distribution only.
    """
    stored = human_rows.vectors(db, label)

    def get(_db, key: str) -> GroundTruth | None:
        return GroundTruth(stored[key], 0) if key in stored else None

    return GroundTruthSource(label, get)


def ground_truth_source(db: sqlite_utils.Database, name: str) -> GroundTruthSource:
    """The `GroundTruthSource` of the human source `name` (one of `storage.human.sources`).

    Raises
    ------
    InvalidInput
        If `name` is not a known source (the message lists them).
    """
    if name == human_rows.DESIGNERS:
        return designers_ground_truth()
    if isinstance(name, str) and name in human_rows.reference_sources(db):
        return reference_ground_truth(db, name)
    raise InvalidInput(f"`ground_truth` must be one of {human_rows.sources(db)}, got {shown(name)}")


def available_sources(
    db: sqlite_utils.Database, style: str, concepts: set[str] | None = None
) -> list[tuple[ModelSource, int]]:
    """Model sources with stored distributions in `style`, and how many concepts each has
    (of `concepts` alone when given: those a ground truth covers).

    In model name order; a model's outputs oldest run first (by the run's creation), then
    by run name and scale.
    """
    _check_choice("style", style, STYLES)
    # Counted in SQL: decoding every stored distribution to count them took seconds at the
    # full study's size.
    among = "" if concepts is None else " and m.concept in (select value from json_each(?))"
    rows = db.execute(
        "select m.model, m.run, m.cfg, count(*) from model_distributions m "
        f"left join runs r on r.name = m.run where m.style = ? and m.p is not null{among} "
        "group by m.model, m.run, m.cfg order by m.model, max(r.created_at), m.run, m.cfg",
        [style] if concepts is None else [style, json.dumps(sorted(concepts))],
    ).fetchall()
    return [(ModelSource(model, run, float(cfg)), n) for model, run, cfg, n in rows]


def create_study(
    db: sqlite_utils.Database,
    name: str,
    sources: Sequence[ModelSource],
    ground_truth: GroundTruthSource,
    *,
    seed: int,
    n_concepts: int = DEFAULT_CONCEPTS,
    style: str = DEFAULT_STYLE,
    votes_per_pair: int = DEFAULT_VOTES,
    attention_rate: float = DEFAULT_ATTENTION_RATE,
    trials_per_participant: int = DEFAULT_TRIALS_PER_PARTICIPANT,
    created_by: str = "admin",
    now: dt.datetime | None = None,
) -> int:
    """Design a draft study and store its pairs and trial content (module docstring).

    Parameters
    ----------
    name : str
        Unique, non-empty.
    sources : sequence of ModelSource
        Two or more, with distinct model names (none called `GROUND_TRUTH`).
    ground_truth : GroundTruthSource
        Where P_H comes from; its name is recorded in the design.
    seed : int
        Seeds the concept sample, the attention checks and the colorings shown.
    n_concepts : int
        Concepts to sample, >= 1 (paper: 150).
    style : {'natural', 'clipart'}
    votes_per_pair : int
        Votes per pair, >= 1 (paper: 6).
    attention_rate : float
        Share of trials that are attention checks, in [0, `MAX_ATTENTION_RATE`].
    trials_per_participant : int
        How many trials one person is asked for (their progress count), >= 1.

    Returns
    -------
    int
        The new study's id.

    Raises
    ------
    InvalidInput
        Bad arguments, or fewer eligible concepts than `n_concepts`.
    Conflict
        A study called `name` exists.
    """
    check_text(name, "name", 200)
    _check_design(name, seed, n_concepts, style, votes_per_pair, attention_rate, trials_per_participant)
    _check_sources(db, sources, style)
    outputs = [_outputs(db, source, style) for source in sources]
    eligible = sorted(set.intersection(*(set(o) for o in outputs)) & _concept_keys(db))
    rng = np.random.default_rng(seed)
    chosen = _sample_with_truth(db, eligible, ground_truth, rng, n_concepts)
    if len(chosen) < n_concepts:
        raise InvalidInput(_too_few_concepts(db, style, sources, ground_truth, eligible, chosen, n_concepts))
    checks = _attention_checks(chosen, [s.model for s in sources], attention_rate, rng)
    design = {
        "name": name,
        "style": style,
        "seed": seed,
        "ground_truth": ground_truth.name,
        "sources": [asdict(s) for s in sources],
        "n_concepts": n_concepts,
        "shared_concepts": len(eligible),
        "concepts": sorted(chosen),
        "votes_per_pair": votes_per_pair,
        "attention_rate": attention_rate,
        "attention_check_pairs": [list(c) for c in checks],
        "trials_per_participant": trials_per_participant,
        "colorings_shown": COLORINGS_SHOWN,
        "images_shown": IMAGES_SHOWN,
        "created_by": created_by,
    }
    with transaction(db):
        if db["studies"].count_where("name = ?", [name]):
            raise Conflict(f"a study called {name!r} exists; choose another name")
        study_id = insert_row(
            db,
            "studies",
            {
                "name": name,
                "votes_per_pair": votes_per_pair,
                "meta": json.dumps(design),
                "created": iso(now),
            },
        )
        _store_content(db, study_id, chosen, sources, outputs, rng)
        _store_pairs(db, study_id, sorted(chosen), [s.model for s in sources], checks)
        audit.record(
            db,
            created_by,
            "create_study",
            "study",
            study_id,
            now=now,
            details={"name": name, "pairs": study_size(db, study_id)},
        )
    return study_id


def _check_design(
    name, seed, n_concepts, style, votes_per_pair, attention_rate, trials_per_participant
) -> None:
    if blank(name):
        raise InvalidInput(f"`name` must be a non-empty text, got {shown(name)}")
    for label, value in (
        ("seed", seed),
        ("n_concepts", n_concepts),
        ("votes_per_pair", votes_per_pair),
        ("trials_per_participant", trials_per_participant),
    ):
        _check_whole(label, value, 0 if label == "seed" else 1)
    _check_votes(votes_per_pair)
    _check_choice("style", style, STYLES)
    if (
        isinstance(attention_rate, bool)
        or not isinstance(attention_rate, (int, float))
        or not 0 <= attention_rate <= MAX_ATTENTION_RATE
    ):
        raise InvalidInput(
            f"`attention_rate` must be a number in [0, {MAX_ATTENTION_RATE}], got {shown(attention_rate)}"
        )


def _check_sources(db: sqlite_utils.Database, sources: Sequence[ModelSource], style: str) -> None:
    """Two or more model outputs of different models; the message says what to do, in words."""
    if not all(isinstance(s, ModelSource) for s in sources):
        raise InvalidInput(f"`sources` must be ModelSource values, got {shown(list(sources))}")
    models = [s.model for s in sources]
    if GROUND_TRUTH in models:
        raise InvalidInput(f"Model outputs (`sources`): no model may be called {GROUND_TRUTH!r}")
    if len(models) >= 2 and len(set(models)) == len(models):
        return
    chosen = ", ".join(models) if models else "none"
    advice = source_advice(db, style)
    raise InvalidInput(
        "Model outputs (`sources`): choose two or more, each from a different model (a study "
        f"compares models); chosen: {chosen}. " + (advice or "Choose one output per model.")
    )


def source_advice(db: sqlite_utils.Database, style: str) -> str:
    """What to do when fewer than two models have outputs in `style`, in words; else ``""``."""
    models = sorted({source.model for source, _ in available_sources(db, style)})
    label = GENERATION_STYLES[style]
    if len(models) >= 2:
        return ""
    if not models:
        return (
            f"No model has {label} outputs yet: run two models on the same concepts on the "
            "Evaluate tab first (offline: tiny-random and tiny-random-b)."
        )
    second = "tiny-random-b" if models[0] != "tiny-random-b" else "tiny-random"
    return (
        f"Only one model ({models[0]}) has {label} outputs: run a second model (e.g. {second}) "
        "on the same concepts on the Evaluate tab first."
    )


def style_with_outputs(db: sqlite_utils.Database, preferred: str) -> str:
    """`preferred` if two or more models have outputs in it, else the style with the most
    models that have outputs (`preferred` when no style does better)."""
    _check_choice("style", preferred, STYLES)
    counts = {style: len({source.model for source, _ in available_sources(db, style)}) for style in STYLES}
    if counts[preferred] >= 2:
        return preferred
    best = max(STYLES, key=lambda style: (counts[style], style == preferred))
    return best if counts[best] > counts[preferred] else preferred


def default_sources(offered: Sequence[tuple[ModelSource, int]], n: int = DEFAULT_MODELS) -> list[ModelSource]:
    """Up to `n` of `offered`, one per model: each model's output with the most concepts.

    Parameters
    ----------
    offered : sequence of (ModelSource, int)
        Outputs and their concept counts in `available_sources` order (a model's runs oldest
        first).
    n : int
        At most this many models, in name order.

    Returns
    -------
    list of ModelSource
        Per model the output covering the most concepts; among equals the newest run, and
        within a run the first scale.
    """
    best: dict[str, tuple[ModelSource, tuple[int, int]]] = {}
    runs_seen: dict[tuple[str, str], int] = {}
    for source, count in offered:
        rank = (count, runs_seen.setdefault((source.model, source.run), len(runs_seen)))
        if source.model not in best or rank > best[source.model][1]:
            best[source.model] = (source, rank)
    return [best[model][0] for model in sorted(best)][:n]


def design_notes(design: dict) -> list[str]:
    """Where a design gives less than was asked for, in words (`study_design` output).

    A participant sees at most the study's pairs, so asking for more trials per participant
    than that gives fewer; the attention-check share is rounded to whole checks, so a small
    study may get none.
    """
    trials = design["pairs"] + design["attention_checks"]
    notes = []
    if design["trials_per_participant"] > trials:
        notes.append(
            f"Each participant sees at most {trials} trials, not the {design['trials_per_participant']} "
            f"asked for: {design['n_concepts']} concepts × {len(design['sources'])} models give "
            f"{design['pairs']} pairs, and no one judges a pair twice. More concepts or models give more."
        )
    if design["attention_rate"] > 0 and design["attention_checks"] == 0:
        notes.append(
            f"No attention check: {design['attention_rate']:.0%} of {design['pairs']} pairs rounds to "
            "none. Raise the attention-check share or the number of concepts to get one."
        )
    return notes


def thin_ground_truths(db: sqlite_utils.Database, study_id: int, colorings: int) -> list[tuple[str, int]]:
    """The concepts of study `study_id` whose designers' ground truth rests on fewer than
    `colorings` colorings, with how many, by concept key; a reference set (no colorings) is
    none of them.

    A coloring waiting for its recolor, or excluded, does not count: an expert's two recolor
    requests left a concept's trials on one coloring, which only the participants' page said
    (outside probe 157). A study's ground truths are stored when it is made."""
    return [
        (row["concept_key"], int(row["n_colorings"]))
        for row in db.query(
            "select concept_key, n_colorings from study_ground_truths where study_id = ? "
            "and n_colorings between 1 and ? order by concept_key",
            [study_id, colorings - 1],
        )
    ]


def _check_whole(label: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidInput(f"`{label}` must be a whole number >= {minimum}, got {shown(value)}")


def _check_votes(votes_per_pair: int) -> None:
    if votes_per_pair > MAX_VOTES:
        raise InvalidInput(f"`votes_per_pair` must be at most {MAX_VOTES}, got {shown(votes_per_pair)}")


def _check_choice(label: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise InvalidInput(f"`{label}` must be one of {allowed}, got {shown(value)}")


def _concept_keys(db) -> set[str]:
    return {row[0] for row in db.execute("select key from concepts")}


def _outputs(db, source: ModelSource, style: str) -> dict[str, dict]:
    """Per concept key: the source's distribution row, with ``images`` (usable, by sample)."""
    rows = {
        r["concept"]: r
        for r in runs.model_distributions(
            db, run=source.run, model=source.model, cfgs={source.model: source.cfg}
        )
        if r["style"] == style and float(r["cfg"]) == source.cfg and r["p"] is not None
    }
    if not rows:
        raise InvalidInput(
            f"Model outputs (`sources`): no {style} distributions stored for model "
            f"{source.model!r} in run {source.run!r} at cfg {source.cfg:g}; press Load choices "
            "to see the outputs there are"
        )
    images: dict[str, list[tuple[int, str]]] = {}
    for item in runs.items(db, source.run, model=source.model, style=style, cfg=source.cfg):
        if item["status"] == "segmented" and item["segment_status"] == "ok" and item["image_path"]:
            images.setdefault(item["concept"], []).append((item["sample"], item["image_path"]))
    for key, row in rows.items():
        row["images"] = [path for _, path in sorted(images.get(key, []))]
    return rows


def _sample_with_truth(
    db, eligible: list[str], ground_truth: GroundTruthSource, rng: np.random.Generator, n: int
) -> dict[str, GroundTruth]:
    """The first `n` concepts of a random order of `eligible` that have a ground truth (all of
    them when fewer have one).

    Equivalent to a uniform sample of those with one, while asking for at most as many
    ground truths as needed.
    """
    chosen: dict[str, GroundTruth] = {}
    for index in rng.permutation(len(eligible)):
        truth = ground_truth.get(db, eligible[index])
        if truth is not None:
            chosen[eligible[index]] = truth
            if len(chosen) == n:
                break
    return chosen


def _too_few_concepts(
    db, style: str, sources: Sequence[ModelSource], ground_truth: GroundTruthSource, eligible, covered, n: int
) -> str:
    """The refusal when only the concepts `covered` of `eligible` have a ground truth, fewer
    than `n`: what would give more, in the tab's words (another ground truth, other outputs)."""
    k = len(covered)
    head = (
        f"Concepts (`n_concepts`): only {k} concepts have a ground truth ({ground_truth.name}) and all "
        f"chosen Model outputs (which share {len(eligible)}); got n_concepts={n}."
    )
    other, more = _best_truth(db, eligible, ground_truth.name)
    hints = [f"Ground truth {other} would give {more}."] if more > k else []
    hints += _larger_outputs_hint(db, style, sources, ground_truth, set(eligible), covered)
    if hints:
        return " ".join([head, *hints]) + (f" Or set Concepts to {k} or fewer." if k else "")
    return (
        f"{head} "
        + (f"Set Concepts to {k} or fewer, or" if k else "Choose another ground truth, or")
        + " evaluate more concepts with these models."
    )


def _larger_outputs_hint(
    db, style: str, sources: Sequence[ModelSource], ground_truth: GroundTruthSource, eligible: set, covered
) -> list[str]:
    """``[hint]`` naming, for each chosen model with an output covering more concepts (per model
    the `default_sources` one), that output and the concepts it would give with `ground_truth`
    and with the best other ground truth; ``[]`` when that gives no more than `covered`."""
    offered = available_sources(db, style)
    counts = dict(offered)
    best = {s.model: s for s in default_sources(offered, len(offered))}
    swap = [best[s.model] if counts[best[s.model]] > counts.get(s, 0) else s for s in sources]
    changed = [new for new, old in zip(swap, sources) if new != old]
    if not changed:
        return []
    shared = _shared_concepts(db, style, swap)
    with_this = sum(
        key in covered if key in eligible else ground_truth.get(db, key) is not None for key in shared
    )
    other, more = _best_truth(db, shared, ground_truth.name)
    if max(with_this, more) <= len(covered):
        return []
    gives = f"{with_this} with {ground_truth.name}" + (
        f", {more} with Ground truth {other}" if more > with_this else ""
    )
    return [f"Model outputs {_output_names(changed, len(sources))} share {len(shared)}: {gives}."]


def _best_truth(db, keys, exclude: str) -> tuple[str | None, int]:
    """The stored human source other than `exclude` covering most of `keys` (ties: the first of
    `storage.human.sources`), and how many it covers; ``(None, 0)`` if there is none."""
    keys = set(keys)
    covers = dict.fromkeys([s for s in human_rows.sources(db) if s != exclude], 0)
    rows = db.execute(
        "select source, concept_key from human_distributions where p is not null "
        "and (source != ? or n_colorings >= 1)",
        [human_rows.DESIGNERS],
    )
    for source, key in rows:
        if source in covers and key in keys:
            covers[source] += 1
    best = max(covers, key=covers.get, default=None)
    return best, covers.get(best, 0)


def _shared_concepts(db, style: str, sources: Sequence[ModelSource]) -> set[str]:
    """The concepts with a stored distribution of every one of `sources` in `style`."""
    sql = "select concept from model_distributions where model = ? and run = ? and cfg = ? and style = ? and p is not null"
    shared = [{row[0] for row in db.execute(sql, [s.model, s.run, s.cfg, style])} for s in sources]
    return set.intersection(*shared) & _concept_keys(db)


def _output_names(changed: Sequence[ModelSource], n_chosen: int) -> str:
    """`changed` as the Model outputs list labels them; "of run R (CFG c)" when they are every
    chosen model's and share a run and scale."""
    if len(changed) == n_chosen and len({(s.run, s.cfg) for s in changed}) == 1:
        return f"of run {changed[0].run} (CFG {changed[0].cfg:g})"
    return " and ".join(f"{s.model} · {s.run} · CFG {s.cfg:g}" for s in changed)


def _attention_checks(
    chosen: dict, models: list[str], rate: float, rng: np.random.Generator
) -> list[tuple[str, str]]:
    n_pairs = len(chosen) * len(models) * (len(models) - 1) // 2
    combos = [(key, model) for key in sorted(chosen) for model in models]
    n_checks = min(len(combos), int(round(rate / (1 - rate) * n_pairs)))
    picked = rng.choice(len(combos), size=n_checks, replace=False)
    return sorted(combos[i] for i in picked)


def _store_content(
    db,
    study_id: int,
    chosen: dict[str, GroundTruth],
    sources: Sequence[ModelSource],
    outputs: list[dict],
    rng,
) -> None:
    for key in sorted(chosen):
        truth = chosen[key]
        shown = [truth.colorings[i] for i in sorted(rng.permutation(len(truth.colorings))[:COLORINGS_SHOWN])]
        insert_row(
            db,
            "study_ground_truths",
            {
                "study_id": study_id,
                "concept_key": key,
                "p": _p_json(truth.p, key),
                "n_colorings": int(truth.n_colorings),
                "dominant": json.dumps([[h, int(n)] for h, n in truth.dominant]),
                "colorings": json.dumps(shown),
                "source": json.dumps({"all": len(truth.colorings)}),
            },
        )
        for source, rows in zip(sources, outputs):
            row = rows[key]
            insert_row(
                db,
                "study_candidates",
                {
                    "study_id": study_id,
                    "concept_key": key,
                    "model": source.model,
                    "p": _p_json(row["p"], f"{source.model}/{key}"),
                    "n_images": row["n_images"],
                    "images": json.dumps(row["images"][:IMAGES_SHOWN]),
                    "source": json.dumps(asdict(source)),
                },
            )


def _p_json(p, what: str) -> str:
    try:
        return json.dumps(check_distribution(p, f"the distribution of {what}").tolist())
    except ValueError as error:
        raise InvalidInput(str(error)) from None


def _store_pairs(
    db, study_id: int, keys: list[str], models: list[str], checks: list[tuple[str, str]]
) -> None:
    rows = [
        {
            "study_id": study_id,
            "concept_key": key,
            "a": a,
            "b": b,
            "meta": json.dumps({"attention_check": False}),
        }
        for key in keys
        for a, b in itertools.combinations(sorted(models), 2)
    ]
    rows += [
        {
            "study_id": study_id,
            "concept_key": key,
            "a": model,
            "b": GROUND_TRUTH,
            "meta": json.dumps({"attention_check": True}),
        }
        for key, model in checks
    ]
    insert_rows(db, "study_pairs", rows)


def study_size(db: sqlite_utils.Database, study_id: int) -> dict[str, int]:
    """``{"pairs": study pairs, "attention_checks": check pairs}`` of a study."""
    row = db.execute(
        "select sum(b != ?), sum(b = ?) from study_pairs where study_id = ?",
        [GROUND_TRUTH, GROUND_TRUTH, study_id],
    ).fetchone()
    return {"pairs": row[0] or 0, "attention_checks": row[1] or 0}


def get_study(db: sqlite_utils.Database, study_id: int) -> dict:
    """The ``studies`` row of `study_id`; raises `NotFound`."""
    rows = list(db["studies"].rows_where("id = ?", [study_id]))
    if not rows:
        raise NotFound(f"unknown study id {study_id!r}")
    return rows[0]


def study_design(db: sqlite_utils.Database, study_id: int) -> dict:
    """The design as recorded (JSON-able), with ``id``, ``created``, ``frozen`` and sizes.

    ``shared_concepts`` counts the concepts every chosen model output has; ``concepts`` were
    drawn from those of them with a ground truth (designs stored before the field was named so
    called it ``eligible_concepts``).
    """
    study = get_study(db, study_id)
    meta = json.loads(study["meta"])
    if "eligible_concepts" in meta:
        meta["shared_concepts"] = meta.pop("eligible_concepts")
    return {
        "id": study["id"],
        **meta,
        "created": study["created"],
        "frozen": study["frozen"],
        **study_size(db, study_id),
    }


def update_study(
    db: sqlite_utils.Database,
    study_id: int,
    actor: Actor,
    *,
    votes_per_pair: int | None = None,
    trials_per_participant: int | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """Change a draft's votes per pair or trials per participant; returns the design.

    Raises
    ------
    StudyFrozen
        If the study is open.
    """
    changes = {
        k: v
        for k, v in (("votes_per_pair", votes_per_pair), ("trials_per_participant", trials_per_participant))
        if v is not None
    }
    for label, value in changes.items():
        _check_whole(label, value, 1)
    if votes_per_pair is not None:
        _check_votes(votes_per_pair)
    with transaction(db):
        study = _draft(db, study_id)
        design = {**json.loads(study["meta"]), **changes}
        update_rows(
            db,
            "studies",
            {"id": study_id},
            {"meta": json.dumps(design), "votes_per_pair": design["votes_per_pair"]},
        )
        audit.record(db, actor.pseudonym, "update_study", "study", study_id, details=changes, now=now)
    return study_design(db, study_id)


def open_study(
    db: sqlite_utils.Database, study_id: int, actor: Actor, *, now: dt.datetime | None = None
) -> dict:
    """Freeze the study's design and hand its pairs out; returns the design.

    Raises
    ------
    StudyFrozen
        If it is open already.
    """
    with transaction(db):
        study = _draft(db, study_id)
        # A draft named by a withdrawal went live on the withdrawn colorings, unsaid to the
        # researcher who opened it (outside probe 223).
        if withdrawn := _withdrawn_since_made(db, study):
            raise Conflict(
                f"study {study['name']!r} was made from the designers' colorings, and {withdrawn} of the "
                "colorings its ground truth counts were withdrawn since (their designers asked): make the "
                "draft again, which leaves them out; nothing was opened"
            )
        update_rows(db, "studies", {"id": study_id}, {"frozen": iso(now)})
        audit.record(db, actor.pseudonym, "open_study", "study", study_id, now=now)
    return study_design(db, study_id)


# A coloring `c` that the designers' ground truth of study `s` counted when the study was made:
# stored before it and not withdrawn by then (a study keeps the ground truth it was made with).
# Parameter: ``:designers`` (`storage.human.DESIGNERS`).
_COUNTED_WHEN_MADE = (
    "c.practice = 0 and c.created <= s.created and json_extract(s.meta, '$.ground_truth') = :designers "
    "and c.concept_key in (select g.concept_key from study_ground_truths g where g.study_id = s.id and "
    "g.n_colorings > 0) and not exists (select 1 from audit a where a.action = 'withdraw_colorings' and "
    "a.object_type = 'annotator' and a.object_id = cast(c.annotator_id as text) and a.created <= s.created)"
)


def _withdrawn_since_made(db, study: dict) -> int:
    """How many colorings the designers' ground truth of draft `study` counted when it was
    made (`_COUNTED_WHEN_MADE`) that were withdrawn after it was made."""
    (count,) = db.execute(
        f"select count(*) from studies s join colorings c on {_COUNTED_WHEN_MADE} where s.id = :study and "
        "c.status = 'withdrawn' and exists (select 1 from audit a where a.action = 'withdraw_colorings' "
        "and a.object_type = 'annotator' and a.object_id = cast(c.annotator_id as text) and a.created > s.created)",
        {"designers": human_rows.DESIGNERS, "study": study["id"]},
    ).fetchone()
    return count


def close_study(
    db: sqlite_utils.Database, study_id: int, actor: Actor, why: str, *, now: dt.datetime | None = None
) -> int:
    """Close an open study: nobody is handed its trials any more; its judgments stay and are
    analysed as before. Returns how many trials held by participants were released.

    An invited participant judges every open study (`annotation.assignment.JUDGED_STUDIES`),
    so without this a finished study (the README's first five minutes) stayed in every later
    participant's queue (outside probe 127). Its open study links close with it, and the
    people of its links still judging end as ``study_closed`` (`annotation.study.crowd`). The time
    and `why` go into the setting `annotation.assignment.CLOSED_STUDIES` (a frozen study's
    row takes no change) and the audit trail.

    Raises
    ------
    NotFound
        An unknown study.
    Conflict
        A draft (nothing was handed out: it needs no closing), or a study closed already.
    """
    check_text(why, "why")
    if blank(why):  # spaces were taken; a closing is for good
        raise InvalidInput(
            "`why` must say why the study is closed (it goes to the audit log); got "
            + ("only spaces" if why else "nothing")
        )
    now = utcnow() if now is None else now
    with transaction(db):
        study = get_study(db, study_id)
        if not study["frozen"]:
            raise Conflict(f"study {study_id} is a draft: nobody judges it, so there is nothing to close")
        closed = closed_studies(db)
        if str(study_id) in closed:
            raise Conflict(
                f"study {study_id} was closed on {closed[str(study_id)]['closed'][:16]} UTC already; nothing changed"
            )
        closed[str(study_id)] = {"closed": iso(now), "why": why}
        write_setting(db, assignment.CLOSED_STUDIES, json.dumps(closed, sort_keys=True))
        pairs = [r["id"] for r in db["study_pairs"].rows_where("study_id = ?", [study_id], select="id")]
        released = update_rows(
            db,
            "tasks",
            {"kind": "judgment", "status": "reserved", "pair_id in": pairs},
            {"status": "released", "finished": iso(now)},
        )
        links = update_rows(db, "crowd_links", {"study_id": study_id, "closed": None}, {"closed": iso(now)})
        # Its link people still judging end here: they stayed `active`, their minutes ran on in
        # the payments, and at their deadline they read as `timed_out` (outside probe 138).
        link_ids = [r["id"] for r in db["crowd_links"].rows_where("study_id = ?", [study_id], select="id")]
        ended = update_rows(
            db,
            "crowd_participants",
            {"status": "active", "link_id in": link_ids},
            {"status": "study_closed", "finished": iso(now)},
        )
        audit.record(
            db,
            actor.pseudonym,
            "close_study",
            "study",
            study_id,
            why,
            details={"released_trials": released, "closed_links": links, "ended_link_people": ended},
            now=now,
        )
    return released


def studies_holding(db: sqlite_utils.Database, coloring_ids: Sequence[int]) -> list[dict]:
    """The studies, not closed, whose ground truth was made from the designers' colorings
    while any of `coloring_ids` counted in it (`_COUNTED_WHEN_MADE`): a study keeps the ground
    truth it was made with (a withdrawal left one open study on withdrawn colorings, unsaid:
    outside probe 221). ``id``, ``name`` and ``frozen`` of each, by id."""
    if not coloring_ids:
        return []
    closed = closed_studies(db)
    ids = {f"c{i}": coloring for i, coloring in enumerate(coloring_ids)}
    rows = db.execute(
        "select s.id, s.name, s.frozen from studies s where exists (select 1 from colorings c where "
        f"{_COUNTED_WHEN_MADE} and c.id in ({', '.join(':' + key for key in ids)})) order by s.id",
        {"designers": human_rows.DESIGNERS, **ids},
    ).fetchall()
    return [{"id": i, "name": name, "frozen": frozen} for i, name, frozen in rows if str(i) not in closed]


def closed_studies(db: sqlite_utils.Database) -> dict[str, dict]:
    """``{"<study id>": {"closed": time, "why": text}}`` of every closed study (`close_study`)."""
    return json.loads(read_setting(db, assignment.CLOSED_STUDIES) or "{}")


def _draft(db, study_id: int) -> dict:
    study = get_study(db, study_id)
    if closed := closed_studies(db).get(str(study_id)):
        # It was told only as "opened ... frozen": nothing said that it was closed, for good.
        raise StudyFrozen(
            f"study {study['name']!r} was opened on {study['frozen'][:16]} UTC and closed on "
            f"{closed['closed'][:16]} UTC (`close-study`); a closed study is not opened again: set up a "
            "new study to run its design"
        )
    if study["frozen"]:
        raise StudyFrozen(
            f"study {study['name']!r} was opened on {study['frozen'][:16]} UTC "
            "and its design is frozen; set up a new study to change it"
        )
    return study


def list_studies(db: sqlite_utils.Database) -> list[dict]:
    """Every study with its progress: study pairs and attention checks, votes wanted and
    given and complete pairs, all over the study pairs alone (an answer to an attention check
    is not a vote: docs/research.md), how many people took part, and when it was closed
    (``closed``; None while open or a draft, `close_study`)."""
    closed = closed_studies(db)
    return [
        {**row, "closed": closed.get(str(row["id"]), {}).get("closed")}
        for row in db.query(
            "select s.id, s.name, s.created, s.frozen, s.votes_per_pair, "
            "coalesce(sum(p.b != :truth), 0) as pairs, coalesce(sum(p.b = :truth), 0) as attention_checks, "
            "coalesce(sum(p.b != :truth), 0) * s.votes_per_pair as votes_wanted, "
            "coalesce(sum(case when p.b != :truth then v.n end), 0) as votes, "
            "coalesce(sum(p.b != :truth and v.n >= s.votes_per_pair), 0) as complete_pairs, "
            "(select count(distinct j.participant_id) from judgments j join "
            "study_pairs q on q.id = j.pair_id where q.study_id = s.id) as participants "
            "from studies s left join study_pairs p on p.study_id = s.id left join "
            "(select pair_id, count(*) as n from judgments group by pair_id) v on v.pair_id = p.id "
            "group by s.id order by s.id",
            {"truth": GROUND_TRUTH},
        )
    ]
