"""The app's one random generator (`app.common.AppContext.rng`, seeded from `AppConfig.seed`):
the same seed over two copies of one database replays the same draws (issue 29, item 8)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from annotation.qc.review import open_reviews
from annotation.study import design as study
from annotation.study import judging
from app import designer, expert, participant
from app.common import AppContext
from app.config import ENV_SEED, AppConfig
from tests.app_server import app_script, make_config
from tests.qc_data import ADMIN, actor, add_coloring, people
from tests.study_data import populate, sources, truth_source

# More colorings under review than an expert holds at once (`annotation.qc.votes.REVIEW_BATCH`),
# so which ones the expert gets is a draw.
REVIEWED = 24
KINDS = ("coloring", "review", "judgment")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """A prepared app folder (database and files) with a designer in the main task, an
    expert facing 24 open reviews and a participant of an open pairwise study; the folder
    and those three annotator ids."""
    folder = tmp_path_factory.mktemp("template")
    ctx = AppContext.prepare(make_config(folder))
    data_dir = ctx.config.data_dir
    with ctx.db() as db:
        (designer_id,) = people(db, 1, "designer")
        (expert_id,) = people(db, 1, "expert")
        colorists = people(db, REVIEWED, "designer")
        concepts = [row["key"] for row in db["concepts"].rows][:REVIEWED]
        colorings = [
            add_coloring(db, data_dir, d, concept, (20 + 9 * i, 90, 160))
            for i, (d, concept) in enumerate(zip(colorists, concepts))
        ]
        open_reviews(db, ADMIN, colorings, reason="replay test")
        truths, _ = populate(db, data_dir, 12, np.random.default_rng(0))
        study_id = study.create_study(
            db, "replay", sources(), truth_source(data_dir, truths), seed=1, n_concepts=10
        )
        study.open_study(db, study_id, ADMIN)
        (participant_id,) = people(db, 1, "participant")
        judging.set_background(db, actor(db, participant_id), True)
    ids = {"designer": designer_id, "expert": expert_id, "participant": participant_id}
    return folder, ids


def _draws(template, folder: Path, seed: int | None) -> dict[str, list[tuple]]:
    """Copy the template to `folder`, prepare an app with `seed` on it and call, in this
    order, the designer's batch start, the expert's next review and the participant's next
    trial; the tasks each reserved (concept, coloring, pair and left/right placement), in
    reservation order."""
    source, ids = template
    shutil.copytree(source, folder)
    ctx = AppContext.prepare(make_config(folder, seed=seed))
    with ctx.db() as db:
        designer._start_batch(ctx, db, actor(db, ids["designer"]))
        task_id = expert._next_review(ctx, db, actor(db, ids["expert"]))["task"]
        assert task_id is not None
        # The tab's parts named by their names: its views come back keyed by name.
        judge = participant.ParticipantTab(ctx, {name: name for name in participant.WITH_CONSENT})
        trial = judge._page(db, actor(db, ids["participant"]))
        assert trial["progress"].startswith("**Trial 1 of")
        rows = db.execute(
            "select kind, annotator_id, concept_key, coloring_id, pair_id, left_item from tasks "
            "where status = 'reserved' order by id"
        ).fetchall()
    return {kind: [row[1:] for row in rows if row[0] == kind] for kind in KINDS}


def test_the_same_seed_replays_assignments_vote_queues_and_trials_and_another_seed_does_not(
    template, tmp_path
):
    first = _draws(template, tmp_path / "first", seed=7)
    again = _draws(template, tmp_path / "again", seed=7)
    other = _draws(template, tmp_path / "other", seed=8)
    assert [len(first[kind]) for kind in KINDS] == [3, 10, judging.BATCH_SIZE]
    assert again == first
    for kind in KINDS:
        assert other[kind] != first[kind], kind


def test_the_context_draws_from_one_generator_made_from_the_configured_seed(tmp_path):
    ctx = AppContext.prepare(make_config(tmp_path, seed=123))
    assert ctx.rng is ctx.rng
    np.testing.assert_array_equal(
        ctx.rng.integers(0, 2**32, 8), np.random.default_rng(123).integers(0, 2**32, 8)
    )


@pytest.mark.parametrize("text", ["abc", "-1", "1.5", "1e3", "٣"])
def test_a_seed_in_the_environment_that_is_not_a_whole_number_is_refused_naming_it(monkeypatch, text):
    monkeypatch.setenv(ENV_SEED, text)
    with pytest.raises(ValueError) as raised:
        AppConfig.from_env()
    assert str(raised.value) == f"`seed` (COLORCONCEPT_SEED) must be a whole number >= 0, got {text!r}"


def test_a_seed_in_the_environment_or_the_config_is_read_as_a_whole_number(monkeypatch):
    monkeypatch.delenv(ENV_SEED, raising=False)
    assert AppConfig.from_env().seed is None
    monkeypatch.setenv(ENV_SEED, " 42 ")
    assert AppConfig.from_env().seed == 42
    assert AppConfig.from_env(seed=5).seed == 5  # the flag wins over the environment
    for bad in (-1, 2.0, True, "3"):
        with pytest.raises(ValueError, match=r"^`seed` must be a whole number >= 0, got "):
            AppConfig(seed=bad)


def test_the_seed_flag_is_read_and_a_bad_one_is_refused_naming_the_flag(capsys):
    script = app_script()
    assert script.parse_args(["--seed", "9"]).seed == 9
    assert script.parse_args([]).seed is None
    with pytest.raises(SystemExit) as raised:
        script.parse_args(["--seed", "-3"])
    assert raised.value.code == 2
    assert "argument --seed: `seed` (--seed) must be a whole number >= 0, got '-3'" in capsys.readouterr().err


def test_a_bad_seed_in_the_environment_stops_the_start_with_its_message(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_SEED, "soon")
    script = app_script()
    with pytest.raises(SystemExit) as raised:
        script.main(["--db", str(tmp_path / "x.sqlite"), "--data-dir", str(tmp_path / "data")])
    assert (
        raised.value.code
        == "Refusing to start: `seed` (COLORCONCEPT_SEED) must be a whole number >= 0, got 'soon'."
    )
    assert list(tmp_path.iterdir()) == []
