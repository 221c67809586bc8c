"""A real app server for tests: ``with running_app(config) as (client, demo): ...``.

The server listens on a free local port and is closed when the block ends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from gradio_client import Client

from app import build_app, launch_options, mark_ready
from app.config import AppConfig
from app.guard import COOKIE
from bench.designer_client import TLS_CONTEXT

ADMIN_PASSWORD = "correct horse battery"


def make_config(tmp_path: Path, **changes) -> AppConfig:
    """An AppConfig writing under `tmp_path`, with a known admin password file."""
    password_file = tmp_path / "admin_password.txt"
    password_file.write_text(ADMIN_PASSWORD + "\n", encoding="utf-8")
    return AppConfig(
        **{
            "db_path": tmp_path / "study.sqlite",
            "data_dir": tmp_path / "data",
            "admin_password_file": password_file,
            **changes,
        }
    )


def session_event(demo):
    """The one page function of `demo` (`app.build_app`'s) that runs on the server when the
    session changes (`app.tabs.SessionReactions`), as a function of a session token to its
    ``{component: update}``; its Gradio ``BlockFunction`` is its ``block_fn``."""
    [token_box] = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "session_token"]
    [event] = [f for f in demo.fns.values() if f.fn is not None and (token_box._id, "change") in f.targets]

    def react(token: str) -> dict:
        return event.fn(*[token if block is token_box else None for block in event.inputs])

    react.block_fn = event
    return react


def app_script():
    """``app.py`` as a module (the name ``app`` is the package)."""
    spec = importlib.util.spec_from_file_location(
        "app_script", Path(__file__).resolve().parents[1] / "app.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait_for(condition, ceiling_s: float = 120.0) -> bool:
    """Poll `condition` until it holds (True) or `ceiling_s` passes (False): a ceiling, not a
    measured time."""
    deadline = time.monotonic() + ceiling_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HTTP_TIMEOUT_S = 120.0


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A TLS certificate for 127.0.0.1, signed by its own key: ``(certificate, key)``, PEM
    files written to `folder`. A browser takes it when told to ignore HTTPS errors."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    paths = folder / "certificate.pem", folder / "key.pem"
    paths[0].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@contextlib.contextmanager
def running_app(config: AppConfig, tls: tuple[Path, Path] | None = None) -> Iterator[tuple[Client, object]]:
    """Build and launch the app for `config`; yield a connected `gradio_client.Client`.

    With `tls` (`self_signed_certificate`'s files) the app is served over HTTPS."""
    demo = build_app(config)
    port = free_port()
    options = (
        {} if tls is None else {"ssl_certfile": str(tls[0]), "ssl_keyfile": str(tls[1]), "ssl_verify": False}
    )
    try:
        demo.launch(
            server_name="127.0.0.1",
            server_port=port,
            prevent_thread_lock=True,
            quiet=True,
            **launch_options(config, demo),
            **options,
        )
        mark_ready(demo)
        if tls is None:
            yield SessionClient(f"http://127.0.0.1:{port}/", verbose=False), demo
        else:
            verify = ssl.create_default_context(cafile=str(tls[0]))
            yield SessionClient(f"https://127.0.0.1:{port}/", verbose=False, ssl_verify=verify), demo
    finally:
        demo.close()


class SessionClient(Client):
    """A `gradio_client.Client` that downloads output files as the caller of each request.

    The server checks who fetches a file from the session cookie (`app.guard`), which a
    page keeps in step with its session. An API client sets the same cookie; this one sets
    it to the first argument of each call, which is the session token of every endpoint
    that needs one (for the sign-in endpoints the cookie is then no session: harmless).

    Plain HTTP calls (the API description the client reads first, uploads) wait up to
    `HTTP_TIMEOUT_S` instead of httpx's 5 s: on a machine busy with other tests the first
    ``/info`` of a large app took longer (CI). A waiting limit, not a measured time.
    Every request verifies with one shared TLS context (`TLS_CONTEXT`).
    """

    def __init__(self, src: str, **kwargs):
        kwargs.setdefault("httpx_kwargs", {"timeout": HTTP_TIMEOUT_S})
        kwargs.setdefault("ssl_verify", TLS_CONTEXT)  # httpx's `verify` takes a context
        super().__init__(src, **kwargs)

    def predict(self, *args, **kwargs):
        if args and isinstance(args[0], str):
            self.cookies[COOKIE] = args[0]
        return super().predict(*args, **kwargs)


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory) -> Iterator[tuple[Client, AppConfig]]:
    """One server for a whole test module: ``(client, config)``.

    For tests that need a running app but not a fresh database: each makes the people and
    rows it needs and compares only what it changed (a table dump before and after its
    own calls). Launching an app costs ~5 s on two cores; a module of refusal tests pays
    it once.
    """
    config = make_config(tmp_path_factory.mktemp("shared-app"))
    with running_app(config) as (client, _):
        yield client, config
