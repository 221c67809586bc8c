"""An expert votes in a real browser: next coloring in the blind queue, Inconsistent."""

import pytest

from annotation.db import open_db
from tests.browser import expect, live_app, open_tab, page, sign_in  # noqa: F401
from tests.qc_data import add_coloring

pytestmark = pytest.mark.browser
GREYS = [(70, 70, 75), (110, 110, 110), (50, 52, 60), (130, 128, 125)]
PINK = (255, 105, 180)


def _inconsistent_castle(live_app) -> list[int]:
    """Five designers color 'forbidding castle', one of them pink; the vote queue opens."""
    designers = [annotator for annotator, _ in live_app.invite("designer", 5)]
    db = open_db(live_app.config.db_path)
    try:
        ids = [add_coloring(db, live_app.config.data_dir, d, "forbidding castle", rgb)
               for d, rgb in zip(designers, [*GREYS, PINK])]
    finally:
        db.close()
    live_app.client.predict(live_app.admin_token(), 1.0, 2, api_name="/expert_open_queue")
    return ids


def test_expert_votes_on_the_most_suspicious_coloring_and_the_queue_moves(live_app, page):
    colorings = _inconsistent_castle(live_app)
    [(expert, link)] = live_app.invite("expert")
    assert sign_in(page, link) == "E0006"
    open_tab(page, "Expert review")
    page.click("#expert_next")
    concept = page.locator("#expert_vote_concept")
    expect(concept).to_contain_text("forbidding castle")
    expect(concept).to_contain_text("5 in your queue")
    expect(page.locator("#expert_vote_image img")).to_be_visible()
    expect(page.locator("#expert_vote_plot .js-plotly-plot")).to_be_visible()
    task = int(page.locator("#expert_task input").input_value())
    page.click("#expert_inconsistent")
    expect(page.locator("#expert_message")).to_have_text("Vote recorded.")
    expect(concept).to_contain_text("4 in your queue")
    votes = live_app.query("select coloring_id, expert_id, vote from qc_votes")
    [reviewed] = live_app.query("select coloring_id from tasks where id = ?", (task,))
    assert votes == [{"coloring_id": reviewed["coloring_id"], "expert_id": expert,
                      "vote": "inconsistent"}]
    assert reviewed["coloring_id"] == colorings[-1], "the pink coloring is the most suspicious"
    assert page.js_errors == []
