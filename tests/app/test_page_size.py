"""The page stays light at the full concept list's size (issue 28.1): concept choices reach
the page only after a researcher signs in, and the configuration carries no API schema the
page does not read. Sizes only, never times."""

from __future__ import annotations

import json

import httpx
import pytest

from evaluation.concepts import load_concepts
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import sign_in

# 1,475 kB / 1,004 kB before, ~950 kB / ~620 kB after (BENCHMARKS.md, "Page size"): either list
# of 1,278 concepts (~105 kB each) or the schema copies (~250 kB) coming back breaks these.
PAGE_BYTES, CONFIG_BYTES = 1_100_000, 750_000
# Issue 28's goal, not reached yet: the rest is the page's ~620 components and ~190 events.
GOAL_PAGE_BYTES, GOAL_CONFIG_BYTES = 300_000, 200_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A launched app at the shipped concept list's size: its client, Blocks, page and config."""
    config = make_config(tmp_path_factory.mktemp("page_size"))
    with running_app(config) as (client, demo):
        page = httpx.get(client.src, timeout=120).text
        configuration = httpx.get(f"{client.src}config", timeout=120).text
        yield client, demo, page, configuration


def _fill(demo, elem_id: str):
    [fn] = [f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == f"fill_{elem_id}"]
    return fn


def test_the_page_and_its_configuration_stay_under_their_bounds(served):
    _, _, page, configuration = served
    assert len(load_concepts()) == 1_278
    assert (len(page.encode()) < PAGE_BYTES, len(configuration.encode()) < CONFIG_BYTES) == (True, True), (
        len(page.encode()),
        len(configuration.encode()),
    )


@pytest.mark.xfail(strict=True, reason="issue 28.1's 300 kB / 200 kB: not reached (BENCHMARKS.md)")
def test_the_page_and_its_configuration_reach_the_issues_goal(served):
    _, _, page, configuration = served
    assert len(page.encode()) < GOAL_PAGE_BYTES and len(configuration.encode()) < GOAL_CONFIG_BYTES


def test_a_visitor_gets_no_concept_list_and_a_researcher_gets_it_at_sign_in(served):
    client, demo, page, configuration = served
    variants = [c.key for c in load_concepts() if c.modifier_type != "original"]
    for text in (page, configuration):
        assert [key for key in variants if json.dumps(key) in text] == []
    tokens = sign_in(client, ADMIN_PASSWORD, "researcher", "designer")
    for elem_id in ("browser_concept", "evaluate_concepts"):
        fill = _fill(demo, elem_id)
        shown = {who: len(fill(token).choices) for who, token in tokens.items()}
        assert (shown, len(fill("").choices), len(fill("forged").choices)) == (
            {"admin": 1_278, "researcher": 1_278, "designer": 0},
            0,
            0,
        )


def test_the_configuration_keeps_file_schemas_for_clients_and_the_api_description_whole(served):
    client, _, _, configuration = served
    components = json.loads(configuration)["components"]
    assert all("api_info_as_input" not in c and "example_inputs" not in c for c in components)
    with_schema = {c["type"] for c in components if "api_info" in c}
    assert {"file", "gallery", "image"} <= with_schema and not with_schema & {"textbox", "dropdown", "button"}
    # gradio_client still reads every endpoint's parameters with their whole schemas.
    info = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert [p["parameter_name"] for p in info["/browser_show"]["parameters"]] == [
        "session_token",
        "concept",
        "source",
        "style",
        "cfg",
        "intervals",
    ]
    assert all(
        p["type"] or p["component"] == "Api" for e in info.values() for p in e["parameters"] + e["returns"]
    )
    assert "FileData" in json.dumps(info["/evaluate_import"]["parameters"])
