"""`app.tabs.SessionReactions`: every tab's reaction to a change of session is one event."""

import logging

import gradio as gr
import pytest

from annotation.people.passwords import login_admin
from app import build_app
from app.common import own_session, role, ui_only
from app.tabs import On, SessionReactions, Tab, wire_events
from evaluation.concepts import load_concepts
from tests.app_server import ADMIN_PASSWORD, make_config, session_event


@ui_only
def _as_tuple(token, extra):
    return f"first {token}", f"second {extra}"


@own_session
def _bare(token):
    return f"bare {token}"


@own_session
def _broken(token):
    raise KeyError("a bug in one tab")


@own_session
def _follow_up(token):
    return f"after {token}"


def _small_page():
    """A page with four reactions (one broken) and a follow-up; its parts by name."""
    with gr.Blocks() as demo:
        token = gr.Textbox(elem_id="session_token")
        extra = gr.Textbox("x")
        parts = {name: gr.Textbox() for name in ("named", "first", "second", "bare", "broken", "after")}

        @own_session
        def as_dict(token):
            return {parts["named"]: f"dict for {token}"}

        reactions = SessionReactions(token)
        reactions.change(as_dict, token, parts["named"])
        reactions.change(_as_tuple, [token, extra], [parts["first"], parts["second"]])
        reactions.change(_bare, token, parts["bare"]).then(_follow_up, token, parts["after"])
        reactions.change(_broken, token, parts["broken"])
        reactions.wire()
    return demo, token, extra, parts


def test_the_reactions_run_as_one_event_with_their_follow_ups_after_it(caplog):
    demo, token, extra, parts = _small_page()
    event = session_event(demo).block_fn
    assert event.inputs == [token, extra]
    assert event.outputs == [parts[n] for n in ("named", "first", "second", "bare", "broken")]
    with caplog.at_level(logging.ERROR, logger="app.tabs"):
        updates = event.fn("tok", "x")
    assert updates == {
        parts["named"]: "dict for tok",
        parts["first"]: "first tok",
        parts["second"]: "second x",
        parts["bare"]: "bare tok",
    }
    # The broken reaction is logged and leaves its own output alone; the rest still arrive.
    [record] = caplog.records
    assert "_broken failed" in record.getMessage() and record.exc_info[0] is KeyError
    [follow_up] = [fn for fn in demo.fns.values() if fn.fn is _follow_up]
    assert follow_up.trigger_after == event._id and follow_up.outputs == [parts["after"]]


@role("admin")
def _guarded(self, db, actor):
    return ""


def _unmarked(token):
    return ""


@pytest.mark.parametrize("fn", [_guarded, _unmarked], ids=["role", "unmarked"])
def test_a_reaction_that_could_refuse_or_says_nothing_of_access_is_refused(fn):
    with gr.Blocks():
        token = gr.Textbox()
        with pytest.raises(ValueError, match="own_session or ui_only"):
            SessionReactions(token).change(fn, token, gr.Textbox())


class _Refusing(Tab):
    @role("admin")
    def checked(self, db, actor):
        return {}


def test_an_event_that_checks_roles_without_a_note_is_refused_at_build():
    """Its refusal would raise, and Gradio would cover its outputs with an error sheet
    (the admin's invite CSV step did, after a sign-out in another tab)."""
    with gr.Blocks():
        parts = {"session_token": gr.Textbox(), "go": gr.Button(), "out": gr.Textbox(), "note": gr.Markdown()}
        tab = _Refusing(None, parts)
        with pytest.raises(
            ValueError, match=r"_Refusing.checked checks roles and can refuse: its event needs a `note`"
        ):
            wire_events(tab, (On("go.click", "checked", ("session_token",), ("out",)),))
        wire_events(tab, (On("go.click", "checked", ("session_token",), ("out",), "note"),))


def test_two_reactions_updating_one_part_or_a_late_one_are_refused():
    with gr.Blocks():
        token, shared = gr.Textbox(), gr.Textbox()
        reactions = SessionReactions(token)
        reactions.change(_bare, token, shared)
        reactions.change(_bare, token, shared)
        with pytest.raises(ValueError, match="update the same part"):
            reactions.wire()
        with pytest.raises(ValueError, match="before the app is wired"):
            reactions.change(_bare, token, gr.Textbox())


def test_the_app_answers_a_change_of_session_with_one_event_that_fills_every_tab(tmp_path):
    demo = build_app(make_config(tmp_path))
    try:
        react = session_event(demo)
        with demo.colorconcept_ctx.db() as db:
            token = login_admin(db, ADMIN_PASSWORD).token
        updates = react(token)
        by_id = {block.elem_id: update for block, update in updates.items()}
        # The admin sees every tab: each concept picker is filled from the one event, as is
        # each tab's own view (every output has its update).
        keys = sorted(concept.key for concept in load_concepts())
        for picker in ("browser_concept", "evaluate_concepts"):
            assert sorted(value for value, _ in by_id[picker].choices) == keys
            assert by_id[picker].interactive
        assert len(updates) == len(react.block_fn.outputs) > 40
    finally:
        demo.close()
