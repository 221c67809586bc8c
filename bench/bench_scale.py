"""The research views at the size of a real study, built through the library's own functions.

At fraction f of the paper's study: round(1,278 f) concepts × 5 accepted colorings
(1024² PNG images with masks, stored by `annotation.coloring.store.store_coloring` and
accepted by `annotation.qc.review.accept_coloring`, so the stored P_H is refreshed the
way the app does it); 3 models × 2 styles × 7 CFG scales of model distributions over
those concepts (`evaluation.pipeline.runs`); three experts' blind votes on each coloring of the
most disputed concepts (Eq. 6; about 562 colorings, at most half of all, each review then
complete; the rest left open);
a pairwise study of min(150, concepts) concepts (`annotation.study.design`) with 6 votes per
pair from participants (`annotation.study.judging`). Then it times, on that database:

- ``browser_s``: the Concept browser for one concept (`concept_view`);
- ``scoring_s``: scoring every model distribution against every human source once
  (`evaluation.pipeline.scoring.score_every_source`), which an evaluation job does when its
  extraction ends; not a view, but what makes the views below a query;
- ``leaderboards_first_s``: what the Leaderboards page shows at once after a distribution
  changed, with nothing kept (`LeaderboardCache.first_look`: Tables 1-2, the CFG sweep and the
  sensitivity tables as point estimates against the designers' stored P_H);
  ``leaderboards_intervals_s``: the page's second step, which draws their bootstrap intervals;
- ``leaderboards_changed_s``: the same view in one call (`leaderboard_analyses`, as the API
  and the CLI get it), computed afresh, as a view after a change sees it when it comes
  before the app's background refresh (`annotation.research.views.keep_leaderboards_fresh`);
  ``leaderboards_s``: the same view again (kept until a distribution changes, and brought
  up to date in the background once a change has settled);
- ``agreement_s``: the QC agreement panel (`votes.agreement_panel`);
- ``queue_s``: opening the blind vote queue for every concept (`open_review_queue`
  with ``top_fraction=1``: Eq. 6 of every concept, SCD plausibility of every coloring,
  scored in batches by `annotation.qc.plausibility`), after the votes: every coloring
  but the voted ones gets its review;
- ``study_setup_s``: setting up a 150-concept study (`create_study`);
- ``export_s``: a full export (`annotation.export.export`: CSV + Parquet of every table,
  images zip with manifest). Not a view: the Admin tab builds it in the background
  (`annotation.export.BackgroundExport`; *Build export* returns at once and the page
  polls for the zip).

    python -m bench.bench_scale [--fractions 0.1,0.5,1.0] [--side 1024] [--keep DIR]

With ``--keep DIR`` each study stays in ``DIR/<fraction>/data`` to open in the app (a
full-size rehearsal of the views; its people are the bench's, and it has no admin password
until one is set).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import numpy as np

from annotation.coloring.store import store_coloring
from annotation.concepts import sync_concepts
from annotation.export import export
from annotation.people.accounts import Actor, create_annotators
from annotation.qc import review, votes
from annotation.research.views import LeaderboardCache, concept_view, leaderboard_analyses
from annotation.study import design as study
from annotation.study import judging
from evaluation.color import metrics
from evaluation.color.palette import load_uw71
from evaluation.concepts import load_concepts
from evaluation.pipeline import runs
from evaluation.pipeline.scoring import score_every_source
from storage import ensure_schema, open_db
from storage.human import DESIGNERS

PAPER_CONCEPTS = 1278
DESIGNERS_PER_CONCEPT = 5
MODELS = ("model-a", "model-b", "model-c")
STYLES = ("natural", "clipart")
CFG_SCALES = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
VOTED_COLORINGS = 562
STUDY_CONCEPTS = 150
ADMIN = Actor(None, "admin", frozenset({"admin"}))


def _coloring(rng: np.random.Generator, rgbs: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """A `side`² sketch painted in 2-3 flat regions of UW-71 colors, line art in black."""
    image = np.full((side, side, 3), 255, np.uint8)
    mask = np.zeros((side, side), bool)
    cuts = np.sort(rng.integers(side // 8, side - side // 8, size=2))
    bands = [(side // 16, cuts[0]), (cuts[0], cuts[1]), (cuts[1], side - side // 16)]
    for (top, bottom), rgb in zip(bands, rgbs[rng.integers(len(rgbs), size=3)]):
        image[top:bottom, side // 16 : side - side // 16] = rgb
        mask[top:bottom, side // 16 : side - side // 16] = True
    image[:, side // 2 - 2 : side // 2 + 2] = 0
    mask[:, side // 2 - 2 : side // 2 + 2] = False
    return image, mask


def _sparse(rng: np.random.Generator) -> np.ndarray:
    """A model distribution shaped like the extraction's: mass on 3-12 of the 71 bins
    (a group keeps at most 20 merged colors, most images fewer)."""
    p = np.zeros(71)
    bins = rng.choice(71, size=rng.integers(3, 13), replace=False)
    p[bins] = rng.dirichlet(np.ones(len(bins)))
    return p


def build(db, data: Path, n_concepts: int, rng: np.random.Generator, side: int) -> dict:
    """Populate `db` (schema ensured, concepts synced) as the module docstring says."""
    start = time.perf_counter()
    keys = [c.key for c in load_concepts()][:n_concepts]
    designers = [a["id"] for a, _ in create_annotators(db, DESIGNERS_PER_CONCEPT, "designer")]
    rgbs = np.array([[int(h[i : i + 2], 16) for i in (1, 3, 5)] for h in load_uw71().hex], np.uint8)
    ids = []
    for key in keys:
        favourites = rgbs[rng.choice(len(rgbs), size=4, replace=False)]
        for designer in designers:
            image, mask = _coloring(rng, favourites, side)
            ids.append(store_coloring(db, data, designer, key, image, mask, seconds_spent=90.0))
    for coloring_id in ids:
        review.accept_coloring(db, ADMIN, coloring_id)
    items = [
        {
            "model": m,
            "concept": k,
            "noun": k,
            "style": s,
            "cfg": c,
            "sample": 0,
            "seed": 0,
            "prompt": f"a {k}",
        }
        for m in MODELS
        for k in keys
        for s in STYLES
        for c in CFG_SCALES
    ]
    runs.create_run(db, "scale", items, {"models": list(MODELS)})
    for model in MODELS:
        for key in keys:
            for style in STYLES:
                for cfg in CFG_SCALES:
                    runs.store_model_distribution(db, "scale", model, key, style, cfg, _sparse(rng), 5, 0)
    return {"colorings": len(ids), "model_distributions": len(items), "build_s": time.perf_counter() - start}


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def _vote(db, rng: np.random.Generator) -> int:
    """Three experts vote on up to `VOTED_COLORINGS` open reviews; the votes cast."""
    experts = [
        Actor(a["id"], a["pseudonym"], frozenset({"expert"})) for a, _ in create_annotators(db, 3, "expert")
    ]
    cast = 0
    for expert in experts:
        while cast < 3 * VOTED_COLORINGS:
            queue = votes.vote_queue(db, expert, rng)
            if not queue:
                break
            votes.cast_vote(db, expert, queue[0].task_id, bool(rng.random() < 0.8))  # the one shown
            cast += 1
            if cast >= (experts.index(expert) + 1) * VOTED_COLORINGS:
                break
    return cast


def _judge(db, study_id: int, rng: np.random.Generator) -> int:
    """Participants judge every pair of the open study (votes per pair as designed)."""
    judged = 0
    while True:
        person = create_annotators(db, 1, "participant")[0][0]
        participant = Actor(person["id"], person["pseudonym"], frozenset({"participant"}))
        judging.set_background(db, participant, bool(person["id"] % 2))
        before = judged
        while (trial := judging.next_trial(db, participant, rng)) is not None:
            judging.record_judgment(db, participant, trial.task_id, _choice(trial, rng), 3.0)
            judged += 1
        if judged == before:
            return judged


def _choice(trial: judging.Trial, rng: np.random.Generator) -> str:
    """The bench participant's answer: the ground truth in an attention check; otherwise the
    side nearer P_H by EMD, 80 % of the time. Always "left" split every pair 3-3, as each side
    is shown left equally often, and left Table 3 blank (outside probe 222)."""
    sides = {"left": trial.left, "right": trial.right}
    for side, shown in sides.items():
        if shown.item == judging.GROUND_TRUTH:
            return side
    nearer = min(sides, key=lambda side: metrics.emd(trial.truth.p, sides[side].p))
    return nearer if rng.random() < 0.8 else ("right" if nearer == "left" else "left")


def measure(fraction: float, side: int, seed: int = 0, keep: Path | None = None) -> dict:
    """Build a study at `fraction` of the paper's size in a temporary folder (or in `keep`,
    a new folder that stays, to open in the app); time the views."""
    rng = np.random.default_rng(seed)
    n_concepts = max(2, round(PAPER_CONCEPTS * fraction))
    if keep is not None:
        keep.mkdir(parents=True)  # a new folder: an earlier study there is never built over
    place = tempfile.TemporaryDirectory() if keep is None else contextlib.nullcontext(str(keep))
    with place as folder:
        data = Path(folder) / "data"
        db = open_db(data / "colorconcept.sqlite")
        ensure_schema(db)
        sync_concepts(db)
        figures = {"fraction": fraction, "concepts": n_concepts, "side": side}
        figures |= build(db, data, n_concepts, rng, side)
        concepts = load_concepts()
        key = [c.key for c in concepts][0]
        figures["browser_s"], _ = _timed(concept_view, db, data, concepts, key, DESIGNERS, "natural")
        figures["scoring_s"], _ = _timed(score_every_source, db, concepts)
        # The page's two steps on a cache of its own, then the whole view in one call (the API's).
        cache = LeaderboardCache()
        figures["leaderboards_first_s"], _ = _timed(cache.first_look, db, concepts, DESIGNERS)
        figures["leaderboards_intervals_s"], _ = _timed(cache.analyses, db, concepts, DESIGNERS)
        figures["leaderboards_changed_s"], _ = _timed(leaderboard_analyses, db, concepts, DESIGNERS)
        figures["leaderboards_s"], _ = _timed(leaderboard_analyses, db, concepts, DESIGNERS)
        # The experts vote on the most disputed concepts' colorings (about VOTED_COLORINGS), so
        # that each gets its three votes: an expert is handed the least voted colorings first,
        # so with every review open none would complete before each coloring had one vote.
        # At most half: a small --fractions kept with --keep still leaves reviews open for an
        # expert to try (at 5 % every review was decided, an outside tester found).
        disputed = min(0.5, VOTED_COLORINGS / (n_concepts * DESIGNERS_PER_CONCEPT))
        review.open_review_queue(db, ADMIN, top_fraction=disputed)
        figures["votes_cast"] = _vote(db, rng)
        figures["queue_s"], figures["reviews_opened"] = _timed(
            review.open_review_queue, db, ADMIN, top_fraction=1.0
        )
        figures["agreement_s"], _ = _timed(votes.agreement_panel, db)
        sources = [study.ModelSource(m, "scale", 5.0) for m in MODELS]
        figures["study_setup_s"], study_id = _timed(
            study.create_study,
            db,
            "scale study",
            sources,
            study.designers_ground_truth(),
            seed=seed,
            n_concepts=min(STUDY_CONCEPTS, n_concepts),
        )
        study.open_study(db, study_id, ADMIN)
        figures["judgments"] = _judge(db, study_id, rng)
        figures["export_s"], _ = _timed(export, db, data, Path(folder) / "export")
        db.close()
    return figures


def run(fractions=(0.1, 0.5, 1.0), side: int = 1024, keep: Path | None = None) -> list[dict]:
    """`measure` at each fraction (kept under `keep`/<fraction> when given); prints one line
    each as it goes."""
    rows = []
    for fraction in fractions:
        rows.append(measure(fraction, side, keep=None if keep is None else keep / f"{fraction:g}"))
        print(describe(rows[-1]), flush=True)
    return rows


TIMED = (
    "browser_s",
    "scoring_s",
    "leaderboards_first_s",
    "leaderboards_intervals_s",
    "leaderboards_changed_s",
    "leaderboards_s",
    "agreement_s",
    "queue_s",
    "study_setup_s",
    "export_s",
)


def describe(f: dict) -> str:
    """One line of figures."""
    times = ", ".join(f"{k[:-2]} {f[k]:.2f} s" for k in TIMED)
    return (
        f"{f['fraction']:.1%}: {f['concepts']} concepts, {f['colorings']} colorings, "
        f"{f['model_distributions']} model distributions, {f['votes_cast']} QC votes, "
        f"{f['judgments']} judgments (built in {f['build_s']:.0f} s): {times}"
    )


def markdown(rows: list[dict]) -> str:
    """The scale table for BENCHMARKS.md."""
    lines = [
        "| size | concepts | colorings | Concept browser | scoring after a run (by the job) | "
        "Leaderboards page after a change: first look | then its intervals | "
        "Leaderboards in one call (API) | Leaderboards kept | QC agreement | "
        "open whole vote queue | study set-up | full export |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in rows:
        lines.append(
            f"| {f['fraction']:.1%} | {f['concepts']:,} | {f['colorings']:,} | "
            + " | ".join(f"{f[k]:.2f} s" for k in TIMED)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", default="0.1,0.5,1.0")
    parser.add_argument("--side", type=int, default=1024)
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each study in KEEP/<fraction>/data (new folders) to open in the app "
        "(README: full-size rehearsal); by default each is built in a temporary folder and removed",
    )
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {str(args.keep)!r} is not empty: give a new or empty folder")
    rows = run(tuple(float(x) for x in args.fractions.split(",")), args.side, keep=args.keep)
    print(markdown(rows))
    if args.keep is not None:
        for fraction in args.fractions.split(","):
            data = args.keep / f"{float(fraction):g}" / "data"
            print(
                f"kept: python app.py --db {data / 'colorconcept.sqlite'} --data-dir {data} "
                "(sign in as admin with COLORCONCEPT_ADMIN_PASSWORD set, or set it with "
                "python -m annotation set-admin-password)"
            )


if __name__ == "__main__":
    main()
