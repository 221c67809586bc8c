"""The load generator's light clients (`bench.designer_client`): `HttpClient` answers as
`gradio_client` does, prepared canvas values are distinct and handed out once, and a burst
of light clients stores every submission once."""

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from gradio_client.exceptions import AppError

from annotation.coloring.fill import parse_canvas_value
from app.config import AppConfig
from bench.app_process import AppProcess
from bench.bench_load import light_during_burst, light_markdown, prepare_study, prepare_values
from bench.designer_client import VIEW, HttpClient, PreparedValues, SketchLayers, layer_counts, new_client


def test_the_http_client_answers_as_gradio_client_does_and_raises_app_error_on_a_refusal(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 1, 1, side=128)
    [(_, invite)] = study.designers
    with AppProcess(study.db_path, study.data_dir, log_path=tmp_path / "app.log") as app:
        slow, light = new_client(app.url), HttpClient(app.url)
        signed = slow.predict(invite, api_name="/login_invite")
        token, message = light.predict(invite, api_name="/login_invite")
        assert type(signed) is tuple and signed[1] == message == "Signed in as **D0001**."

        def same_state() -> dict:
            answers = [c.predict(token, api_name="/designer_state") for c in (slow, light)]
            assert answers[0] == answers[1]
            return dict(zip(VIEW, answers[1]))

        # Each step by one client, and the view it leads to read by both.
        assert len(light.predict(token, True, api_name="/designer_consent")) == len(VIEW)
        same_state()
        slow.predict(token, api_name="/designer_instructions_read")
        task = json.loads(same_state()["task"])
        layers = SketchLayers(study.db_path, study.data_dir)
        value = layers.value(task["canvas_key"], task["sketch_id"], np.random.default_rng(0), 30.0)
        assert "(#1)" in dict(zip(VIEW, light.predict(token, value, api_name="/designer_submit")))["message"]
        same_state()
        refusals = []
        for client in (slow, light):
            with pytest.raises(AppError) as refused:
                client.predict(token, value, api_name="/designer_submit")
            refusals.append(str(refused.value))
        assert (
            refusals
            == [
                "this concept was already submitted (in another tab or window, say); that coloring "
                "is kept and nothing changed: reload the page for your next concept"
            ]
            * 2
        )


def test_prepared_values_are_distinct_each_handed_out_once_and_running_out_is_counted(tmp_path):
    study = prepare_study(tmp_path / "s.sqlite", tmp_path / "data", 2, 1, side=64)
    counts = layer_counts(study.db_path, 2, study.k, AppConfig().practice_concepts)
    assert sum(counts.values()) == study.k * len(study.concepts) + 2 * 3  # K per concept, 3 practice each
    assert prepare_values(study).prepared == sum(counts.values())
    sketch = min(counts)
    layers = SketchLayers(study.db_path, study.data_dir)
    prepared = layers.prepare({sketch: 6}, seed=1)
    shares = prepared.share_out([2, 1])
    assert [len(s[sketch]) for s in shares] == [4, 2] and prepared.take(sketch) is None
    layers = SketchLayers(study.db_path, study.data_dir, PreparedValues(shares[0]))
    rng = np.random.default_rng(0)
    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(lambda i: layers.value(f"key{i}", sketch, rng, 1.0), range(6)))
    urls = [json.loads(t)["color_layer"] for t in texts]
    assert len(set(urls)) == 6 and set(urls) > set(shares[0][sketch]), "4 prepared, then 2 encoded"
    assert layers.prepared.fallbacks == 2 and not set(urls) & set(shares[1][sketch])
    shape = layers.regions(sketch)[0].shape
    assert all(parse_canvas_value(t, shape).task_id == f"key{i}" for i, t in enumerate(texts))


def test_a_tiny_burst_of_light_clients_in_client_processes_passes_the_store_checks():
    figures = light_during_burst(
        designers=3, submissions=2, side=128, client_processes=2, transport="http", prepared=True
    )
    assert figures["light_problems"] == []
    assert figures["light_stored"] == 3 * 2 and figures["light_practice_stored"] == 3 * 3
    assert figures["light_client_transport"] == "http" and figures["light_values_prepared"] > 0
    assert "`bench.designer_client.HttpClient`" in light_markdown({"pool": figures})
