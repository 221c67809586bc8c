"""A session keeps its state without Gradio's deep-link copy of every component (`app.session_state`)."""

import gradio as gr
import httpx
import pytest
from gradio.state_holder import SessionState
from gradio_client.exceptions import AppError

from app import session_state
from app.session_state import LeanSessionState
from bench.bench_session_start import call_ms
from tests.app_server import SessionClient, free_port, make_config, running_app


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    with running_app(make_config(tmp_path_factory.mktemp("sessions"))) as (client, demo):
        yield client, demo


def test_gradio_copies_every_component_per_session_and_the_lean_state_none(launched):
    _, demo = launched
    gradio, lean = SessionState(demo), LeanSessionState(demo)
    # Gradio's own still builds the copy: when this fails, Gradio stopped, and the patch can go.
    assert len(gradio.config_values) == len(demo.blocks) > 700
    assert lean.config_values == {} and list(lean.components) == []
    # Every other field, set by Gradio's own init.
    assert vars(lean).keys() - {"_shared"} == vars(gradio).keys()
    assert lean.blocks_config.blocks == gradio.blocks_config.blocks
    # The app's blocks, shared until the session's first update of a component: then its own.
    assert lean.blocks_config is demo.default_config
    key, block = next((k, b) for k, b in demo.blocks.items() if isinstance(b, gr.Textbox))
    updated = gr.Textbox(label="updated")
    lean[key] = updated
    assert lean.blocks_config is not demo.default_config and lean[key] is updated
    assert demo.default_config.blocks[key] is block and LeanSessionState(demo)[key] is block


def test_the_launched_app_makes_lean_sessions_and_refuses_deep_links(launched):
    client, demo = launched
    with pytest.raises(AppError, match="invite link is not valid"):  # a public call, refused
        client.predict("no-such-invite", api_name="/login_invite")
    before = len(demo.state_holder.session_data)
    wall_ms, cpu_ms = call_ms(client.src, 2)  # the bench's HTTP API calls: a new session each
    assert wall_ms > 0 and cpu_ms > 0
    sessions = list(demo.state_holder.session_data.values())
    assert len(sessions) == before + 2 and all(type(s) is LeanSessionState for s in sessions)
    # The copy's one reader: the guard refuses it (not on its allow-list), session or none.
    answer = httpx.get(f"{client.src}gradio_api/deep_link", params={"session_hash": client.session_hash})
    assert answer.status_code == 403


def test_state_values_and_component_updates_carry_from_event_to_event_of_a_session(tmp_path):
    """A bare Blocks with a `gr.State` counter and an update of a textbox's props: each
    session counts its own calls, and the updated props stay in that session."""
    session_state.install()
    with gr.Blocks() as demo:
        count = gr.State(0)
        shown = gr.Textbox(label="count")

        def step(n: int):
            return n + 1, gr.update(value=str(n + 1), label=f"count {n + 1}")

        gr.Button("step").click(step, count, [count, shown], api_name="step")
    # No start-up check of the page (3 s at most), as in `app.launch_options`.
    demo.launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        prevent_thread_lock=True,
        quiet=True,
        _frontend=False,
    )
    try:
        one, two = (SessionClient(demo.local_url, verbose=False) for _ in range(2))
        assert [one.predict(api_name="/step")["value"] for _ in range(3)] == ["1", "2", "3"]
        assert two.predict(api_name="/step")["value"] == "1"
        state = demo.state_holder[one.session_hash]
        assert type(state) is LeanSessionState
        assert state[count._id] == 3 and state[shown._id].label == "count 3"
    finally:
        demo.close()
