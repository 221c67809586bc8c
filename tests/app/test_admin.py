import hashlib
import io
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client.exceptions import AppError

from annotation import export as export_module
from annotation.backup import backup_archive
from annotation.export import WriteFailed
from annotation.files import store_png
from app import build_app
from app.admin import ANNOTATOR_HEADERS
from app.config import AppConfig
from app.guard import COOKIE, download_path, new_download
from storage import ensure_schema, iso, open_db
from storage.schema import MIGRATIONS
from tests.app.test_participant import _rows
from tests.app_server import ADMIN_PASSWORD, make_config, running_app, shared_app  # noqa: F401
from tests.disks import tmpfs

ROOT = Path(__file__).resolve().parents[2]


def _dump(config):
    db = open_db(config.db_path)
    try:
        return list(db.conn.iterdump())
    finally:
        db.close()


def _admin_endpoints(client):
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    return {name: info for name, info in endpoints.items() if name.startswith("/admin_")}


def _example_inputs(info):
    return [p["example_input"] for p in info["parameters"][1:]]


def test_admin_creates_invites_and_each_link_signs_its_person_in(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        admin, message = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        assert admin and "admin" in message
        table = client.predict(admin, "expert", 2, "yes", 7, api_name="/admin_create_invites")
        assert table["headers"] == ["annotator_id", "pseudonym", "role", "invite_link", "expires"]
        assert [row[1:3] for row in table["data"]] == [["E0001", "expert"], ["E0002", "expert"]]
        # When each link stops working, as the database has it (the admin could not see it).
        stored = [r["expires"] for r in _rows(config, "select expires from invites order by annotator_id")]
        assert [row[4] for row in table["data"]] == [f"{e[:16].replace('T', ' ')} UTC" for e in stored]
        link = table["data"][1][3]
        assert link.startswith(config.public_url + "/?invite=")
        expert, message = client.predict(link, api_name="/login_invite")
        assert expert and "E0002" in message
        people = client.predict(admin, api_name="/admin_list_annotators")
        assert [(r[1], r[2], r[3], r[4], r[7], r[8]) for r in people["data"]] == [
            ("E0001", "expert", "yes", "active", 0, "nothing yet"),
            ("E0002", "expert", "yes", "active", 1, "nothing yet"),
        ]
        # Last seen: E0002 at the sign-in just made, E0001 never.
        assert people["data"][0][9] == "" and re.fullmatch(
            r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", people["data"][1][9]
        )
        coverage = client.predict(admin, api_name="/admin_coverage")
        # One form for each count, thousands marked (outside probe 177 read 1278 and 1,278).
        assert "**0 of 1,278** concepts have 5 colorings" in coverage
        assert (
            "holding a place (a coloring that stands or awaits its recolor; P_H counts the standing ones): 0: 1,278"
            in coverage
        )
        # Only concepts whose base has a sketch can be handed to designers: the head says so.
        assert (
            "**1,278** need designers, **219** of them with a sketch to color (the other 1,059 wait "
            "for a sketch of their base concept: Sketches tab)." in coverage
        )
        # The shipped sketches cover 219 concepts: 1,095 slots, all free; figures as words.
        assert "1,095 in all, **1,095 free**, 0 reserved by designers now, 0 done" in coverage
        assert "Active people by role: 2 expert" in coverage and "{" not in coverage
        with zipfile.ZipFile(client.predict(admin, api_name="/admin_export")) as archive:
            annotators = archive.read("csv/annotators.csv").decode()
        assert "E0001" in annotators and "E0002" in annotators
        with zipfile.ZipFile(client.predict(admin, api_name="/admin_backup")) as archive:
            manifest = json.loads(archive.read("manifest.json"))
            snapshot = archive.read("colorconcept.sqlite")
        assert manifest["database"]["sha256"] == hashlib.sha256(snapshot).hexdigest()
        assert manifest["schema_version"] == len(MIGRATIONS)
        # The backup (every hash) is the server account's alone, on a shared machine too.
        downloads = Path(config.data_dir) / "downloads"
        assert [p.name for p in downloads.rglob("*.zip")]
        for path in [downloads, *downloads.rglob("*")]:
            assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_a_download_folder_is_private_even_where_older_code_made_it_open(tmp_path):
    opened = tmp_path / "downloads" / "invites"
    opened.mkdir(parents=True, mode=0o755)
    (tmp_path / "downloads").chmod(0o755)
    target = download_path(tmp_path, "invites", "invites.csv")
    for folder in (tmp_path / "downloads", opened, target.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_the_apps_start_removes_downloads_older_than_an_hour(tmp_path):
    """An invite list (working links) stayed on disk as long as no later batch was made
    (outside probe 93); a start removes what an earlier day left, a fresh one stays."""
    from app.common import AppContext

    config = make_config(tmp_path)
    old, fresh = (download_path(config.data_dir, "invites", "invites.csv") for _ in range(2))
    for path in (old, fresh):
        path.write_text("id,link\n")
    hours_ago = time.time() - 2 * 3600
    os.utime(old.parent, (hours_ago, hours_ago))
    AppContext.prepare(config).close()
    assert not old.parent.exists() and fresh.is_file()


_KILLED_EXPORT = """
import os, signal, sys
from pathlib import Path
from annotation.export import export_archive
from storage import open_db

def progress(step, done, total):
    if step == "images":  # the tables are written: a half-made copy of the study
        print(flush=True)
        os.kill(os.getpid(), signal.SIGKILL if sys.argv[4] == "kill" else signal.SIGSTOP)

export_archive(open_db(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), progress=progress)
"""


def test_the_apps_start_removes_at_once_what_a_killed_export_left_and_keeps_a_live_ones(tmp_path):
    """The Admin tab's export, its app SIGKILLed part-way, left a copy of every table among the
    downloads until it was an hour old, one more per kill (an outside check). The next start
    removes it at once; an export still at work (another app on the data folder, here held
    stopped) keeps its own, and another machine's waits for the hour."""
    from app.common import AppContext

    config = make_config(tmp_path)
    AppContext.prepare(config).close()  # the database and shipped sketches, as a start leaves them

    def exporting(how: str) -> tuple[subprocess.Popen, Path]:
        target = download_path(config.data_dir, "exports", "colorconcept-export.zip")
        argv = [str(config.db_path), str(config.data_dir), str(target), how]
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_EXPORT, *argv], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert child.stdout.readline() == "\n"  # it is at the images
        return child, target.parent

    killed, dead = exporting("kill")
    assert killed.wait() == -9 and list(dead.rglob("sessions.csv"))
    # What the earlier code's export left (its temporary folder bore no process id), by the
    # same process of this machine and by one of another machine.
    earlier, elsewhere = (download_path(config.data_dir, "exports", "x.zip").parent for _ in range(2))
    this_host = export_module._staging_prefix(Path("export"))
    for folder, prefix in ((earlier, this_host), (elsewhere, ".export-partial-other-")):
        csv = folder / "tmpab12cd34" / f"{prefix}{killed.pid}-ab12cd34" / "csv"
        csv.mkdir(parents=True)
        (csv / "sessions.csv").write_text("id\n")
    stopped, live = exporting("stop")
    try:
        AppContext.prepare(config).close()
        assert sorted((Path(config.data_dir) / "downloads" / "exports").iterdir()) == sorted(
            [live, elsewhere]
        )
        for kept in (live, elsewhere):
            assert [p.name for p in kept.rglob("sessions.csv")] == ["sessions.csv"]
    finally:
        stopped.kill()
        stopped.wait()


def test_a_backup_download_the_disk_refuses_leaves_no_download_folder(tmp_path):
    """The Admin tab's backup on a full disk is refused (its message says so) and leaves no
    empty ``downloads/backups/<random>/`` folder waiting for the hourly clean-up."""
    db = open_db(tmp_path / "db.sqlite")
    ensure_schema(db)
    with tmpfs(tmp_path / "disk", "64k") as disk:
        with (
            pytest.raises(WriteFailed, match="could not write the backup"),
            new_download(disk, "backups", "colorconcept-backup.zip") as target,
        ):
            backup_archive(db, disk, target)
        assert list((disk / "downloads" / "backups").iterdir()) == []
    db.close()


def test_admin_endpoints_refuse_other_roles_and_write_nothing(shared_app):
    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    links = {
        role: client.predict(admin, role, 1, "unknown", 7, api_name="/admin_create_invites")["data"][0][3]
        for role in ("designer", "expert", "participant", "researcher")
    }
    tokens = {role: client.predict(link, api_name="/login_invite")[0] for role, link in links.items()}
    tokens.update({"nobody": "", "forged": "f" * 43})
    endpoints = _admin_endpoints(client)
    assert {
        "/admin_create_invites",
        "/admin_list_annotators",
        "/admin_practice_pending",
        "/admin_review_practice",
        "/admin_coverage",
        "/admin_revoke",
        "/admin_export",
        "/admin_backup",
    } <= set(endpoints)
    before = _dump(config)
    for _who, token in tokens.items():
        for name, info in endpoints.items():
            with pytest.raises(AppError, match="needs the role admin|not signed in|not valid"):
                client.predict(token, *_example_inputs(info), api_name=name)
    assert _dump(config) == before


@pytest.mark.parametrize(
    "api_name, value, message",
    [
        ("/login_admin", "not the password", "wrong admin password"),
        ("/login_invite", "http://127.0.0.1:7860/?invite=forged", "not valid"),
        ("/login_invite", "http://127.0.0.1:7860/?invite=", "the invite box is empty"),
        ("/login_invite", "", "the invite box is empty"),
        ("/login_admin", "", "the password box is empty"),
        # An API client's null is an empty box too (it counted as a failed sign-in).
        ("/login_invite", None, "the invite box is empty"),
        ("/login_admin", None, "the password box is empty"),
    ],
)
def test_bad_sign_in_shows_a_clear_message(shared_app, api_name, value, message):
    client, config = shared_app
    before = _dump(config)
    with pytest.raises(AppError, match=message):
        client.predict(value, api_name=api_name)
    after = _dump(config)
    if "empty" in message:  # nothing was tried: nothing changes, no failure is counted
        assert after == before
        return
    # Nothing changes but the record of the failure, which the sign-in throttle counts.
    [failure] = [line for line in after if line not in before]
    assert "'sign_in_failed','address','127.0.0.1'" in failure
    assert [line for line in after if line != failure] == before


def test_admin_inputs_out_of_range_show_a_message_and_write_nothing(shared_app):
    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    before = _dump(config)
    with pytest.raises(AppError, match="`How many` must be from 1 to 500, got 0"):
        client.predict(admin, "designer", 0, "yes", 7, api_name="/admin_create_invites")
    with pytest.raises(
        AppError, match="`Role` must be one of 'designer', 'expert', 'participant', 'researcher', got 'admin'"
    ):
        client.predict(admin, "admin", 1, "yes", 7, api_name="/admin_create_invites")
    with pytest.raises(
        AppError, match=r"^`Annotator id or pseudonym`: nobody has the id 99 \(the people table"
    ):
        client.predict(admin, 99, "approve", "ok", api_name="/admin_review_practice")
    with pytest.raises(AppError, match="^`Annotator id or pseudonym`: nobody is called 'D0099'$"):
        client.predict(admin, "D0099", "approve", "ok", api_name="/admin_review_practice")
    with pytest.raises(AppError, match="`why` must say why"):
        client.predict(admin, 1, "", api_name="/admin_revoke")
    with pytest.raises(AppError, match="`How many` must be a whole number, got 1.5"):
        client.predict(admin, "designer", 1.5, "yes", 7, api_name="/admin_create_invites")
    with pytest.raises(AppError, match="`Annotator id or pseudonym` must be a whole number, got '1.5'"):
        client.predict(admin, 1.5, "approve", "ok", api_name="/admin_review_practice")
    with pytest.raises(
        AppError,
        match="`Annotator id or pseudonym \\(close, reopen or withdraw\\)`: give the person's id or pseudonym \\(D0003\\), got nothing",
    ):
        client.predict(admin, None, "spite", api_name="/admin_revoke")
    assert _dump(config) == before


def test_admin_id_fields_start_empty_and_no_number_field_rounds(tmp_path):
    demo = build_app(make_config(tmp_path))
    components = {c["props"].get("elem_id"): c for c in demo.config["components"]}
    for elem_id in ("admin_reviewed", "admin_revoked"):
        # A textbox: Gradio 6 draws an empty gr.Number as 0.
        assert components[elem_id]["type"] == "textbox"
        assert components[elem_id]["props"].get("value", "") == ""
        assert components[elem_id]["props"]["placeholder"] == "from the table above"
    # precision=0 would round 1.5 to 2 before any handler could refuse it.
    assert [
        elem_id
        for elem_id, c in components.items()
        if c["type"] == "number" and c["props"].get("precision") is not None
    ] == []


def test_first_start_prints_a_generated_password_once(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("COLORCONCEPT_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("COLORCONCEPT_ADMIN_PASSWORD_FILE", raising=False)
    config = AppConfig(db_path=tmp_path / "s.sqlite", data_dir=tmp_path / "data")
    build_app(config)
    first = capsys.readouterr().out
    assert "Admin password (shown only this once): " in first
    password = first.split("shown only this once): ")[1].split()[0]
    build_app(config)
    assert "Admin password" not in capsys.readouterr().out
    with running_app(config) as (client, _):
        token, _ = client.predict(password, api_name="/login_admin")
        assert token
    # The command the announcement gives runs as printed (--db before the command).
    lines = first.split("own Python):\n")[1].splitlines()[:2]
    command = " ".join(line.strip().rstrip("\\") for line in lines)
    assert shlex.split(command)[3:6] == [sys.executable, "-m", "annotation"], command
    assert str(config.db_path) in shlex.split(command)
    done = subprocess.run(
        f"{command} --stdin",
        shell=True,
        cwd=tmp_path,  # any folder: the command goes to the checkout itself
        input="chosen-password-1\n" * 2,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    with running_app(config) as (client, _):
        assert client.predict("chosen-password-1", api_name="/login_admin")[0]


def test_the_people_table_and_the_coverage_count_a_withdrawn_practice_coloring_alike(shared_app):
    """The coverage leaves practice colorings out of its counts; the people table counted a
    withdrawn practice coloring among "colorings withdrawn", so the two disagreed."""
    from annotation.qc.review import request_recolor
    from tests.qc_data import actor, add_coloring, people

    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    designer_id, pseudonym = client.predict(admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")[
        "data"
    ][0][:2]
    before = client.predict(admin, api_name="/admin_coverage")
    db = open_db(config.db_path)
    try:
        apple = add_coloring(db, config.data_dir, designer_id, "apple", (200, 20, 30))
        add_coloring(db, config.data_dir, designer_id, "lemon", (240, 220, 40), practice=True)
        request_recolor(db, actor(db, people(db, 1, "expert")[0]), apple, "redder")
    finally:
        db.close()
    message = client.predict(admin, pseudonym, "asked by email", api_name="/admin_withdraw")
    # ... and the recolor the expert asked of them ends (outside probe 168: it stayed their redo)
    assert message.startswith(
        f"Withdrew 2 colorings (1 main-task, 1 practice) of annotator {designer_id} ({pseudonym}): the P_H of 1 concept "
        "recomputed without them, 1 recolor or redo task they held ended. "
    )
    people = client.predict(admin, api_name="/admin_list_annotators")
    (row,) = [r for r in people["data"] if r[0] == designer_id]
    assert row[ANNOTATOR_HEADERS.index("work_done")] == "1 coloring withdrawn, 1 practice coloring withdrawn"
    withdrawn = re.compile(r"(\d+) withdrawn")
    counted = [
        int(m[1]) if (m := withdrawn.search(text)) else 0
        for text in (before, client.predict(admin, api_name="/admin_coverage"))
    ]
    assert counted[1] - counted[0] == 1  # the main-task one, as the people table says


def test_admin_sees_and_approves_practice_colorings(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        designer_id = client.predict(admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")[
            "data"
        ][0][0]
        db = open_db(config.db_path)
        try:
            rows = [(key, 1, 1, "submitted") for key in config.practice_concepts]
            rows += [("apple", 0, 1, "recolor_requested"), ("apple", 0, 2, "submitted")]
            for i, (key, practice, round_, status) in enumerate(rows):
                image = store_png(
                    config.data_dir, np.full((4, 4, 3), 40 * i, dtype=np.uint8), folder="colorings"
                )
                db["colorings"].insert(
                    {
                        "annotator_id": designer_id,
                        "concept_key": key,
                        "image_path": image.path,
                        "image_sha256": image.sha256,
                        "practice": practice,
                        "round": round_,
                        "status": status,
                        "created": iso(),
                    }
                )
        finally:
            db.close()
        coverage = client.predict(admin, api_name="/admin_coverage")
        assert (
            "1 submitted (3 practice colorings are not counted), 0 accepted, 0 recolor requested, "
            "0 excluded; besides, 1 earlier round replaced by a designer's redo (not counted)"
        ) in coverage
        table, gallery = client.predict(admin, api_name="/admin_practice_pending")
        assert table["data"] == [[designer_id, "D0001", "1 2 3"]]
        assert [item["caption"] for item in gallery] == [f"D0001: {key}" for key in config.practice_concepts]
        message, table, gallery, people = client.predict(
            admin, designer_id, "approve", "fine", api_name="/admin_review_practice"
        )
        assert message == f"Recorded: approve for annotator {designer_id} (D0001)."
        # The decision shows at once: the list empties, the people table names who approved.
        assert table["data"] == [] and gallery == []
        (row,) = [r for r in people["data"] if r[0] == designer_id]
        assert row[ANNOTATOR_HEADERS.index("practice_approved")].endswith("(by admin)")
        table, gallery = client.predict(admin, api_name="/admin_practice_pending")
        assert table["data"] == [] and gallery == []


def test_the_admin_sets_draws_and_ends_a_pilot_and_a_refused_one_writes_nothing(shared_app):
    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    db = open_db(config.db_path)
    try:
        (bare,) = db.execute(
            "select key from concepts c where not exists (select 1 from sketches s where s.base = "
            "c.base and s.selected = 1) order by key limit 1"
        ).fetchone()
    finally:
        db.close()
    before = _dump(config)
    for api_name, inputs, message in (
        ("/admin_set_pilot", ["apple, no such"], "no concept is called"),
        (
            "/admin_set_pilot",
            [f"apple\n{bare}"],
            "cannot be colored yet: choose a sketch of its base concept",
        ),
        # Each names its field (outside probe 190: "a pilot needs ..." named none)
        (
            "/admin_set_pilot",
            [""],
            r"^`names`: a pilot needs 1 to 20 concepts \(5-20 suggested\), got 0$",
        ),
        ("/admin_draw_pilot", [21, 0], "^`size`: a pilot needs 1 to 20 concepts"),
        ("/admin_draw_pilot", [2.5, 0], "`Or draw this many at random` must be a whole number, got 2.5"),
    ):
        with pytest.raises(AppError, match=message):
            client.predict(admin, *inputs, api_name=api_name)
    assert _dump(config) == before
    message, coverage = client.predict(admin, " apple ,forbidding castle\n", api_name="/admin_set_pilot")
    assert message == "Pilot set: “apple”, “forbidding castle”."
    assert (
        "- Pilot: designers get these 2 concepts before any other, once they have colored the up to 3 "
        "tasks each holds already: “apple”, “forbidding castle”." in coverage
    )
    assert (
        "No pilot concept has yet the 5 colorings from different designers that “Colorings needed per concept” asks"
        in coverage
    )
    drawn = [client.predict(admin, 6, 7, api_name="/admin_draw_pilot")[0] for _ in range(2)]
    assert drawn[0] == drawn[1] and drawn[0].startswith("Pilot drawn: ") and drawn[0].count("”") == 6
    message, coverage = client.predict(admin, api_name="/admin_end_pilot")
    assert (
        message
        == "The pilot of 6 concepts ended: designers get the least covered concepts of the whole study first."
    )
    assert "- No pilot: designers get the least covered concepts of the whole study first." in coverage


def _zip_contents(archive) -> dict[str, bytes]:
    """Every member of an export zip, the inner images.zip opened member by member."""
    with zipfile.ZipFile(archive) as z:
        contents = {name: z.read(name) for name in z.namelist() if name != "images.zip"}
        with zipfile.ZipFile(io.BytesIO(z.read("images.zip"))) as images:
            contents |= {f"images.zip/{name}": images.read(name) for name in images.namelist()}
    return contents


def test_the_export_builds_in_the_background_one_at_a_time_for_the_admin_alone(shared_app, monkeypatch):
    client, config = shared_app
    admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
    link = client.predict(admin, "expert", 1, "unknown", 7, api_name="/admin_create_invites")["data"][0][3]
    expert, _ = client.predict(link, api_name="/login_invite")
    link = client.predict(admin, "researcher", 1, "unknown", 7, api_name="/admin_create_invites")["data"][0][
        3
    ]
    researcher, _ = client.predict(link, api_name="/login_invite")
    # The export waits at its start until the test lets it go: "running" for as long as needed.
    gate, entered = threading.Event(), threading.Event()
    real = export_module._export

    def gated(*args, **kwargs):
        entered.set()
        assert gate.wait(120), "the test never let the export go"
        return real(*args, **kwargs)

    monkeypatch.setattr(export_module, "_export", gated)
    line, archive = client.predict(admin, api_name="/admin_export_start")
    assert line.startswith("Building the export (started ") and archive is None
    assert entered.wait(120)
    with pytest.raises(AppError, match=r"an export is already being built \(started .*\)"):
        client.predict(admin, api_name="/admin_export_start")
    with pytest.raises(AppError, match="already being built"):
        client.predict(admin, api_name="/admin_export")
    line, archive = client.predict(admin, api_name="/admin_export_poll")
    assert line.startswith("Building the export") and archive is None
    for token in (expert, ""):
        for name in ("/admin_export_start", "/admin_export_poll", "/admin_export"):
            with pytest.raises(AppError, match="needs the role admin|not signed in"):
                client.predict(token, api_name=name)
    snapshot = _dump(config)
    gate.set()
    for _ in range(600):  # a condition, not a clock: the zip shows once the job is done
        line, archive = client.predict(admin, api_name="/admin_export_poll")
        if archive is not None:
            break
        time.sleep(0.2)
    assert line.startswith("The export started ") and line.endswith(" is ready below.")
    # The same zip as the synchronous export of the same rows.
    assert _dump(config) == snapshot
    db = open_db(config.db_path)
    try:
        synchronous = export_module.export_archive(db, config.data_dir, config.data_dir / "sync.zip")
    finally:
        db.close()
    assert _zip_contents(archive) == _zip_contents(synchronous)
    # Served in place among the admin's downloads, to the admin alone: not in exports/,
    # which researchers read (the zip holds every table, platform ids when asked).
    [served] = (config.data_dir / "downloads" / "exports").glob("*/colorconcept-export-*.zip")
    assert not list((config.data_dir / "exports").glob("**/*.zip"))
    url = f"{client.src.rstrip('/')}/gradio_api/file={served}"
    for other in (expert, researcher):
        assert httpx.get(url, cookies={COOKIE: other}).status_code == 403
    answer = httpx.get(url, cookies={COOKIE: admin})
    assert answer.status_code == 200 and answer.content == served.read_bytes()
