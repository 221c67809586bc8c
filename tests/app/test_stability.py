"""P_H stability and the assignment mode in the app: the admin's section and the researcher's panel."""

import pytest
from gradio_client.exceptions import AppError

from annotation.coloring import stability
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.qc_data import add_coloring, people
from tests.research_data import sign_in

RED, BLUE = (200, 30, 30), (30, 60, 200)


def test_admin_sets_the_adaptive_mode_and_both_roles_see_each_concepts_stability(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        db = open_db(config.db_path)
        try:
            for designer, other in zip(people(db, 2, "designer"), (RED, BLUE)):
                add_coloring(db, config.data_dir, designer, "dog", RED)
                add_coloring(db, config.data_dir, designer, "cat", other)
        finally:
            db.close()
        tokens = sign_in(client, ADMIN_PASSWORD, "researcher")
        admin, _ = client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        with pytest.raises(AppError, match=r"`Unstable above \(ΔE\)` must be a number, got 'lots'"):
            client.predict(admin, "adaptive", "2", "4", "lots", api_name="/admin_set_mode")
        with pytest.raises(AppError, match=r"`Unstable above \(ΔE\)` must be a number, got '\u0665'"):
            client.predict(admin, "adaptive", "2", "4", "\u0665", api_name="/admin_set_mode")  # not 5
        for typed in ("-3", "1e999", "infinity"):  # by the field's label and as typed (outside probe 213)
            with pytest.raises(
                AppError, match=rf"^`Unstable above \(ΔE\)` must be a number of 0 or more, got '{typed}'$"
            ):
                client.predict(admin, "adaptive", "2", "4", typed, api_name="/admin_set_mode")
        with pytest.raises(AppError, match="`cap` must be at least `min_k` \\(3\\), got 2"):
            client.predict(admin, "adaptive", "3", "2", "5", api_name="/admin_set_mode")
        # A cap of 10**18 was stored, and the coverage's histogram of that many bins filled the
        # server's memory (outside probe 190).
        with pytest.raises(
            AppError,
            match=r"`cap` must be a whole number from 2 to 100 \(designers per concept\), got 999999999999999999",
        ):
            client.predict(admin, "adaptive", "4", "999999999999999999", "12", api_name="/admin_set_mode")
        db = open_db(config.db_path)
        try:
            assert stability.read_mode(db) == stability.Mode()
        finally:
            db.close()
        assert client.predict(admin, api_name="/admin_stored_mode") == ("fixed", "4", "10", "20")
        saved = client.predict(admin, "adaptive", "2", "4", "1.5", api_name="/admin_set_mode")
        # A reload (or another admin's page) shows the stored mode, not the fixed defaults,
        # so *Save mode* keeps it (outside probe 136).
        stored = client.predict(admin, api_name="/admin_stored_mode")
        assert stored == ("adaptive", "2", "4", "1.5")
        assert client.predict(admin, *stored, api_name="/admin_set_mode") == saved
        # Shown exactly as stored, so that saving it unchanged keeps it (outside probe 138)
        client.predict(admin, "adaptive", "2", "4", "12.3456789", api_name="/admin_set_mode")
        assert client.predict(admin, api_name="/admin_stored_mode")[3] == "12.3456789"
        zero = client.predict(admin, "adaptive", "2", "4", "-0", api_name="/admin_set_mode")
        assert (
            zero.endswith("is above 0 ΔE.") and client.predict(admin, api_name="/admin_stored_mode")[3] == "0"
        )
        client.predict(admin, "adaptive", "2", "4", "1.5", api_name="/admin_set_mode")
        summary, histogram, table = client.predict(admin, api_name="/admin_stability")
        seen, _, researcher_table = client.predict(tokens["researcher"], api_name="/leaderboard_stability")
    assert saved.startswith("Saved. adaptive: 2 designers per concept, then up to 4")
    assert "2 concepts with counted colorings; 1 above 1.5 ΔE" in summary and summary == seen
    assert [row[0] for row in table["data"]] == ["cat", "dog"]
    assert [row[3] for row in table["data"]] == ["unstable", "stable"]
    assert researcher_table["data"] == table["data"]
    db = open_db(config.db_path)
    try:
        assert stability.read_mode(db) == stability.Mode(adaptive=True, min_k=2, cap=4, threshold=1.5)
    finally:
        db.close()
