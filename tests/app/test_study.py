"""The Study tab against a real launched app: set-up, freeze, analysis, role checks."""

import json
import re
from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd
import pytest
from gradio_client.exceptions import AppError

from annotation.errors import InvalidInput
from annotation.people.accounts import Actor, create_annotators, login_with_invite
from annotation.study import judging
from annotation.study.design import DEFAULT_MODELS, ModelSource
from app.common import AppContext
from evaluation.concepts import load_concepts
from storage import ensure_schema, open_db
from storage import human as human_rows
from tests.annotation.study.test_study import add_run
from tests.app.test_admin import _dump
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.study_data import CFG, MODELS, RUN, populate

TRUTH = "test-truth"


def _prepare(config):
    """Model outputs for 12 concepts and a reference ground truth for 10 of them."""
    db = open_db(config.db_path)
    try:
        ensure_schema(db)
        truths, _ = populate(db, config.data_dir, 12, np.random.default_rng(0))
        human_rows.store_reference(db, "test-truth", dict(list(truths.items())[:10]), "synthetic, for tests")
    finally:
        db.close()


def _tokens(client, roles):
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    tokens = {"admin": admin}
    for role in roles:
        link = client.predict(admin, role, 1, "yes", 7, api_name="/admin_create_invites")
        tokens[role] = client.predict(link["data"][0][3], api_name="/login_invite")[0]
    return tokens


def _choices(client, token):
    """The ground truth and model outputs the set-up form preselects (its updates' values)."""
    truth, sources, note = client.predict(token, "clipart", None, [], api_name="/study_choices")
    assert [value for _, value in truth["choices"]] == ["designers", TRUTH, "uw71-ratings"]
    # No designer has colored the evaluated concepts: the reference set covering most of them.
    assert truth["value"] == TRUTH
    assert note.startswith("No designer coloring of &#x27;bear&#x27;, &#x27;bird&#x27;,")
    assert [label for label, _ in sources["choices"]] == [
        f"{m} · {RUN} · CFG {CFG:g} (12 concepts)" for m in MODELS
    ]
    return TRUTH, sources["value"]


def test_a_study_whose_ground_truth_rests_on_few_colorings_says_so_when_made(study_tab):
    """After an expert's recolor requests, a concept's trials rested on one coloring, which
    only the participants' page said ("ground truth from 1 coloring": outside probe 157)."""
    from app.study import LISTED, OFFER
    from tests.qc_data import add_coloring

    tab, token = study_tab
    with tab.ctx.db() as db:
        keys = [
            r["concept"]
            for r in db.query("select distinct concept from model_distributions order by concept")
        ]
        designers = [a["id"] for a, _ in create_annotators(db, 2, "designer")]
        for key, n in zip(keys[:2], (1, 2)):
            for designer in designers[:n]:
                add_coloring(db, tab.ctx.config.data_dir, designer, key, (200, 30, 40))
    _, sources, _, _ = _updates(tab, tab.choices(token, "clipart", "designers", None), OFFER)
    _, _, message = _updates(
        tab, tab.create(token, "thin", "designers", "clipart", sources.value[:2], 2, 1, 0, 2, 0), LISTED
    )
    k = tab.ctx.config.colorings_per_concept
    assert message.endswith(
        f"⚠️ The ground truth of 2 concepts rests on fewer than the {k} colorings each concept gets: "
        f"{keys[0]} (1 coloring), {keys[1]} (2 colorings). Colorings waiting for a recolor, or excluded, "
        "do not count, and a study keeps the ground truth it was made with: for one on more colorings, "
        "make the study again once they are in."
    )
    # A withdrawal of a designer's colorings names the study whose ground truth counts them,
    # which a study keeps (outside probe 221: the message left it unsaid).
    from annotation.people.passwords import login_admin
    from app.admin import AdminTab

    with tab.ctx.db() as db:
        admin = login_admin(db, ADMIN_PASSWORD).token
        [study_id] = [r["id"] for r in db.query("select id from studies where name = 'thin'")]
    admin_tab = AdminTab(tab.ctx, {"revoke_message": gr.Markdown()})
    [said] = admin_tab.withdraw(admin, designers[0], "asked in person").values()
    assert said.endswith(
        f"their account stays open (close it too if they leave the study). Study {study_id} (thin, a draft) "
        "keeps the ground truth it was made with, which counts them (its trials no longer show their "
        "pictures): close it and set up a new one if they must go from it too."
    ), said


def _vote_everything(config, seed=0):
    """Seven participants judge every pair through the library, on the app's database."""
    from annotation.people.accounts import create_annotators

    db = open_db(config.db_path)
    rng = np.random.default_rng(seed)
    try:
        for row, _ in create_annotators(db, 7, "participant", design_background=True):
            actor = Actor(row["id"], row["pseudonym"], frozenset({"participant"}))
            while (trial := judging.next_trial(db, actor, rng)) is not None:
                side = "left" if rng.random() < 0.5 else "right"
                judging.record_judgment(db, actor, trial.task_id, side, 3.0)
    finally:
        db.close()


def test_researcher_sets_up_opens_and_analyses_a_study(tmp_path):
    config = make_config(tmp_path)
    _prepare(config)
    with running_app(config) as (client, _):
        token = _tokens(client, ["researcher"])["researcher"]
        truth, chosen = _choices(client, token)
        assert truth == TRUTH
        assert [json.loads(key) for key in chosen] == [{"model": m, "run": RUN, "cfg": CFG} for m in MODELS]
        with pytest.raises(AppError, match="only 10 concepts have a ground truth"):
            client.predict(
                token, "pilot", truth, "clipart", chosen, 11, 6, 0.1, 75, 0, api_name="/study_create"
            )
        # An output typed as the box lists it counts as picked (outside probe 189: it was
        # refused as "not a model source key"); one the box does not list is named.
        with pytest.raises(
            AppError, match=r"^`sources`: 'nope' is none of the model outputs of this style; pick"
        ):
            client.predict(
                token,
                "pilot",
                truth,
                "clipart",
                [chosen[0], "nope"],
                8,
                6,
                0.1,
                75,
                0,
                api_name="/study_create",
            )
        typed = [f"{m.upper()}  ·  {RUN} · CFG {CFG:g}" for m in MODELS]
        table, design, message = client.predict(
            token, "pilot", truth, "clipart", typed, 8, 6, 0.1, 75, 0, api_name="/study_create"
        )
        assert "Draft study 1 stored" in message
        assert (design["n_concepts"], design["pairs"], design["attention_checks"]) == (8, 24, 3)
        assert [row[:5] for row in table["data"]] == [[1, "pilot", "draft", 24, 3]]
        table, design, message = client.predict(token, 1, api_name="/study_open")
        assert design["frozen"] and table["data"][0][2] == "open"
        with pytest.raises(AppError, match="its design is frozen"):
            client.predict(token, 1, api_name="/study_open")
        _vote_everything(config)
        table = client.predict(token, api_name="/study_list")
        # Votes over the 24 study pairs alone: the 3 attention checks' answers are no votes.
        assert table["data"][0][3:8] == [24, 3, 144, 144, 24]
        table3, figure, bt, participants, pairs, files, note = client.predict(
            token, 1, False, 100, 0, api_name="/study_analyse"
        )
    # What the numbers are, beside the action (outside probe 90: nothing said it).
    assert "95% bootstrap percentile intervals from 100 resamples of the pairs, seed 0." in note
    assert "Agreement is the share of pairs where the metric picks the model most votes went to" in note
    flagged = sum(row[participants["headers"].index("flagged")] for row in participants["data"])
    assert "natural-log strengths" in note and f"attention check: {flagged}, counted." in note
    assert [row[:2] for row in table3["data"]] == [
        ["Probabilistic", "PCC"],
        ["Probabilistic", "EMD"],
        ["Probabilistic", "ED"],
        ["Deterministic", "DCA"],
        ["Deterministic", "ΔHue"],
    ]
    assert {row[0] for row in bt["data"]} == {"all", "design"}
    assert len(pairs["data"]) == 24 and len(participants["data"]) == 6
    assert figure["type"] == "plotly"
    by_name = {Path(f).name: Path(f) for f in files}
    assert set(by_name) == {
        "table3.csv",
        "validation.csv",
        "pairs.csv",
        "bradley_terry.csv",
        "participants.csv",
        "votes.csv",
        "metrics.csv",
        "design.json",
    }
    downloaded = pd.read_csv(by_name["table3.csv"])
    for name in ("table3.csv", "validation.csv", "bradley_terry.csv"):
        stated = pd.read_csv(by_name[name])
        assert (set(stated["ci"]), set(stated["n_resamples"]), set(stated["seed"])) == ({0.95}, {100}, {0})
    assert downloaded["Metric"].tolist() == [row[1] for row in table3["data"]]
    np.testing.assert_allclose(downloaded["Pearson"], [row[2] for row in table3["data"]], atol=1e-4)
    # The 144 votes and each participant's attention-check answers (a check takes any number).
    votes = pd.read_csv(by_name["votes.csv"])
    assert (~votes["attention_check"]).sum() == 144
    assert (votes[votes["attention_check"]].groupby("participant_id").size() >= 1).sum() == 6


def test_study_and_participant_endpoints_refuse_other_roles_and_write_nothing(tmp_path):
    config = make_config(tmp_path)
    _prepare(config)
    with running_app(config) as (client, _):
        tokens = _tokens(client, ["designer", "expert", "participant", "researcher"])
        truth, chosen = _choices(client, tokens["admin"])
        client.predict(
            tokens["admin"], "pilot", truth, "clipart", chosen, 4, 6, 0.1, 75, 0, api_name="/study_create"
        )
        endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
        study_calls = {name: info for name, info in endpoints.items() if name.startswith("/study_")}
        participant_calls = {
            name: info for name, info in endpoints.items() if name.startswith("/participant_")
        }
        assert set(study_calls) == {
            "/study_choices",
            "/study_create",
            "/study_list",
            "/study_design",
            "/study_open",
            "/study_analyse",
        }
        assert set(participant_calls) == {
            "/participant_consent",
            "/participant_next",
            "/participant_set_background",
            "/participant_vote",
        }
        inputs = {
            "/study_create": ["x", truth, "clipart", chosen, 4, 6, 0.1, 75, 0],
            "/study_open": [1],
            "/study_design": [1],
            "/study_analyse": [1, False, 10, 0],
            "/study_choices": ["clipart", None, []],
            "/participant_set_background": ["yes"],
            "/participant_consent": [True],
            "/participant_vote": [1, "left", "2025-01-01T00:00:00.000000Z"],
        }
        before = _dump(config)
        refused = {
            "/study_": ("designer", "expert", "participant"),
            "/participant_": ("designer", "expert", "researcher", "admin"),
        }
        for prefix, roles in refused.items():
            for name in (n for n in endpoints if n.startswith(prefix)):
                for who in (*roles, "nobody"):
                    with pytest.raises(AppError, match="needs the role|not signed in"):
                        client.predict(tokens.get(who, ""), *inputs.get(name, []), api_name=name)
        assert _dump(config) == before


@pytest.fixture
def study_tab(tmp_path):
    """The Study tab (its parts laid out, no server) on the database of `_prepare`, and a
    researcher's session token."""
    from app.study import StudyTab, _layout

    config = make_config(tmp_path)
    _prepare(config)
    ctx = AppContext.prepare(config)
    with ctx.db() as db:
        [(_, invite)] = create_annotators(db, 1, "researcher")
        token = login_with_invite(db, invite).token
    with gr.Blocks():
        parts = {"session_token": gr.Textbox(), **_layout()}
    return StudyTab(ctx, parts), token


def _updates(tab, updates: dict, names: tuple[str, ...]) -> tuple:
    """The updates of the parts `names`, in that order; they must be all `updates` holds."""
    assert set(updates) == {tab.parts[name] for name in names}
    return tuple(updates[tab.parts[name]] for name in names)


def _refusal(call, *args) -> gr.Error:
    """What the tab shows when `call(*args)` is refused (the error behind it is its cause)."""
    with pytest.raises(gr.Error) as raised:
        call(*args)
    return raised.value


def test_choices_offered_on_opening_keep_what_the_person_chose_while_it_is_offered(study_tab):
    from app.study import OFFER

    tab, token = study_tab
    truth, sources, _, preselected = _updates(tab, tab.choices(token, "clipart", None, None), OFFER)
    offered = [key for _, key in sources.choices]
    assert len(offered) == len(MODELS) and sources.value == offered[:DEFAULT_MODELS] == preselected
    assert truth.value == TRUTH  # the source that covers the evaluated concepts
    # Chosen before (the tab reopened, Load choices pressed): kept; one no longer offered
    # is dropped.
    chosen = [offered[2], offered[0], "gone · run · CFG 1"]
    truth, sources, _, preselected = _updates(
        tab, tab.choices(token, "clipart", "designers", chosen, offered[:DEFAULT_MODELS]), OFFER
    )
    assert truth.value == "designers" and sources.value == [offered[2], offered[0]] and preselected == []
    # One output is no study: one per model is offered instead.
    _, sources, _, _ = _updates(tab, tab.choices(token, "clipart", "designers", [offered[2]]), OFFER)
    assert sources.value == offered[:DEFAULT_MODELS]
    truth, _, _, _ = _updates(tab, tab.choices(token, "clipart", "deleted-truth", []), OFFER)
    assert truth.value == TRUTH
    # Opening the tab on a style without outputs moves to the one with them, and says so.
    on_open = ("style", *OFFER)
    style, truth, sources, note, _ = _updates(tab, tab.choices_on_open(token, "natural", None, None), on_open)
    assert style.value == "clipart" and sources.value == offered[:DEFAULT_MODELS]
    assert note.startswith(
        "Style: clip-art cartoon, where model outputs are (there are fewer in natural photo)."
    )
    style, *_ = _updates(tab, tab.choices_on_open(token, "clipart", TRUTH, offered[:2]), on_open)
    assert style.value == "clipart"
    _, _, note, _ = _updates(tab, tab.choices(token, "natural", TRUTH, []), OFFER)
    assert note == (
        "No model has natural photo outputs yet: run two models on the same concepts on the "
        "Evaluate tab first (offline: tiny-random and tiny-random-b)."
    )


def test_load_choices_moves_preselected_outputs_to_a_larger_newer_run_and_keeps_chosen_ones(study_tab):
    """The README run and a larger one after it: the outputs the tab preselected follow the
    newer run; outputs the person chose stay."""
    from app.study import OFFER

    tab, token = study_tab
    _, sources, _, preselected = _updates(tab, tab.choices(token, "clipart", TRUTH, []), OFFER)
    assert preselected == sources.value == [ModelSource(m, RUN, CFG).key for m in MODELS]
    with tab.ctx.db() as db:
        keys = [c.key for c in load_concepts()[:13]]  # those of the first run and one more
        newer = [s.key for s in add_run(db, "study-run-2", MODELS, keys, style="clipart", cfg=CFG)]
    # Load choices with the preselection untouched: the run covering more concepts.
    _, sources, _, preselected = _updates(
        tab, tab.choices(token, "clipart", TRUTH, preselected, preselected), OFFER
    )
    assert sources.value == preselected == newer
    assert [label for label, _ in sources.choices] == [
        f"{m} · {run} · CFG {CFG:g} ({n} concepts)"
        for m in MODELS
        for run, n in ((RUN, 12), ("study-run-2", 13))
    ]
    # The same outputs chosen by the person (the preselection was another): kept.
    older = [ModelSource(m, RUN, CFG).key for m in MODELS]
    _, sources, _, preselected = _updates(tab, tab.choices(token, "clipart", TRUTH, older, newer), OFFER)
    assert sources.value == older and preselected == []


def test_a_one_model_study_and_a_small_design_are_explained_in_words(study_tab):
    from app.study import LISTED, OFFER

    tab, token = study_tab
    _, sources, _, _ = _updates(tab, tab.choices(token, "clipart", TRUTH, None), OFFER)
    refused = _refusal(tab.create, token, "s", TRUTH, "clipart", sources.value[:1], 4, 6, 0.1, 10, 0)
    assert isinstance(refused.__cause__, InvalidInput)
    assert re.search(r"choose two or more, each from a different model", refused.message)
    # Fields are named by their labels on the form.
    refused = _refusal(tab.create, token, "s", TRUTH, "clipart", sources.value[:2], 2.5, 6, 0.1, 10, 0)
    assert isinstance(refused.__cause__, ValueError)
    assert re.fullmatch(r"`Concepts` must be a whole number, got 2\.5", refused.message)
    refused = _refusal(tab.create, token, "s", TRUTH, "clipart", sources.value[:2], 4, 6, 0.1, None, 0)
    assert isinstance(refused.__cause__, ValueError)
    assert re.fullmatch(
        r"`Trials per participant` must be a whole number, got nothing \(an empty box, or a number too large to hold\)",
        refused.message,
    )
    _, _, message = _updates(
        tab, tab.create(token, "small", TRUTH, "clipart", sources.value[:2], 4, 6, 0.1, 10, 0), LISTED
    )
    assert message == (
        "Draft study 1 stored: 4 pairs and 0 attention checks. Open it to start the trials.  \n"
        "⚠️ Each participant sees at most 4 trials, not the 10 asked for: 4 concepts × 2 models give 4 "
        "pairs, and no one judges a pair twice. More concepts or models give more.  \n"
        "⚠️ No attention check: 10% of 4 pairs rounds to none. Raise the attention-check share or the "
        "number of concepts to get one."
    )
