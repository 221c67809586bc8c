import datetime as dt
import json

import pytest

from annotation.errors import Conflict, InvalidInput, InvalidToken, PermissionDenied
from annotation.people.accounts import (
    Actor,
    create_annotators,
    hash_token,
    invite_url,
    list_annotators,
    login_with_invite,
    logout,
    new_invite,
    require,
    revoke_annotator,
)

ADMIN = Actor(None, "admin", frozenset({"admin"}))


def _dump(db):
    return list(db.conn.iterdump())


def test_create_annotators_gives_each_person_a_pseudonym_role_and_invite(db):
    created = create_annotators(db, 3, "designer", design_background=True)
    assert [a["pseudonym"] for a, _ in created] == ["D0001", "D0002", "D0003"]
    assert all(json.loads(a["roles"]) == ["designer"] and a["design_background"] == 1 for a, _ in created)
    tokens = [t for _, t in created]
    assert len(set(tokens)) == 3 and all(len(t) >= 40 for t in tokens)
    stored = {r["token_hash"]: r["annotator_id"] for r in db["invites"].rows}
    assert stored == {hash_token(t): a["id"] for a, t in created}
    assert [r["action"] for r in db["audit"].rows] == ["create_annotators"]


def test_raw_tokens_never_reach_the_database_file(tmp_path, db):
    tokens = [t for _, t in create_annotators(db, 4, "expert")]
    sessions = [login_with_invite(db, t).token for t in tokens]
    db.execute("pragma wal_checkpoint(TRUNCATE)")
    files = [p for p in tmp_path.iterdir() if p.name.startswith("a.sqlite")]
    content = b"".join(p.read_bytes() for p in files)
    for raw in tokens + sessions:
        assert raw.encode() not in content
        assert hash_token(raw).encode() in content


def test_invite_link_signs_in_and_require_checks_roles(db):
    ((annotator, token),) = create_annotators(db, 1, "participant")
    assert invite_url("http://h:7860/", token) == f"http://h:7860/?invite={token}"
    session = login_with_invite(db, token)
    assert (session.annotator_id, session.pseudonym, session.roles) == (
        annotator["id"],
        "P0001",
        ("participant",),
    )
    actor = require(db, session.token, "participant")
    assert actor == Actor(annotator["id"], "P0001", frozenset({"participant"}))
    assert require(db, session.token) == actor
    with pytest.raises(PermissionDenied, match="needs the role admin or researcher.*P0001"):
        require(db, session.token, "admin", "researcher")
    invite = db["invites"].get(hash_token(token))
    assert invite["uses"] == 1 and invite["first_used"] == invite["last_used"]


@pytest.mark.parametrize("token", ["forged-token-" + "x" * 30, "", "a" * 1000, None, 42])
def test_forged_or_malformed_invites_are_refused_and_nothing_is_written(db, token):
    create_annotators(db, 1, "designer")
    before = _dump(db)
    with pytest.raises(InvalidToken):
        login_with_invite(db, token)
    assert _dump(db) == before


def test_expired_and_revoked_invites_are_refused_and_nothing_is_written(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((annotator, token),) = create_annotators(db, 1, "designer", expires_days=2, now=start)
    before = _dump(db)
    with pytest.raises(InvalidToken, match="expired on 2025-01-03"):
        login_with_invite(db, token, now=start + dt.timedelta(days=2, seconds=1))
    assert _dump(db) == before
    login_with_invite(db, token, now=start + dt.timedelta(days=1))
    revoke_annotator(db, annotator["id"], ADMIN, "left the study", now=start)
    before = _dump(db)
    with pytest.raises(
        InvalidToken,
        match=f"^the account {annotator['pseudonym']} was closed by the study admin; ask them if you "
        "should go on: only they can reopen it$",
    ):
        login_with_invite(db, token, now=start + dt.timedelta(days=1))
    # Closing it again changes nothing and says so (it said "Closed the account" again).
    with pytest.raises(
        Conflict,
        match=rf"the account of annotator {annotator['id']} \({annotator['pseudonym']}\) is closed already",
    ):
        revoke_annotator(db, annotator["id"], ADMIN, "again", now=start)
    assert _dump(db) == before


def test_sessions_expire_and_end_on_logout_or_revocation(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((annotator, token),) = create_annotators(db, 1, "designer", now=start)
    session = login_with_invite(db, token, session_days=1, now=start)
    require(db, session.token, "designer", now=start + dt.timedelta(hours=23))
    with pytest.raises(InvalidToken, match="expired"):
        require(db, session.token, "designer", now=start + dt.timedelta(days=1))
    second = login_with_invite(db, token, now=start)
    logout(db, second.token)
    with pytest.raises(InvalidToken):
        require(db, second.token, now=start)
    third = login_with_invite(db, token, now=start)
    revoke_annotator(db, annotator["id"], ADMIN, "asked to withdraw", now=start)
    with pytest.raises(InvalidToken):
        require(db, third.token, now=start)
    assert list_annotators(db)[0]["status"] == "revoked"
    assert db["audit"].get(2)["why"] == "asked to withdraw"


def test_a_session_lasts_14_days_and_the_link_opens_another_until_its_30_days_end(db):
    # As docs/security.md tells an operator planning a months-long study.
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((_, token),) = create_annotators(db, 1, "designer", now=start)
    session = login_with_invite(db, token, now=start)
    require(db, session.token, "designer", now=start + dt.timedelta(days=14, seconds=-1))
    with pytest.raises(InvalidToken, match="your session expired; open your invite link"):
        require(db, session.token, "designer", now=start + dt.timedelta(days=14))
    again = login_with_invite(db, token, now=start + dt.timedelta(days=29))
    require(db, again.token, "designer", now=start + dt.timedelta(days=42))
    with pytest.raises(InvalidToken, match="this invite link expired on 2025-01-31"):
        login_with_invite(db, token, now=start + dt.timedelta(days=30))


def test_require_without_a_session_is_denied(db):
    with pytest.raises(PermissionDenied, match="not signed in"):
        require(db, "", "designer")
    with pytest.raises(PermissionDenied, match="not signed in"):
        require(db, None)
    with pytest.raises(ValueError, match="`roles` must be among"):
        require(db, "x", "superuser")


@pytest.mark.parametrize(
    "n, role, days, message",
    [
        (0, "designer", 30, "`n` must be a whole number from 1 to 500, got 0"),
        (501, "designer", 30, "got 501"),
        (2.5, "designer", 30, "got 2.5"),
        (True, "designer", 30, "got True"),
        (1, "admin", 30, "`role` must be one of"),
        (1, "<script>", 30, "got '<script>'"),
        (1, "designer", 0, "`expires_days` must be in"),
        (
            1,
            "designer",
            1e-8,
            r"`expires_days` must be in \[1/24, 3650\] days \(one hour to ten years\), got 1e-08",
        ),
        (1, "designer", 3651, "got 3651"),
    ],
)
def test_create_annotators_rejects_bad_arguments_and_writes_nothing(db, n, role, days, message):
    before = _dump(db)
    with pytest.raises(InvalidInput, match=message):
        create_annotators(db, n, role, expires_days=days)
    assert _dump(db) == before


def test_new_invite_replaces_a_lost_link(db):
    ((annotator, old),) = create_annotators(db, 1, "expert")
    fresh = new_invite(db, annotator["id"])
    assert fresh != old
    assert login_with_invite(db, fresh).annotator_id == annotator["id"]
    with pytest.raises(InvalidToken, match="this invite link was replaced"):
        login_with_invite(db, old)


def _live_sessions(db, annotator_id):
    return [
        r["token_hash"]
        for r in db.query(
            "select token_hash from sessions where annotator_id = ? and revoked is null order by rowid",
            [annotator_id],
        )
    ]


def test_a_new_invite_ends_every_session_of_the_earlier_link(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((annotator, old),) = create_annotators(db, 1, "designer", now=start)
    phone, laptop = (login_with_invite(db, old, now=start) for _ in range(2))
    fresh = new_invite(db, annotator["id"], now=start + dt.timedelta(hours=1))
    for session in (phone, laptop):
        with pytest.raises(InvalidToken, match="opened with an invite link that has since been replaced"):
            require(db, session.token, "designer", now=start + dt.timedelta(hours=2))
    ended = {r["token_hash"]: (r["revoked"], r["end_reason"]) for r in db["sessions"].rows}
    assert ended == {
        hash_token(s.token): ("2025-01-01T01:00:00.000000Z", "new_invite") for s in (phone, laptop)
    }
    session = login_with_invite(db, fresh, now=start + dt.timedelta(hours=2))
    assert db["sessions"].get(hash_token(session.token))["invite_hash"] == hash_token(fresh)
    assert (
        require(db, session.token, "designer", now=start + dt.timedelta(hours=2)).annotator_id
        == (annotator["id"])
    )
    assert json.loads(db["audit"].get(2)["details"]) == {"revoked_invites": 1, "ended_sessions": 2}


def test_revoking_a_person_ends_all_their_sessions_and_no_one_elses(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    (mine, old), (theirs, other) = create_annotators(db, 2, "expert", now=start)
    sessions = [login_with_invite(db, old, now=start) for _ in range(3)]
    fresh = new_invite(db, mine["id"], now=start)
    sessions.append(login_with_invite(db, fresh, now=start))
    bystander = login_with_invite(db, other, now=start)
    revoke_annotator(db, mine["id"], ADMIN, "left the study", now=start)
    assert _live_sessions(db, mine["id"]) == []
    with pytest.raises(InvalidToken, match="the study admin closed your account"):
        require(db, sessions[-1].token, now=start)
    assert require(db, bystander.token, "expert", now=start).annotator_id == theirs["id"]


def test_opening_a_link_six_times_keeps_five_live_sessions_and_ends_the_oldest(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((annotator, token),) = create_annotators(db, 1, "participant", now=start)
    sessions = [login_with_invite(db, token, now=start + dt.timedelta(minutes=i)) for i in range(6)]
    assert _live_sessions(db, annotator["id"]) == [hash_token(s.token) for s in sessions[1:]]
    with pytest.raises(InvalidToken, match="more than 5 devices or browsers and this was the oldest"):
        require(db, sessions[0].token, now=start + dt.timedelta(minutes=6))
    for session in sessions[1:]:
        require(db, session.token, "participant", now=start + dt.timedelta(minutes=6))
    assert db["sessions"].get(hash_token(sessions[0].token))["end_reason"] == "too_many"


def test_expired_sessions_do_not_count_against_the_cap(db):
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ((annotator, token),) = create_annotators(db, 1, "designer", now=start)
    for _ in range(5):
        login_with_invite(db, token, session_days=1, now=start)
    later = start + dt.timedelta(days=2)
    sessions = [login_with_invite(db, token, now=later) for _ in range(5)]
    for session in sessions:
        require(db, session.token, now=later)
    assert db.execute("select count(*) from sessions where end_reason is not null").fetchone()[0] == 0


def test_a_signed_out_session_says_so(db):
    ((_, token),) = create_annotators(db, 1, "designer")
    session = login_with_invite(db, token)
    logout(db, session.token)
    with pytest.raises(InvalidToken, match="your session is not valid any more: you signed out"):
        require(db, session.token)


def test_a_refusal_quotes_at_most_80_characters_of_a_huge_value(db):
    role = "r" * 1_000_000
    with pytest.raises(InvalidInput) as raised:
        create_annotators(db, 1, role)
    assert str(raised.value) == (
        f"`role` must be one of {('designer', 'expert', 'participant', 'researcher')}, "
        f"got {'r' * 80!r}… (1000000 characters)"
    )


def test_the_people_list_counts_each_kind_of_work_and_when_each_person_was_last_seen(db, tmp_path):
    """A researcher's runs and studies, a designer's practice and withdrawn colorings, and a
    sign-in with nothing done yet (outsiders 82, 83: each read "nothing yet" with no time)."""
    from annotation.coloring.withdrawal import withdraw_colorings
    from annotation.concepts import sync_concepts
    from storage import audit
    from tests.qc_data import add_coloring

    sync_concepts(db)
    at = [dt.datetime(2026, 12, 2, hour, tzinfo=dt.UTC) for hour in range(8, 14)]
    (designer, d_token), (leaver, _) = create_annotators(db, 2, "designer", now=at[0])
    [(researcher, _)] = create_annotators(db, 1, "researcher", now=at[0])
    [(idle, i_token)] = create_annotators(db, 1, "expert", now=at[0])
    data = tmp_path / "data"
    add_coloring(db, data, designer["id"], "apple", (200, 20, 30), practice=True, now=at[1])
    add_coloring(db, data, designer["id"], "banana", (240, 220, 40), now=at[2])
    add_coloring(db, data, leaver["id"], "apple", (30, 160, 40), now=at[1])
    add_coloring(db, data, leaver["id"], "lemon", (240, 220, 40), practice=True, now=at[1])
    withdraw_colorings(db, leaver["id"], ADMIN, "asked by email", now=at[4])
    for action, kind, name in (
        ("start_evaluation", "run", "a"),
        ("start_evaluation", "run", "b"),
        ("import_run", "run", "c"),
        ("create_study", "study", "1"),
    ):
        audit.record(db, researcher["pseudonym"], action, kind, name, now=at[3])
    login_with_invite(db, i_token, now=at[5])
    login_with_invite(db, d_token, now=at[1])
    people = {r["pseudonym"]: r for r in list_annotators(db)}
    counts = (
        "colorings",
        "practice",
        "withdrawn",
        "practice_withdrawn",
        "votes",
        "judgments",
        "runs",
        "studies",
    )
    assert {name: tuple(r[c] for c in counts) for name, r in people.items()} == {
        "D0001": (1, 1, 0, 0, 0, 0, 0, 0),
        "D0002": (0, 0, 1, 1, 0, 0, 0, 0),  # main-task and practice apart, as the Admin tab counts
        "R0003": (0, 0, 0, 0, 0, 0, 3, 1),
        "E0004": (0, 0, 0, 0, 0, 0, 0, 0),
    }

    def hour(name):
        return people[name]["last_active"] and dt.datetime.fromisoformat(people[name]["last_active"]).hour

    # The latest of their work, their own actions and their sign-ins; the admin's withdrawal
    # at 12:00 is not the designer's doing.
    assert {name: hour(name) for name in people} == {"D0001": 10, "D0002": 9, "R0003": 11, "E0004": 13}
