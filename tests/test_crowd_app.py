"""Open study links on the Study tab, through the launched app's API."""

import urllib.parse
from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from annotation.study import crowd
from app.crowd import SUMMARY_HEADERS
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.test_app_participant import _invite, _open_study, _rows


def _join(config, token: str, pid: str) -> None:
    db = open_db(config.db_path)
    try:
        crowd.join(db, token, {"PROLIFIC_PID": pid, "SESSION_ID": f"s-{pid}"}, address="10.0.0.1")
    finally:
        db.close()


def test_a_researcher_makes_follows_pays_and_closes_an_open_link(tmp_path):
    config = make_config(tmp_path)
    _open_study(config)
    with running_app(config) as (client, _):
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        participant, _ = client.predict(_invite(client, "participant"), api_name="/login_invite")
        form = [1, "wave 1", 2, 30, 7, "DONE1", "OUT1", 0, 10, "PROLIFIC_PID", crowd.PROLIFIC_RETURN_URL]
        refusals = [
            (admin, {2: 0}, "`quota` must be a whole number from 1 to 10000, got 0"),
            (admin, {4: -1}, r"`days open` must be in \(0, 3650\], got -1"),
            (admin, {6: "OUT 1"}, "`screenout_code` must be 1-40 letters"),
            (admin, {0: 99}, "unknown study id 99"),
            (participant, {}, "needs the role researcher or admin"),
        ]
        for token, change, message in refusals:
            values = [change.get(i, v) for i, v in enumerate(form)]
            with pytest.raises(AppError, match=message):
                client.predict(token, *values, api_name="/crowd_make_link")
        assert _rows(config, "select * from crowd_links") == []

        url, links = client.predict(admin, *form, api_name="/crowd_make_link")
        query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
        token = query["study"][0]
        assert query["PROLIFIC_PID"] == ["{{%PROLIFIC_PID%}}"]
        assert [row[:5] for row in links["data"]] == [[1, "wave 1", "pilot", 2, 0]]
        _join(config, token, "pidA")
        _join(config, token, "pidB")

        counts, table, _ = client.predict(admin, 1, api_name="/crowd_payments")
        assert counts.startswith("Started 2 · active 2 · completed 0")
        assert [row[:3] for row in table["data"]] == [["pidA", "active", ""], ["pidB", "active", ""]]
        counts, table, _ = client.predict(admin, 1, "pidB", api_name="/crowd_returned")
        assert "returned 1 · places left 1" in counts
        files = client.predict(admin, 1, 0.1, api_name="/crowd_download")
        texts = {Path(f).name: Path(f).read_text(encoding="utf-8") for f in files}
        assert sorted(texts) == ["approve.txt", "bonus.csv", "payments.csv"]
        assert texts["payments.csv"].splitlines()[0] == ",".join(crowd.PAYMENT_COLUMNS)
        assert [line.split(",")[:2] for line in texts["payments.csv"].splitlines()[1:]] == [
            ["pidA", "active"],
            ["pidB", "returned"],
        ]
        assert texts["approve.txt"] == texts["bonus.csv"] == ""
        with pytest.raises(AppError, match="needs the role researcher or admin"):
            client.predict(participant, 1, api_name="/crowd_payments")
        summary, _ = client.predict(admin, api_name="/admin_crowd_counts")
        assert summary["headers"] == SUMMARY_HEADERS
        assert summary["data"] == [[1, "wave 1", "pilot", 2, 2, 1, 0, 0, 0, 1, 1, None, None]]
        with pytest.raises(AppError, match="needs the role admin"):
            client.predict(participant, api_name="/admin_crowd_counts")

        links = client.predict(admin, 1, api_name="/crowd_close_link")
        assert links["data"][0][7]  # closed
        with pytest.raises(AppError, match="was closed on .* already"):
            client.predict(admin, 1, api_name="/crowd_close_link")
    with pytest.raises(crowd.LinkClosed, match="this study is closed"):
        _join(config, token, "pidC")


def test_trial_charts_are_built_once_per_key_and_the_oldest_shown_leave_first():
    from app.participant import TrialCharts

    charts, made = TrialCharts(kept=2), []

    def maker(name):
        def make():
            made.append(name)
            return {"figure": name}

        return make

    first = charts.get("a", maker("a"))
    assert charts.get("a", maker("a2")) is first
    charts.get("b", maker("b"))
    charts.get("a", maker("a3"))  # "a" shown again: "b" is now the oldest
    charts.get("c", maker("c"))
    assert charts.get("a", maker("a4")) is first
    charts.get("b", maker("b2"))
    assert made == ["a", "b", "c", "b2"]
