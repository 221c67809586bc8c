"""A page that came through a proxy names the address people open (`app.public_root`).

Outside probe 111 put nginx on port 8443 with docs/security.md's ``proxy_set_header Host
$host;``, which drops the port: Gradio's page named ``https://127.0.0.1/lab`` as its address,
so every image and download pointed at port 443 and failed, while ``/healthz`` said 200. The
docs now pass ``$http_host``, and the app logs a warning when a proxied page's address is
not ``--public-url``.
"""

from __future__ import annotations

import logging

import httpx
import pytest

from app.public_root import mismatch
from tests.app_server import make_config, running_app

PUBLIC = "https://127.0.0.1:8443"
PROXIED = {"x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "https"}


@pytest.mark.parametrize(
    "page, public, same",
    [
        ("https://127.0.0.1/lab", "https://127.0.0.1:8443/lab", False),  # probe 111
        ("http://lab.example.org", "https://lab.example.org", False),  # no X-Forwarded-Proto
        ("https://lab.example.org", "https://lab.example.org/lab", False),  # no GRADIO_ROOT_PATH
        ("https://Lab.Example.org:443/lab", "https://lab.example.org/lab/", True),
        ("http://127.0.0.1:7860", "http://127.0.0.1:7860/", True),
    ],
)
def test_two_addresses_are_one_when_scheme_host_port_and_path_are(page, public, same):
    assert (mismatch(page, public) is None) == same


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    config = make_config(tmp_path_factory.mktemp("public_root"), public_url=PUBLIC)
    with running_app(config) as (client, _):
        yield client.src.rstrip("/")


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "app.public_root"]


def test_a_proxied_page_without_the_port_is_logged_once(app_url, caplog):
    caplog.set_level(logging.WARNING, logger="app.public_root")
    headers = {**PROXIED, "host": "127.0.0.1"}  # nginx's $host: the port is gone
    # What the page's files are addressed by, as Gradio computes it for this request.
    assert httpx.get(f"{app_url}/config", headers=headers, timeout=60).json()["root"] == "https://127.0.0.1"
    httpx.get(f"{app_url}/", headers=headers, timeout=60)
    [warning] = warnings_of(caplog)
    assert "'https://127.0.0.1'" in warning and f"--public-url is '{PUBLIC}'" in warning
    assert "$http_host" in warning


def test_a_proxied_page_with_the_port_and_a_visit_to_the_apps_port_are_not(app_url, caplog):
    caplog.set_level(logging.WARNING, logger="app.public_root")
    headers = {**PROXIED, "host": "127.0.0.1:8443"}  # nginx's $http_host
    assert httpx.get(f"{app_url}/config", headers=headers, timeout=60).json()["root"] == PUBLIC
    httpx.get(f"{app_url}/", headers=headers, timeout=60)
    httpx.get(f"{app_url}/", timeout=60)  # no proxy: the app's own address, not the public one
    assert warnings_of(caplog) == []


def test_a_host_that_is_no_address_leaves_the_app_serving(app_url):
    answer = httpx.get(f"{app_url}/config", headers={**PROXIED, "host": "127.0.0.1:port"}, timeout=60)
    assert answer.status_code == 200
    assert httpx.get(f"{app_url}/healthz", timeout=60).text == "ready"
