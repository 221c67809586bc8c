"""The pairwise study in the library: design, freeze rule, assignment, votes, analysis."""

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from annotation import assignment
from annotation.coloring.store import store_coloring
from annotation.errors import Conflict, InvalidInput, PermissionDenied
from annotation.people.accounts import Actor, create_annotators
from annotation.study import design as study
from annotation.study import judging
from annotation.study.design import GROUND_TRUTH, ModelSource, StudyFrozen
from evaluation.analysis.judgment_report import analyse, read_metrics, read_votes
from evaluation.analysis.judgments import pair_preferences, participant_flags
from evaluation.color import metrics
from evaluation.color.naming import names_of_uw71
from evaluation.color.palette import load_uw71
from evaluation.pipeline import runs
from storage import iso, utcnow
from tests.study_data import CFG, MODELS, RUN, populate, sources, sparse_distribution, truth_source

ROOT = Path(__file__).resolve().parents[3]
ADMIN = Actor(None, "admin", frozenset({"admin"}))


@pytest.fixture
def setup(db, tmp_path):
    """A database with 40 concepts of outputs and ground truths; returns (db, data_dir, truths)."""
    data_dir = tmp_path / "data"
    truths, _ = populate(db, data_dir, 40, np.random.default_rng(0))
    return db, data_dir, truths


def _study(db, data_dir, truths, *, name="s", n_concepts=20, seed=1, open_it=True, **options):
    study_id = study.create_study(
        db, name, sources(), truth_source(data_dir, truths), seed=seed, n_concepts=n_concepts, **options
    )
    if open_it:
        study.open_study(db, study_id, ADMIN)
    return study_id


def _participants(db, n, background=True):
    actors = [
        Actor(a["id"], a["pseudonym"], frozenset({"participant"}))
        for a, _ in create_annotators(db, n, "participant")
    ]
    for actor in actors:
        if background is not None:
            judging.set_background(db, actor, background)
    return actors


def _judge_all(db, actors, choose, rng):
    """Every participant judges until nothing is left; `choose(trial)` -> 'left'/'right'."""
    shown = []
    for actor in actors:
        while (trial := judging.next_trial(db, actor, rng)) is not None:
            shown.append(trial)
            judging.record_judgment(db, actor, trial.task_id, choose(trial), 2.5)
    return shown


def _dump(db):
    return list(db.conn.iterdump())


def add_run(db, name, models, keys, *, style="natural", cfg=7.5, seed=0):
    """A finished run of `models` on the concepts `keys`: one distribution per (model, concept)."""
    rng = np.random.default_rng(seed)
    items = [
        {"model": m, "concept": k, "noun": k, "style": style, "cfg": cfg, "sample": 0, "seed": 0, "prompt": k}
        for m in models
        for k in keys
    ]
    runs.create_run(db, name, items, {"models": list(models)})
    for m in models:
        for k in keys:
            runs.store_model_distribution(db, name, m, k, style, cfg, sparse_distribution(rng), 1, 0)
    return [ModelSource(m, name, cfg) for m in models]


def _designers_color(db, data_dir, keys):
    """Three designers color each of `keys` (two in one color, one in another)."""
    designers = [a["id"] for a, _ in create_annotators(db, 3, "designer")]
    hexes = load_uw71().hex
    for key in keys:
        for designer, index in zip(designers, (5, 5, 40)):
            rgb = np.array([int(hexes[index][i : i + 2], 16) for i in (1, 3, 5)], np.uint8)
            image = np.full((16, 16, 3), 255, np.uint8)
            image[:8] = rgb
            mask = np.zeros((16, 16), bool)
            mask[:8] = True
            store_coloring(db, data_dir, designer, key, image, mask, seconds_spent=60.0)


TINY = ("tiny-random", "tiny-random-b")
FRUIT = ["apple", "banana", "lemon"]


@pytest.fixture
def readme_runs(db, tmp_path):
    """The README's first evaluation (apple, banana, lemon) and a second one adding carrot, of
    the two tiny models; designers colored the three fruit, and the shipped `uw71-ratings`
    covers all four. Returns (db, data_dir, older outputs, newer outputs)."""
    from annotation.concepts import sync_concepts
    from evaluation.analysis.reference import ensure_shipped_reference

    sync_concepts(db)
    ensure_shipped_reference(db)
    older = add_run(db, "eval-20261127-092736", TINY, FRUIT)
    newer = add_run(db, "eval-20261127-093353", TINY, [*FRUIT, "carrot"], seed=1)
    _designers_color(db, tmp_path / "data", FRUIT)
    return db, tmp_path / "data", older, newer


def test_design_samples_concepts_with_truth_and_outputs_and_is_recorded(setup):
    db, data_dir, truths = setup
    limited = {k: truths[k] for k in sorted(truths)[:30]}
    study_id = _study(db, data_dir, limited, n_concepts=20, open_it=False)
    design = study.study_design(db, study_id)
    assert len(design["concepts"]) == 20 and set(design["concepts"]) <= set(limited)
    # 40 shared by the outputs, of which only the 30 with a ground truth could be drawn
    assert design["shared_concepts"] == 40 and "eligible_concepts" not in design and design["seed"] == 1
    assert design["sources"] == [{"model": m, "run": RUN, "cfg": CFG} for m in MODELS]
    assert (design["style"], design["votes_per_pair"], design["ground_truth"]) == (
        "clipart",
        6,
        "synthetic colorings",
    )
    assert design["pairs"] == 60 and design["frozen"] is None
    # About 10 % of trials are checks: round(0.1 / 0.9 * 60) = 7 check pairs.
    assert design["attention_checks"] == 7 == len(design["attention_check_pairs"])
    pairs = list(db["study_pairs"].rows_where("study_id = ?", [study_id]))
    study_pairs = {(p["concept_key"], p["a"], p["b"]) for p in pairs if p["b"] != GROUND_TRUTH}
    assert study_pairs == {
        (k, a, b)
        for k in design["concepts"]
        for a, b in [("omnigen", "sana"), ("omnigen", "sdxl"), ("sana", "sdxl")]
    }
    checks = [(p["concept_key"], p["a"]) for p in pairs if p["b"] == GROUND_TRUTH]
    assert sorted(checks) == sorted(map(tuple, design["attention_check_pairs"]))
    assert all(json.loads(p["meta"])["attention_check"] == (p["b"] == GROUND_TRUTH) for p in pairs)
    again = study.create_study(db, "s2", sources(), truth_source(data_dir, limited), seed=1, n_concepts=20)
    assert study.study_design(db, again)["concepts"] == design["concepts"]
    other = study.create_study(db, "s3", sources(), truth_source(data_dir, limited), seed=2, n_concepts=20)
    assert study.study_design(db, other)["concepts"] != design["concepts"]


def test_a_design_stored_with_the_old_field_name_reads_with_the_new_one(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=5, open_it=False)
    meta = json.loads(db["studies"].get(study_id)["meta"])
    meta["eligible_concepts"] = meta.pop("shared_concepts")
    db["studies"].update(study_id, {"meta": json.dumps(meta)})
    design = study.study_design(db, study_id)
    assert design["shared_concepts"] == 40 and "eligible_concepts" not in design


def test_too_few_eligible_concepts_is_a_clear_error_and_stores_nothing(setup):
    db, data_dir, truths = setup
    before = _dump(db)
    with pytest.raises(
        InvalidInput,
        match=r"only 40 concepts have a ground truth .* "
        r"got n_concepts=41",
    ):
        _study(db, data_dir, truths, n_concepts=41)
    assert _dump(db) == before


@pytest.mark.parametrize(
    "change, message",
    [
        ({"name": " "}, "`name` must be a non-empty text"),
        (
            {"sources": sources()[:1]},
            r"^Model outputs \(`sources`\): choose two or more, each from a different model \(a study "
            r"compares models\); chosen: omnigen\. Choose one output per model\.$",
        ),
        (
            {"sources": [*sources()[:2], ModelSource("sana", RUN, 7.0)]},
            r"each from a different model .*; chosen: omnigen, sana, sana\.",
        ),
        (
            {"sources": [*sources()[:2], ModelSource("dalle", RUN, CFG)]},
            "no clipart distributions stored for model 'dalle'",
        ),
        ({"n_concepts": 0}, "`n_concepts` must be a whole number >= 1, got 0"),
        ({"style": "photo"}, "`style` must be one of"),
        ({"votes_per_pair": 2.5}, "`votes_per_pair` must be a whole number"),
        ({"attention_rate": 0.7}, r"`attention_rate` must be a number in \[0, 0.5\], got 0.7"),
    ],
)
def test_bad_design_arguments_are_refused_with_the_argument_named(setup, change, message):
    db, data_dir, truths = setup
    arguments = {
        "name": "s",
        "sources": sources(),
        "n_concepts": 5,
        "style": "clipart",
        "votes_per_pair": 6,
        "attention_rate": 0.1,
        **change,
    }
    before = _dump(db)
    with pytest.raises(InvalidInput, match=message):
        study.create_study(
            db,
            arguments.pop("name"),
            arguments.pop("sources"),
            truth_source(data_dir, truths),
            seed=0,
            **arguments,
        )
    assert _dump(db) == before


def test_an_open_study_cannot_change_in_code_or_in_sql(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=5, open_it=False)
    assert study.update_study(db, study_id, ADMIN, votes_per_pair=4)["votes_per_pair"] == 4
    design = study.open_study(db, study_id, ADMIN)
    assert design["frozen"] and design["votes_per_pair"] == 4
    before = _dump(db)
    with pytest.raises(StudyFrozen, match="was opened on .* its design is frozen"):
        study.update_study(db, study_id, ADMIN, votes_per_pair=6)
    with pytest.raises(StudyFrozen):
        study.open_study(db, study_id, ADMIN)
    for sql in (
        "update studies set votes_per_pair = 3",
        "update studies set frozen = null",
        "delete from studies",
        "update study_pairs set a = 'x'",
        "insert into study_pairs (study_id, concept_key, a, b) values (1, 'apple', 'p', 'q')",
        "delete from study_ground_truths",
        "update study_candidates set p = '[]'",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="this study is open"):
            db.execute(sql)
    assert _dump(db) == before


def test_pairs_are_handed_out_only_once_the_study_is_open(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=5, open_it=False)
    (actor,) = _participants(db, 1)
    assert judging.next_trial(db, actor, np.random.default_rng(0)) is None
    assert judging.progress(db, actor) == (0, 0)
    study.open_study(db, study_id, ADMIN)
    assert judging.next_trial(db, actor, np.random.default_rng(0)) is not None


def test_each_pair_gets_its_votes_from_distinct_participants_and_nobody_repeats(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=10, trials_per_participant=200)
    actors = _participants(db, 8)
    shown = _judge_all(db, actors, lambda t: "left", np.random.default_rng(3))
    votes = judging.votes_frame(db, study_id)
    n_pairs = sum(study.study_size(db, study_id).values())
    assert len(votes) == len(shown) == 6 * n_pairs
    per_pair = votes.groupby("pair_id")["participant_id"]
    assert (per_pair.size() == 6).all() and (per_pair.nunique() == 6).all()
    assert not votes.duplicated(["pair_id", "participant_id"]).any()
    # Asked for 200, but nobody can judge more than the study's pairs.
    assert judging.progress(db, actors[0]) == (
        votes["participant_id"].eq(actors[0].annotator_id).sum(),
        n_pairs,
    )


def test_pairs_held_by_others_are_told_apart_from_a_study_with_nothing_left(setup):
    """An outside tester read "Trial 1 of 7" and then "No pair is waiting for you right now
    ... come back later" when every other pair had its votes or was held by someone else."""
    db, data_dir, truths = setup
    _study(db, data_dir, truths, n_concepts=2, votes_per_pair=1, trials_per_participant=7, attention_rate=0.0)
    first, second = _participants(db, 2)
    rng = np.random.default_rng(0)
    trial = judging.next_trial(db, first, rng)  # holds its batch: every pair of this study
    n_held = len(assignment.open_tasks(db, "judgment", first.annotator_id))
    assert n_held >= 1 and judging.next_trial(db, second, rng) is None
    held, until = judging.held_by_others(db, second)
    assert held == n_held and judging.held_by_others(db, first) == (0, None)
    # when the last of them comes back at the latest: the first's reservation's end
    assert until == max(t.expires for t in assignment.open_tasks(db, "judgment", first.annotator_id))
    # a reservation that has run out no longer counts as a pair that may come back
    assert judging.held_by_others(db, second, now=utcnow() + dt.timedelta(days=1)) == (0, None)
    judging.record_judgment(db, first, trial.task_id, "left", 2.5)
    assert judging.held_by_others(db, second)[0] == n_held - 1  # its one vote is in
    while (trial := judging.next_trial(db, first, rng)) is not None:
        judging.record_judgment(db, first, trial.task_id, "left", 2.5)
    assert judging.held_by_others(db, second)[0] == 0 and judging.next_trial(db, second, rng) is None
    # Every pair has its votes: nothing more is asked of the second (an invited participant's
    # count took in full studies, and an outside tester's were told to come back for good).
    assert judging.progress(db, second) == (0, 0)


def test_placement_is_recorded_per_trial_and_balanced(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=30, trials_per_participant=500)
    actors = _participants(db, 7)
    rng = np.random.default_rng(11)
    shown = _judge_all(db, actors, lambda t: "left" if rng.random() < 0.5 else "right", rng)
    rows = list(
        db.query(
            "select j.*, t.left_item as task_left, p.a, p.b from judgments j "
            "join tasks t on t.result_id = j.id and t.kind = 'judgment' "
            "join study_pairs p on p.id = j.pair_id order by j.id"
        )
    )
    assert len(rows) == len(shown) == 600
    assert all(r["left_item"] == r["task_left"] for r in rows)
    assert all(
        r["winner"] == (r["left_item"] if r["choice"] == "left" else ({"a", "b"} - {r["left_item"]}).pop())
        for r in rows
    )
    for trial, row in zip(shown, rows):
        assert trial.left.item == row[row["left_item"]]
    # Each pair shows each item on the left as often as the other, give or take one (a coin
    # per trial left an outside check's pairs at 6 of 6 on one side).
    per_pair = {}
    for r in rows:
        per_pair.setdefault(r["pair_id"], []).append(r["left_item"])
    assert all(abs(sides.count("a") - sides.count("b")) <= 1 for sides in per_pair.values())
    assert {len(sides) for sides in per_pair.values()} == {6}
    votes = judging.votes_frame(db, study_id)
    assert (votes["left_model"] == [t.left.item for t in shown]).all()


def test_a_trial_shows_the_ground_truth_and_both_candidates_as_placed(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=5, attention_rate=0.0)
    (actor,) = _participants(db, 1)
    trial = judging.next_trial(db, actor, np.random.default_rng(0))
    task = db["tasks"].get(trial.task_id)
    pair = db["study_pairs"].get(task["pair_id"])
    assert (trial.study_id, trial.concept, trial.number, trial.total) == (
        study_id,
        pair["concept_key"],
        1,
        15,
    )
    assert_allclose(trial.truth.p, truths[trial.concept], rtol=1e-12)
    assert trial.truth.n_colorings == 5 and len(trial.truth.colorings) == study.COLORINGS_SHOWN
    assert [n for _, n in trial.truth.dominant] == [3, 2]
    placed = (pair["a"], pair["b"]) if task["left_item"] == "a" else (pair["b"], pair["a"])
    assert (trial.left.item, trial.right.item) == placed
    for side in (trial.left, trial.right):
        stored = db.execute(
            "select p from model_distributions where model = ? and concept = ?", [side.item, trial.concept]
        ).fetchone()[0]
        assert_allclose(side.p, json.loads(stored), rtol=1e-12)
        assert len(side.images) == 2 and all((data_dir / path).is_file() for path in side.images)


def test_votes_wait_for_the_background_answer_and_bad_votes_store_nothing(setup):
    db, data_dir, truths = setup
    _study(db, data_dir, truths, n_concepts=5)
    actor, other = _participants(db, 2, background=None)
    assert judging.design_background(db, actor) is None
    trial = judging.next_trial(db, actor, np.random.default_rng(0))
    before = _dump(db)
    with pytest.raises(InvalidInput, match="design or art background"):
        judging.record_judgment(db, actor, trial.task_id, "left", 1.0)
    judging.set_background(db, actor, False)
    before = _dump(db)
    for args, message in [
        ((trial.task_id, "up", 1.0), "`side` must be one of"),
        ((trial.task_id, "left", -1.0), "`seconds` must be a finite number"),
        ((trial.task_id + 999, "left", 1.0), "not a pair handed to you"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            judging.record_judgment(db, actor, *args)
    judging.set_background(db, other, True)
    with pytest.raises(InvalidInput, match="not a pair handed to you"):
        judging.record_judgment(db, other, trial.task_id, "left", 1.0)
    with pytest.raises(PermissionDenied, match="needs a participant account"):
        judging.next_trial(db, ADMIN, np.random.default_rng(0))
    assert [line for line in _dump(db) if "judgments" in line] == [
        line for line in before if "judgments" in line
    ]
    # A held trial that is not the one on screen (the oldest held) is refused: an API
    # client's vote on it was stored with a placement nobody saw.
    held = assignment.open_tasks(db, "judgment", actor.annotator_id)
    assert held[0].id == trial.task_id and len(held) > 1
    with pytest.raises(Conflict, match=rf"`task_id` {held[1].id} is not the trial shown to you now"):
        judging.record_judgment(db, actor, held[1].id, "left", 1.0)
    assert judging.votes_frame(db, 1).empty
    judging.record_judgment(db, actor, trial.task_id, "right", 1.0)
    assert judging.votes_frame(db, 1)["design_background"].tolist() == [False]
    # The same trial answered again (a second tab): refused in a participant's words.
    with pytest.raises(Conflict) as again:
        judging.record_judgment(db, actor, trial.task_id, "left", 1.0)
    assert str(again.value) == (
        "this trial was already answered (a second click, or another tab or window); your first "
        "answer is kept: go on with the trial shown, or press Start if none is"
    )
    assert len(judging.votes_frame(db, 1)) == 1
    # The background answer is given once: the same answer again writes nothing, another one
    # (a second tab, an API client after the trials began) is refused and changes nothing.
    before = _dump(db)
    judging.set_background(db, actor, False)
    with pytest.raises(Conflict, match=r"background question \(no\) is already recorded"):
        judging.set_background(db, actor, True)
    assert _dump(db) == before
    assert judging.votes_frame(db, 1)["design_background"].tolist() == [False]


def test_failed_attention_checks_flag_the_participant_and_keep_the_votes(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=10, attention_rate=0.3, trials_per_participant=200)
    actors = _participants(db, 7)

    def choose(trial, cheat):
        truth_side = "left" if trial.left.item == GROUND_TRUTH else "right"
        if GROUND_TRUTH not in (trial.left.item, trial.right.item):
            return "left"
        return ({"left", "right"} - {truth_side}).pop() if cheat else truth_side

    rng = np.random.default_rng(0)
    _judge_all(db, actors[:1], lambda t: choose(t, True), rng)
    _judge_all(db, actors[1:], lambda t: choose(t, False), rng)
    votes = judging.votes_frame(db, study_id)
    checks = votes[votes["attention_check"]]
    # Each person meets the checks due over their trials (a check takes any number of answers).
    n_checks = study.study_size(db, study_id)["attention_checks"]
    for person, trials in votes.groupby("participant_id"):
        due = assignment.checks_due(0.3, len(trials), int(person), study_id)
        assert trials["attention_check"].sum() == min(n_checks, due) > 0
    assert (
        checks["attention_passed"].tolist() == (checks["participant_id"] != actors[0].annotator_id).tolist()
    )
    assert votes.loc[~votes["attention_check"], "attention_passed"].isna().all()
    flags = participant_flags(votes)
    assert flags["flagged"].to_dict() == {
        a.annotator_id: a is actors[0] for a in actors if a.annotator_id in flags.index
    }
    # Named by pseudonym too, as the crowd's payment table names them (outside probe 225).
    assert flags["participant"].to_dict() == {
        a.annotator_id: a.pseudonym for a in actors if a.annotator_id in flags.index
    }
    kept = pair_preferences(votes)["n_votes"].sum()
    dropped = pair_preferences(votes, exclude_flagged=True)["n_votes"].sum()
    own = ((votes["participant_id"] == actors[0].annotator_id) & ~votes["attention_check"]).sum()
    assert kept == 6 * study.study_size(db, study_id)["pairs"] and dropped == kept - own > 0


def test_each_participant_meets_the_study_share_of_attention_checks_spread_over_their_trials(setup):
    """30 concepts x 3 model pairs and 10 checks (a share of 0.1), 10 trials a person: each of
    the 60 participants meets exactly one check, at a place that differs between them (handed
    out by fill alone, an outside check's participants met 0 to 5 checks in 10 trials)."""
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=30, attention_rate=0.1, trials_per_participant=10)
    assert study.study_size(db, study_id) == {"pairs": 90, "attention_checks": 10}
    actors = _participants(db, 60)
    rng = np.random.default_rng(5)
    shown = _judge_all(db, actors, lambda t: "left", rng)
    assert len(shown) == 600  # every pair and check got its 6 votes
    votes = judging.votes_frame(db, study_id)
    assert (votes.groupby("participant_id").size() == 10).all()
    per_person = votes.groupby("participant_id")["attention_check"].sum()
    assert (per_person == 1).all(), per_person.value_counts().to_dict()
    places = [
        int(np.flatnonzero(group["attention_check"].to_numpy())[0])
        for _, group in votes.sort_values("created", kind="stable").groupby("participant_id", sort=False)
    ]
    assert len(set(places)) >= 5  # not one learnable place


def test_a_check_takes_any_number_of_answers_so_no_one_goes_unchecked(setup):
    """One check and 12 pairs of 6 votes: 8 people of 10 trials each need 8 check answers. With a
    pair's quota on it, the last two met none and could never be flagged (an outside check's
    invitee met 0 in 16 while others met 2); a check is never a filler either."""
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=4, attention_rate=0.1, trials_per_participant=10)
    assert study.study_size(db, study_id) == {"pairs": 12, "attention_checks": 1}
    _judge_all(db, _participants(db, 9), lambda t: "left", np.random.default_rng(3))
    votes = judging.votes_frame(db, study_id)
    per_person = votes.groupby("participant_id")["attention_check"].agg(["size", "sum"])
    full = per_person[per_person["size"] == 10]
    assert len(full) >= 8 and (full["sum"] == 1).all(), per_person
    assert (votes[~votes["attention_check"]].groupby("pair_id").size() == 6).all()  # pairs keep their quota


def test_a_check_due_right_after_the_last_model_pair_is_met(setup):
    """9 model pairs and a check at 10 %, 10 trials a person: an invitee whose check falls on
    trial 10 judged the 9 pairs and met none, so they could never be flagged (outside probe
    211: "Trial 1 of 4" at 20 % and 5 trials); they meet it as their 10th trial, and their
    progress counts it from the start."""
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=3, attention_rate=0.1, trials_per_participant=10)
    assert study.study_size(db, study_id) == {"pairs": 9, "attention_checks": 1}
    people = _participants(db, 40)
    late = [a for a in people if assignment.checks_due(0.1, 9, a.annotator_id, study_id) == 0]
    assert late and all(assignment.checks_due(0.1, 10, a.annotator_id, study_id) == 1 for a in late)
    person = late[0]
    assert judging.progress(db, person) == (0, 10)
    shown = _judge_all(db, [person], lambda t: "left", np.random.default_rng(2))
    assert len(shown) == 10
    votes = judging.votes_frame(db, study_id).sort_values("created", kind="stable")
    assert votes["attention_check"].tolist() == [False] * 9 + [True]
    assert judging.progress(db, person) == (10, 10)


def test_fewer_trials_than_a_run_still_meet_one_check_and_a_full_study_gives_none(setup):
    """At 10 % with 5 trials a person met a check one time in two (an outside check: 3 people,
    none); each now meets one. A study whose model pairs all have their votes gave a newcomer
    its check as their first trial: it gives them nothing."""
    db, data_dir, truths = setup
    short = _study(
        db, data_dir, truths, name="short", n_concepts=30, attention_rate=0.1, trials_per_participant=5
    )
    rng = np.random.default_rng(6)
    _judge_all(db, _participants(db, 12), lambda t: "left", rng)
    met = judging.votes_frame(db, short).groupby("participant_id")["attention_check"].agg(["size", "sum"])
    assert (met["size"] == 5).all() and (met["sum"] == 1).all(), met
    small = _study(
        db, data_dir, truths, name="small", seed=4, n_concepts=2, votes_per_pair=1, attention_rate=0.3
    )
    _judge_all(db, _participants(db, 1), lambda t: "left", rng)  # fills small (and short's rest)
    late = _participants(db, 1)
    _judge_all(db, late, lambda t: "left", rng)
    assert judging.votes_frame(db, small)["participant_id"].eq(late[0].annotator_id).sum() == 0
    assert judging.progress(db, late[0])[0] == judging.progress(db, late[0])[1]


def test_the_runs_of_attention_checks_follow_the_designed_share(setup):
    """29 concepts x 3 pairs: a 10 % design rounds to 10 checks, a share of 10/97; runs of 9-10
    trials from that put two checks at trials 9 and 10 now and then (an outside check read two
    in ten). With the design's 10 %, each person meets one in trials 1-10 and one in 11-20."""
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=29, attention_rate=0.1, trials_per_participant=20)
    assert study.study_size(db, study_id) == {"pairs": 87, "attention_checks": 10}
    _judge_all(db, _participants(db, 30), lambda t: "left", np.random.default_rng(2))
    votes = judging.votes_frame(db, study_id).sort_values("created", kind="stable")
    runs = [
        [int(group["attention_check"].iloc[a:b].sum()) for a, b in ((0, 10), (10, 20))]
        for _, group in votes.groupby("participant_id", sort=False)
        if len(group) == 20
    ]
    assert len(runs) >= 27 and runs.count([1, 1]) >= len(runs) - 1, runs  # the last may run short


def test_an_invited_participant_judges_each_open_study_up_to_its_trials_per_participant(setup):
    """Someone from an invite judges every open study, but no more of one than its *Trials
    per participant* (an outside tester got 9 trials of a study asking 6, in batches of 10)."""
    db, data_dir, truths = setup
    small, large = (
        _study(db, data_dir, truths, name=name, seed=seed, n_concepts=n, trials_per_participant=trials)
        for name, seed, n, trials in (("six", 1, 8, 6), ("forty", 2, 20, 40))
    )
    (actor,) = _participants(db, 1)
    assert judging.progress(db, actor) == (0, 46)
    _judge_all(db, [actor], lambda t: "left", np.random.default_rng(4))
    per_study = {
        row[0]: row[1]
        for row in db.execute(
            "select p.study_id, count(*) from judgments j join study_pairs p on p.id = j.pair_id group by p.study_id"
        )
    }
    assert per_study == {small: 6, large: 40}
    assert judging.progress(db, actor) == (46, 46)


def test_an_invited_participant_is_done_when_what_is_left_has_its_votes(setup):
    """Two open studies of 12 pairs; the participant judges 2 trials, and others then give
    every pair its votes: their count drops to those 2, so they read done, not "2 of 24" and
    "come back later" for good (an outside check's invitees read "34 of 139")."""
    db, data_dir, truths = setup
    for name, seed in (("full", 1), ("other", 2)):
        _study(db, data_dir, truths, name=name, seed=seed, n_concepts=4, votes_per_pair=2, attention_rate=0.0)
    me, *others = _participants(db, 3)
    rng = np.random.default_rng(9)
    assert judging.progress(db, me) == (0, 24)
    for _ in range(2):
        trial = judging.next_trial(db, me, rng, batch_size=1)
        judging.record_judgment(db, me, trial.task_id, "left", 2.5)
    assignment.release(db, judging.next_trial(db, me, rng, batch_size=1).task_id, me.annotator_id)
    _judge_all(db, others, lambda t: "left", rng)
    assert judging.progress(db, me) == (2, 2) and judging.next_trial(db, me, rng) is None


@pytest.mark.parametrize("share", [0.05, 0.1, 1 / 7, 0.3, 0.5])
def test_checks_due_gives_one_check_in_each_run_of_trials(share):
    for person in range(1, 40):
        due = [assignment.checks_due(share, trial, person, 3) for trial in range(1, 201)]
        steps = np.diff([0, *due])
        assert set(steps) <= {0, 1}  # one new check at a time
        assert all(abs(d - share * t) < 1 for t, d in enumerate(due, 1))  # within one of the share
        bounds = np.floor(np.arange(len(due) * share + 1) / share).astype(int)
        runs = [steps[a:b] for a, b in zip(bounds, bounds[1:]) if b <= len(due)]
        assert [int(run.sum()) for run in runs] == [1] * len(runs)  # one check in each run
    places = {
        tuple(np.flatnonzero(np.diff([0] + [assignment.checks_due(0.1, t, p, 3) for t in range(1, 11)])))
        for p in range(20)
    }
    assert len(places) >= 5  # drawn per person
    assert assignment.checks_due(0.0, 50, 1, 1) == 0


def _emd_chooser(rng, scale):
    def choose(trial):
        d_left, d_right = (metrics.emd(trial.truth.p, s.p) for s in (trial.left, trial.right))
        p_left = 1.0 / (1.0 + np.exp((d_left - d_right) / scale))
        return "left" if rng.random() < p_left else "right"

    return choose


def _synthetic_study(tmp_path, choose_factory, seed):
    from storage import ensure_schema, open_db

    db = open_db(tmp_path / f"analysis-{seed}.sqlite")
    ensure_schema(db)
    data_dir = tmp_path / f"data-{seed}"
    truths, _ = populate(db, data_dir, 60, np.random.default_rng(seed))
    study_id = _study(db, data_dir, truths, n_concepts=60, attention_rate=0.05, trials_per_participant=400)
    rng = np.random.default_rng(seed + 1)
    _judge_all(db, _participants(db, 8), choose_factory(rng), rng)
    return db, study_id


def test_votes_driven_by_emd_give_emd_the_highest_agreement(tmp_path):
    db, study_id = _synthetic_study(tmp_path, lambda rng: _emd_chooser(rng, 3.0), 5)
    tables = analyse(
        judging.votes_frame(db, study_id),
        judging.study_metrics(db, study_id),
        rng=np.random.default_rng(0),
        n_boot=200,
    )
    result = tables["validation"].set_index("metric")
    assert result.loc["emd", "n_pairs"] == 180
    assert result["agreement"].idxmax() == "emd" and result.loc["emd", "agreement"] > 0.8
    assert result["pearson"].idxmax() == "emd" and result["spearman"].idxmax() == "emd"
    assert result.loc["emd", "pearson_lo"] > 0.5
    checks = tables["participants"]["n_checks"].sum()
    assert checks > 0 and tables["participants"]["n_failed"].sum() < 0.2 * checks


def test_votes_from_a_coin_give_correlations_near_zero(tmp_path):
    db, study_id = _synthetic_study(
        tmp_path, lambda rng: lambda trial: "left" if rng.random() < 0.5 else "right", 6
    )
    tables = analyse(
        judging.votes_frame(db, study_id),
        judging.study_metrics(db, study_id),
        rng=np.random.default_rng(1),
        n_boot=300,
        ci=0.99,
    )
    result = tables["validation"]
    # 180 pairs: the standard error of r is about 0.075, so 0.25 is over 3 of them.
    for key in ("pearson", "spearman"):
        assert (result[key].abs() < 0.25).all(), result
        assert ((result[f"{key}_lo"] <= 0) & (result[f"{key}_hi"] >= 0)).all(), result


def test_a_study_without_a_vote_to_analyse_is_refused_and_nothing_is_written(setup, tmp_path):
    db, data_dir, truths = setup
    folder = tmp_path / "export"
    draft = _study(db, data_dir, truths, n_concepts=3, open_it=False)
    with pytest.raises(Conflict, match=f"study {draft} is a draft: open it and collect votes first"):
        judging.analyse_study(db, draft, folder, seed=0, n_boot=10)
    opened = study.create_study(
        db, "s2", sources(), truth_source(data_dir, truths), seed=2, n_concepts=3, attention_rate=0.5
    )
    study.open_study(db, opened, ADMIN)
    with pytest.raises(Conflict, match=f"study {opened} has no vote on a model pair yet: nothing to analyse"):
        judging.analyse_study(db, opened, folder, seed=0, n_boot=10)
    # One participant, who fails every attention check: left out, nothing remains.
    [careless] = _participants(db, 1)
    _judge_all(
        db,
        [careless],
        lambda trial: "right" if trial.left.item == GROUND_TRUTH else "left",
        np.random.default_rng(3),
    )
    votes = judging.votes_frame(db, opened)
    assert votes["attention_passed"].eq(False).any() and (~votes["attention_check"]).any()
    with pytest.raises(
        Conflict, match="no vote on a model pair yet once participants who failed a check are left out"
    ):
        judging.analyse_study(db, opened, folder, seed=0, n_boot=10, exclude_flagged=True)
    assert not folder.exists()
    tables, _ = judging.analyse_study(db, opened, folder, seed=0, n_boot=10)
    assert not tables["table3"].empty


def test_export_and_command_line_reproduce_the_in_app_analysis(setup, tmp_path):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=10, trials_per_participant=200)
    rng = np.random.default_rng(2)
    _judge_all(db, _participants(db, 7), lambda t: "left" if rng.random() < 0.6 else "right", rng)
    folder = tmp_path / "export"
    tables, paths = judging.analyse_study(db, study_id, folder, seed=0, n_boot=100)
    assert {p.name for p in paths} == {
        "table3.csv",
        "validation.csv",
        "pairs.csv",
        "bradley_terry.csv",
        "participants.csv",
        "votes.csv",
        "metrics.csv",
        "design.json",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation",
            "judgments",
            str(folder),
            "--n-boot",
            "100",
            "--seed",
            "0",
            "--out",
            str(tmp_path / "cli"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "EMD" in done.stdout and "wrote table3.csv" in done.stdout
    # A taken --out, and a metrics file narrowed to no row: one line each, no traceback.
    long = pd.read_csv(folder / "metrics.csv").assign(style="natural")
    long.to_csv(tmp_path / "long.csv", index=False)
    with pytest.raises(ValueError, match=r"no row is left for the study's model outputs with style 'bogus'"):
        read_metrics(tmp_path / "long.csv", style="bogus")
    for extra, message in (
        (["--out", str(folder / "votes.csv")], "is a plain file, not a folder; give a folder"),
        (["--metrics", str(tmp_path / "long.csv"), "--style", "bogus"], "with style 'bogus'; check --style"),
        (["--ci", "\u0660.\u0669"], "argument --ci: must be a number, got '\u0660.\u0669'"),  # not 0.9
        (["--max-failures", "\u0661"], "argument --max-failures: must be a whole number, got '\u0661'"),
    ):
        refused = subprocess.run(
            [sys.executable, "-m", "evaluation", "judgments", str(folder), "--n-boot", "10", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr[-2000:]
        assert "Traceback" not in refused.stderr
    metrics = pd.read_csv(folder / "metrics.csv")
    assert list(metrics["dominant_model_name"]) == list(
        names_of_uw71().set_index("color_index").loc[metrics["dominant_model"], "iscc_nbs_l3"]
    )
    for name in ("table3", "pairs", "bradley_terry", "participants"):
        from_cli = pd.read_csv(tmp_path / "cli" / f"{name}.csv")
        in_app = pd.read_csv(folder / f"{name}.csv")
        pd.testing.assert_frame_equal(from_cli, in_app)
    votes = read_votes(folder / "votes.csv")
    assert (
        votes[list(judging.VOTE_COLUMNS)]
        .astype(str)
        .equals(judging.votes_frame(db, study_id)[list(judging.VOTE_COLUMNS)].astype(str))
    )


def test_command_line_narrows_a_long_metrics_file_to_the_design(tmp_path):
    long = pd.DataFrame(
        {
            "run": ["r", "r", "r", "r"],
            "model": ["a", "a", "b", "b"],
            "concept": ["apple"] * 4,
            "style": ["clipart"] * 4,
            "cfg": [4.5, 7.0, 4.5, 3.0],
            "emd": [1.0, 2.0, 3.0, 4.0],
            "hue_diff": [10.0, 20.0, 30.0, 40.0],
        }
    )
    long.to_csv(tmp_path / "long.csv", index=False)
    narrowed = read_metrics(
        tmp_path / "long.csv",
        sources=[{"model": "a", "run": "r", "cfg": 4.5}, {"model": "b", "run": "r", "cfg": 3.0}],
    )
    assert narrowed[["model", "emd", "hue_diff"]].values.tolist() == [["a", 1.0, 10.0], ["b", 4.0, 40.0]]
    assert read_metrics(tmp_path / "long.csv", cfg=4.5)["emd"].tolist() == [1.0, 3.0]


def test_the_evaluation_side_imports_nothing_from_annotation():
    code = (
        "import sys, evaluation.analysis.judgment_report; "
        "print([m for m in sys.modules if m.split('.')[0] in ('annotation', 'app', 'gradio')])"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_designer_colorings_give_the_ground_truth_with_its_groups(setup):
    from storage import human as human_rows

    db, data_dir, truths = setup
    keys = [
        row["concept"]
        for row in db.query(
            "select concept from model_distributions group by concept order by concept limit 3"
        )
    ]
    uncolored = next(k for k in truths if k not in keys)
    _designers_color(db, data_dir, keys)
    source = study.ground_truth_source(db, "designers")
    assert source.get(db, uncolored) is None
    truth = source.get(db, keys[0])
    human = human_rows.read(db, human_rows.DESIGNERS, [keys[0]])[keys[0]]
    assert_allclose(truth.p, human.p, rtol=1e-12)
    assert truth.n_colorings == 3 and sorted(n for _, n in truth.dominant) == [1, 2]
    assert len(truth.colorings) == 3 and all((data_dir / p).is_file() for p in truth.colorings)
    study_id = study.create_study(db, "from colorings", sources(), source, seed=0, n_concepts=3)
    assert study.study_design(db, study_id)["concepts"] == sorted(keys)
    # Three colorings each: under the five a concept gets, and not under three.
    assert study.thin_ground_truths(db, study_id, 5) == [(key, 3) for key in sorted(keys)]
    assert study.thin_ground_truths(db, study_id, 3) == []
    with pytest.raises(InvalidInput, match="only 3 concepts have a ground truth"):
        study.create_study(db, "too many", sources(), source, seed=0, n_concepts=4)


def test_a_metric_undefined_on_most_pairs_is_validated_on_the_rest(setup):
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, n_concepts=10, trials_per_participant=100)
    rng = np.random.default_rng(4)
    _judge_all(db, _participants(db, 6), lambda t: ("left", "right")[rng.integers(2)], rng)
    votes, values = judging.votes_frame(db, study_id), judging.study_metrics(db, study_id)
    concepts = sorted(values["concept"].unique())
    hue = pd.Series(np.arange(len(values), dtype=float), index=values.index)
    partly = values.assign(hue_diff=hue.where(values["concept"].isin(concepts[:4])))
    result = analyse(votes, partly, rng=np.random.default_rng(0), n_boot=20)["validation"]
    assert result.set_index("metric").loc["hue_diff", "n_pairs"] == 12
    assert result.set_index("metric").loc["emd", "n_pairs"] == 30
    partly_t3 = analyse(votes, partly, rng=np.random.default_rng(0), n_boot=20)["table3"].set_index("Metric")
    assert partly_t3.loc["ΔHue", "Note"] == (
        "18 of 30 pairs left out (ΔHue is undefined where a dominant color is grey)."
    )
    one_pair = (values["concept"] == concepts[0]) & (values["model"] != "sdxl")
    tables = analyse(
        votes, values.assign(hue_diff=hue.where(one_pair)), rng=np.random.default_rng(0), n_boot=20
    )
    row = tables["validation"].set_index("metric").loc["hue_diff"]
    assert row["n_pairs"] == 1 and np.isnan(row["pearson"]) and np.isnan(row["agreement"])
    assert tables["table3"]["Metric"].tolist() == ["PCC", "EMD", "ED", "DCA", "ΔHue"]
    hue_row = tables["table3"].set_index("Metric").loc["ΔHue"]
    assert (hue_row["Pairs"], hue_row["Undefined pairs"]) == (1, 29)
    assert hue_row["Note"] == (
        "Blank: defined on 1 of 30 pairs, at least 2 needed "
        "(ΔHue is undefined where a dominant color is grey)."
    )
    assert (tables["table3"].set_index("Metric").loc[["PCC", "EMD", "ED", "DCA"], "Note"] == "").all()


def test_a_study_with_one_model_says_to_run_a_second_and_stores_nothing(db, tmp_path):
    truths, _ = populate(db, tmp_path / "data", 6, np.random.default_rng(0), models=("tiny-random",))
    before = _dump(db)
    with pytest.raises(InvalidInput) as refused:
        study.create_study(
            db,
            "s",
            [ModelSource("tiny-random", RUN, CFG)] * 2,
            truth_source(tmp_path / "data", truths),
            seed=0,
            n_concepts=4,
        )
    assert str(refused.value) == (
        "Model outputs (`sources`): choose two or more, each from a different model (a study compares "
        "models); chosen: tiny-random, tiny-random. Only one model (tiny-random) has clip-art cartoon "
        "outputs: run a second model (e.g. tiny-random-b) on the same concepts on the Evaluate tab first."
    )
    assert _dump(db) == before
    assert study.source_advice(db, "natural") == (
        "No model has natural photo outputs yet: run two models on the same concepts on the Evaluate "
        "tab first (offline: tiny-random and tiny-random-b)."
    )
    assert study.source_advice(db, "clipart").startswith("Only one model (tiny-random)")


def test_the_default_outputs_are_one_per_model_and_the_style_is_one_with_outputs(setup):
    db, _, _ = setup
    # A second scale of one model: still one output per model, the one with the most concepts.
    for key in ("apple", "banana"):
        runs.store_model_distribution(db, RUN, "sana", key, "clipart", 9.0, np.full(71, 1 / 71), 2, 0)
    offered = study.available_sources(db, "clipart")
    assert len(offered) == len(MODELS) + 1
    assert study.default_sources(offered) == sources()
    assert study.default_sources(offered, 2) == sources()[:2]
    # Every output is clip-art: asked for natural (none), the style with outputs is clip-art.
    assert study.style_with_outputs(db, "natural") == "clipart"
    assert study.style_with_outputs(db, "clipart") == "clipart"
    # No style (a request past the page) is refused by name, not a KeyError (outside probe 191).
    with pytest.raises(InvalidInput, match=r"^`style` must be one of \('natural', 'clipart'\), got None$"):
        study.style_with_outputs(db, None)


def test_the_default_output_per_model_covers_the_most_concepts_and_among_equals_the_newest_run(
    readme_runs,
):
    db, _, older, newer = readme_runs
    offered = study.available_sources(db, "natural")
    assert offered == [(older[0], 3), (newer[0], 4), (older[1], 3), (newer[1], 4)]
    assert study.default_sources(offered) == newer
    # A rerun with as many concepts: the newest run, by when it was made (not by its name).
    rerun = add_run(db, "a-rerun", TINY, [*FRUIT, "carrot"], seed=2)
    offered = study.available_sources(db, "natural")
    assert [source for source, _ in offered] == [older[0], newer[0], rerun[0], older[1], newer[1], rerun[1]]
    assert study.default_sources(offered) == rerun
    later = add_run(db, "eval-20261127-100000", TINY, [*FRUIT, "carrot"], seed=3)
    assert study.default_sources(study.available_sources(db, "natural")) == later
    # Counted over the concepts a ground truth covers: the first five minutes' run with carrot
    # (which no designer colored) is not preferred to the pilot's just made (outside probe 127).
    pilot = add_run(db, "pilot", TINY, FRUIT, seed=4)
    fruit = set(FRUIT)
    assert study.available_sources(db, "natural", fruit)[-1] == (pilot[1], 3)
    assert study.default_sources(study.available_sources(db, "natural", fruit)) == pilot
    assert study.default_sources(study.available_sources(db, "natural")) == later


def test_too_few_concepts_names_the_ground_truth_and_the_outputs_that_give_more(readme_runs):
    db, _, older, newer = readme_runs
    designers = study.ground_truth_source(db, "designers")
    before = _dump(db)
    refusals = []
    for chosen in (older, newer, [older[0], newer[1]]):
        with pytest.raises(InvalidInput) as refused:
            study.create_study(db, "s", chosen, designers, seed=0, n_concepts=4, style="natural")
        refusals.append(str(refused.value))
    assert _dump(db) == before
    head = "Concepts (`n_concepts`): only 3 concepts have a ground truth (designers) and all chosen Model outputs "
    assert refusals == [
        head + "(which share 3); got n_concepts=4. Model outputs of run eval-20261127-093353 "
        "(CFG 7.5) share 4: 3 with designers, 4 with Ground truth uw71-ratings. "
        "Or set Concepts to 3 or fewer.",
        head + "(which share 4); got n_concepts=4. Ground truth uw71-ratings would give 4. "
        "Or set Concepts to 3 or fewer.",
        head + "(which share 3); got n_concepts=4. Model outputs tiny-random · "
        "eval-20261127-093353 · CFG 7.5 share 4: 3 with designers, 4 with Ground truth "
        "uw71-ratings. Or set Concepts to 3 or fewer.",
    ]
    assert all(len(message) < 300 for message in refusals)
    # What the first refusal names gives the study.
    uw71 = study.ground_truth_source(db, "uw71-ratings")
    study_id = study.create_study(db, "s", newer, uw71, seed=0, n_concepts=4, style="natural")
    assert study.study_design(db, study_id)["concepts"] == ["apple", "banana", "carrot", "lemon"]
    # Nothing gives more: the refusal says what is left to do, as before.
    with pytest.raises(InvalidInput) as refused:
        study.create_study(db, "s2", newer, uw71, seed=0, n_concepts=5, style="natural")
    assert str(refused.value) == (
        "Concepts (`n_concepts`): only 4 concepts have a ground truth (uw71-ratings) and all chosen "
        "Model outputs (which share 4); got n_concepts=5. Set Concepts to 4 or "
        "fewer, or evaluate more concepts with these models."
    )


def test_a_design_smaller_than_asked_says_so_in_words(setup):
    db, data_dir, truths = setup
    small = study.create_study(
        db,
        "small",
        sources(MODELS[:2]),
        truth_source(data_dir, truths),
        seed=0,
        n_concepts=4,
        attention_rate=0.1,
        trials_per_participant=10,
    )
    design = study.study_design(db, small)
    assert (design["pairs"], design["attention_checks"]) == (4, 0)
    assert study.design_notes(design) == [
        "Each participant sees at most 4 trials, not the 10 asked for: 4 concepts × 2 models give 4 "
        "pairs, and no one judges a pair twice. More concepts or models give more.",
        "No attention check: 10% of 4 pairs rounds to none. Raise the attention-check share or the "
        "number of concepts to get one.",
    ]
    roomy = study.create_study(
        db,
        "roomy",
        sources(),
        truth_source(data_dir, truths),
        seed=0,
        n_concepts=20,
        trials_per_participant=10,
    )
    assert study.study_design(db, roomy)["attention_checks"] > 0
    assert study.design_notes(study.study_design(db, roomy)) == []


def test_a_trial_answered_after_its_study_closed_names_the_closed_study(setup):
    """It said the task "was already given back", a give-back the participant never made
    (outside probe 133)."""
    db, data_dir, truths = setup
    study_id = _study(db, data_dir, truths, name="pilot", seed=1, n_concepts=4, attention_rate=0.0)
    (person,) = _participants(db, 1)
    trial = judging.next_trial(db, person, np.random.default_rng(0), batch_size=1)
    study.close_study(db, study_id, ADMIN, "enough votes")
    before = db.execute("select count(*) from judgments").fetchone()[0]
    with pytest.raises(
        Conflict,
        match=r"^this study was closed by its organisers on .* UTC; this answer was not stored, and those "
        "you gave before are kept$",
    ):
        judging.record_judgment(db, person, trial.task_id, "left", 2.0)
    assert db.execute("select count(*) from judgments").fetchone()[0] == before


def test_a_closed_study_hands_its_trials_to_nobody_and_keeps_its_judgments(setup, capsys):
    """Outside probe 127: a finished study (the README's first five minutes) stayed in every
    later participant's queue, there being no way to close it."""
    db, data_dir, truths = setup
    old, new = (
        _study(db, data_dir, truths, name=name, seed=seed, n_concepts=4, attention_rate=0.0)
        for name, seed in (("first five minutes", 1), ("pilot", 2))
    )
    first, second = _participants(db, 2)
    rng = np.random.default_rng(5)
    assert judging.progress(db, first) == (0, 24)
    trial = judging.next_trial(db, first, rng, batch_size=2)
    judging.record_judgment(db, first, trial.task_id, "left", 2.5)
    held = db.execute(
        "select count(*) from tasks t join study_pairs p on p.id = t.pair_id where t.kind = 'judgment' "
        "and t.status = 'reserved' and p.study_id = ?",
        [old],
    ).fetchone()[0]
    draft = _study(db, data_dir, truths, name="draft", seed=3, n_concepts=4, open_it=False)
    with pytest.raises(Conflict, match="is a draft"):
        study.close_study(db, draft, ADMIN, "x")
    with pytest.raises(InvalidInput, match=r"^`votes_per_pair` must be at most 1000, got 1001$"):
        study.create_study(db, "many", sources(), truth_source(data_dir, truths), seed=0, votes_per_pair=1001)
    with pytest.raises(InvalidInput, match=r"^`votes_per_pair` must be at most 1000, got 1001$"):
        study.update_study(db, draft, ADMIN, votes_per_pair=1001)
    # Zero-width spaces show nothing too (`annotation.errors.blank`, which the check now uses)
    for blank, got in (("", "nothing"), ("  \n", "only spaces"), ("\u200b\u200b", "only spaces")):
        with pytest.raises(InvalidInput, match=rf"^`why` must say why the study is closed .*; got {got}$"):
            study.close_study(db, old, ADMIN, blank)
    assert study.close_study(db, old, ADMIN, "done with it") == held
    assert not db.execute(
        "select count(*) from tasks t join study_pairs p on p.id = t.pair_id where t.status = 'reserved' "
        "and p.study_id = ?",
        [old],
    ).fetchone()[0]
    with pytest.raises(Conflict, match=rf"^study {old} was closed on .* UTC already; nothing changed$"):
        study.close_study(db, old, ADMIN, "again")
    # A participant from an invite now judges the open study alone; the judgment given stays.
    assert judging.progress(db, second) == (0, 12)
    _judge_all(db, [second], lambda t: "left", rng)
    judged = {
        r[0]
        for r in db.execute(
            "select distinct p.study_id from judgments j join study_pairs p on p.id = j.pair_id where j.participant_id = ?",
            [second.annotator_id],
        )
    }
    assert judged == {new}
    assert (
        db.execute(
            "select count(*) from judgments where participant_id = ?", [first.annotator_id]
        ).fetchone()[0]
        == 1
    )
    assert [s["closed"] is not None for s in study.list_studies(db) if s["id"] in (old, new)] == [True, False]
    [row] = db.execute("select why, details from audit where action = 'close_study'").fetchall()
    assert row[0] == "done with it"
    # With an open study left nobody is told of the closed one; with none, of the last closed.
    assert judging.closed_for(db, second) is None
    study.close_study(db, new, ADMIN, "done too")
    in_new = (
        "select count(*) from judgments j join study_pairs p on p.id = j.pair_id where j.participant_id = ? "
        "and p.study_id = ?"
    )
    for person in (first, second):
        closed = judging.closed_for(db, person)
        done = db.execute(in_new, [person.annotator_id, new]).fetchone()[0]
        assert (closed["id"], closed["name"], closed["done"]) == (new, "pilot", done)
        assert closed["closed"] == study.closed_studies(db)[str(new)]["closed"]
    assert done > 0


def test_a_votes_time_is_counted_from_no_earlier_than_its_trial_was_first_shown(setup):
    """An API client sent the first trial's ``shown_at`` with the second trial's vote, and
    2.0 s were stored for a trial on screen 0.3 s (outside probe 198): the time was bounded
    only by when the batch was handed out."""
    db, data_dir, truths = setup
    _study(db, data_dir, truths, n_concepts=5)
    (actor,) = _participants(db, 1)
    t0 = utcnow()
    first = judging.next_trial(db, actor, np.random.default_rng(0), now=t0)
    at = t0 + dt.timedelta(seconds=1.7)
    judging.record_judgment(
        db, actor, first.task_id, "left", judging.seconds_on_trial(db, actor, first.task_id, iso(t0), now=at)
    )
    second = judging.next_trial(db, actor, np.random.default_rng(0), now=at)
    assert second.task_id != first.task_id
    # Shown again (a reload) later: it was first shown at `at`
    again = judging.next_trial(db, actor, np.random.default_rng(0), now=at + dt.timedelta(seconds=0.2))
    assert again.task_id == second.task_id
    later = at + dt.timedelta(seconds=0.3)
    assert judging.seconds_on_trial(db, actor, second.task_id, iso(t0), now=later) == pytest.approx(0.3)
    # A later shown_at (the page's own, given after the server's) still shortens it
    assert judging.seconds_on_trial(db, actor, second.task_id, iso(later), now=later) == 0.0
    assert judging.seconds_on_trial(db, actor, first.task_id, iso(t0), now=later) == pytest.approx(2.0)


def test_a_study_keeps_its_ground_truth_after_a_withdrawal_and_shows_none_of_the_withdrawn(db, tmp_path):
    """Outside probe 221: after *Withdraw their colorings*, an open study went on showing the
    withdrawn designer's apple to participants, and the withdrawal's message did not name the
    study, whose frozen ground truth still counts them (docs/security.md)."""
    from annotation.coloring.withdrawal import withdraw_colorings
    from tests.qc_data import add_coloring

    data = tmp_path / "data"
    truths, _ = populate(db, data, 2, np.random.default_rng(0))
    leaving, staying = (row["id"] for row, _ in create_annotators(db, 2, "designer"))
    made = {
        who: [add_coloring(db, data, who, key, rgb) for key in truths]
        for who, rgb in ((leaving, (200, 30, 30)), (staying, (30, 160, 40)))
    }
    kept = study.create_study(db, "kept", sources(), study.designers_ground_truth(), seed=1, n_concepts=2)
    study.open_study(db, kept, ADMIN)
    draft = study.create_study(db, "draft", sources(), study.designers_ground_truth(), seed=3, n_concepts=2)

    done = withdraw_colorings(db, leaving, ADMIN, "asked in person")

    assert [s["id"] for s in study.studies_holding(db, done.ids)] == [kept, draft]
    holding = study.studies_holding(db, made[staying])
    assert [(s["id"], s["name"], bool(s["frozen"])) for s in holding] == [
        (kept, "kept", True),
        (draft, "draft", False),
    ]
    # A draft made on them is not opened (outside probe 223: it went live on them, unsaid).
    before = list(db.conn.iterdump())
    with pytest.raises(
        Conflict,
        match=r"^study 'draft' was made from the designers' colorings, and 2 of the colorings its ground truth "
        r"counts were withdrawn since \(their designers asked\): make the draft again",
    ):
        study.open_study(db, draft, ADMIN)
    assert list(db.conn.iterdump()) == before
    withdrawn = {db["colorings"].get(i)["image_path"] for i in made[leaving]}
    standing = {db["colorings"].get(i)["image_path"] for i in made[staying]}
    [(row, _)] = create_annotators(db, 1, "participant")
    person = Actor(row["id"], row["pseudonym"], frozenset({"participant"}))
    judging.set_background(db, person, True)
    shown = judging.next_trial(db, person, np.random.default_rng(0))
    assert shown.truth.n_colorings == 2  # the ground truth it was made with
    assert shown.truth.colorings and set(shown.truth.colorings) <= standing
    assert not set(shown.truth.colorings) & withdrawn
    # A study made after the withdrawal does not hold them; a closed one is not named.
    after = study.create_study(db, "after", sources(), study.designers_ground_truth(), seed=2, n_concepts=2)
    assert [s["id"] for s in study.studies_holding(db, made[staying])] == [kept, draft, after]
    assert [s["id"] for s in study.studies_holding(db, done.ids)] == [kept, draft]
    study.open_study(db, after, ADMIN)
    study.close_study(db, kept, ADMIN, "a new one without them")
    assert [s["id"] for s in study.studies_holding(db, done.ids)] == [draft]
