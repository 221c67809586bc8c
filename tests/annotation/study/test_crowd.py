"""Open study links in the library: places, time, end date, resume, codes, payment table."""

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from annotation import assignment
from annotation.__main__ import main
from annotation.errors import Conflict, InvalidInput, InvalidToken, NotFound
from annotation.people.accounts import (
    Actor,
    create_annotators,
    login_with_invite,
    reopen_annotator,
    require,
    revoke_annotator,
)
from annotation.study import crowd, judging
from annotation.study import design as study
from annotation.study.design import GROUND_TRUTH, StudyFrozen
from storage import insert_row, iso, transaction, utcnow
from tests.study_data import populate, sources, truth_source

ADMIN = Actor(None, "admin", frozenset({"admin"}))
T0 = utcnow().replace(microsecond=0)


@pytest.fixture(autouse=True)
def _now():
    """`T0`, the "now" of each test, taken when the test starts: set when the module was
    imported, it lay over half an hour back on a slow day (a clean-clone run of 65 minutes),
    and links of 30 minutes had run out for the calls that take the real time."""
    global T0
    T0 = utcnow().replace(microsecond=0)


DOCS = Path(__file__).parents[3] / "docs" / "crowd.md"
CODES = {"completion_code": "C0MPLETE", "screenout_code": "SCREEN-1"}


@pytest.fixture
def setup(db, tmp_path):
    """A frozen study of 3 concepts (9 pairs and 1 attention check); every participant
    is asked for all 10 trials."""
    return db, _open_study(db, tmp_path, "crowd", seed=1, n_concepts=3, trials_per_participant=10)


def _open_study(db, tmp_path, name, **design) -> int:
    """An open study of the designers' ground truth on 6 populated concepts (`design`:
    `annotation.study.design.create_study`'s options); its id."""
    data_dir = tmp_path / "data"
    truths, _ = populate(db, data_dir, 6, np.random.default_rng(0))
    study_id = study.create_study(db, name, sources(), truth_source(data_dir, truths), **design)
    study.open_study(db, study_id, ADMIN)
    return study_id


def _link(db, study_id, **options):
    settings = {"quota": 10, "minutes": 30, **CODES, **options}
    return crowd.create_link(db, study_id, ADMIN, now=T0 - dt.timedelta(hours=2), **settings)


def _join(db, token, pid, *, address="1.2.3.4", minutes_ago=0.0, **params):
    query = {"PROLIFIC_PID": pid, "STUDY_ID": "S1", "SESSION_ID": f"sess-{pid}", **params}
    return crowd.join(db, token, query, address=address, now=T0 - dt.timedelta(minutes=minutes_ago))


def _actor(db, joined):
    return require(db, joined.session.token, now=T0 - dt.timedelta(hours=1))


def _judge(db, actor, n, *, pass_checks=True, at=None):
    """Judge up to `n` trials; a check is passed or failed as asked. Returns trials judged."""
    judging.set_background(db, actor, True)
    done = 0
    while done < n and (trial := judging.next_trial(db, actor, np.random.default_rng(done), now=at)):
        truth_left = trial.left.item == GROUND_TRUTH
        check = GROUND_TRUTH in (trial.left.item, trial.right.item)
        side = "left" if truth_left == (pass_checks or not check) else "right"
        judging.record_judgment(db, actor, trial.task_id, side, 3.0, now=at)
        done += 1
        if check and not pass_checks:
            break
    return done


def _open_studies(db, tmp_path, specs) -> list[int]:
    """Open studies of the designers' ground truth, one per ``(name, seed, concepts, trials
    per participant)`` of `specs`; their ids."""
    data_dir = tmp_path / "data"
    truths, _ = populate(db, data_dir, 6, np.random.default_rng(0))
    ids = [
        study.create_study(
            db,
            name,
            sources(),
            truth_source(data_dir, truths),
            seed=seed,
            n_concepts=n,
            trials_per_participant=trials,
        )
        for name, seed, n, trials in specs
    ]
    for study_id in ids:
        study.open_study(db, study_id, ADMIN)
    return ids


def _invitee(db) -> Actor:
    """A participant from an invite (who judges every open study)."""
    [(row, _)] = create_annotators(db, 1, "participant")
    return Actor(row["id"], row["pseudonym"], frozenset({"participant"}))


def _dump(db):
    return list(db.conn.iterdump())


def test_a_link_makes_participants_only_and_keeps_only_the_token_hash(setup):
    db, study_id = setup
    link, token = _link(db, study_id)
    joined = _join(db, token, "pid-a")
    actor = _actor(db, joined)
    assert actor.roles == frozenset({"participant"})
    assert json.loads(db["annotators"].get(actor.annotator_id)["roles"]) == ["participant"]
    dump = "\n".join(_dump(db))
    assert token not in dump and joined.session.token not in dump
    assert link["token_hash"] in dump
    assert crowd.link_url("http://host:7860/", token) == (
        f"http://host:7860/?study={token}&PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    # MTurk appends workerId, assignmentId and hitId to an external HIT's URL itself.
    assert crowd.link_url("https://host/", token, "workerId") == f"https://host/?study={token}"
    assert crowd.link_url("https://host/", token, "participantId") == (
        f"https://host/?study={token}&participantId={{{{%participantId%}}}}"
    )


def test_the_same_pid_resumes_its_account_and_its_trials(setup):
    db, study_id = setup
    _, token = _link(db, study_id)
    first = _join(db, token, "pid-a", minutes_ago=5)
    actor = _actor(db, first)
    assert _judge(db, actor, 3) == 3
    again = _join(db, token, "pid-a")
    assert again.resumed and not first.resumed
    assert _actor(db, again) == actor
    assert judging.progress(db, actor) == (3, 10)
    with pytest.raises(
        InvalidToken,
        match="the study link was opened again in another tab, browser or device; go on there, or open the study "
        "link again here",
    ):
        require(db, first.session.token)
    assert db["crowd_participants"].count == 1


def test_a_pid_with_another_platform_session_does_not_take_the_place_over(setup):
    """Whoever knew a PID resumed its place (ending its holder's session) or, for one who
    finished, was shown the completion code; the platform's study and session ids were not
    asked for again (outside probe 108)."""
    db, study_id = setup
    _, token = _link(db, study_id)
    first = _join(db, token, "pid-a", minutes_ago=5)
    before = db["crowd_participants"].get(_actor(db, first).annotator_id)
    for query in (
        {"STUDY_ID": "S1", "SESSION_ID": "sess-thief"},
        {"STUDY_ID": "S2", "SESSION_ID": "sess-pid-a"},
        {"STUDY_ID": "S1"},
        {},
    ):
        with pytest.raises(Conflict, match="^this PROLIFIC_PID took part in this study with another "):
            crowd.join(db, token, {"PROLIFIC_PID": "pid-a", **query}, address="5.6.7.8", now=T0)
    require(db, first.session.token)  # still theirs
    assert db["crowd_participants"].get(before["annotator_id"]) == before
    assert _join(db, token, "pid-a").resumed  # their own session's ids
    # One who first came without a session id has the one they bring next recorded.
    crowd.join(db, token, {"PROLIFIC_PID": "pid-b"}, address="1.2.3.4", now=T0 - dt.timedelta(minutes=4))
    assert _join(db, token, "pid-b").resumed
    with pytest.raises(Conflict):
        _join(db, token, "pid-b", SESSION_ID="sess-thief")
    [row] = db["crowd_participants"].rows_where("external_id = ?", ["pid-b"])
    assert (row["platform_study_id"], row["platform_session_id"]) == ("S1", "sess-pid-b")


def test_the_same_pid_through_a_second_link_of_the_study_is_the_same_participant(setup):
    db, study_id = setup
    first_link, first = _link(db, study_id)
    _, second = _link(db, study_id)
    joined = _join(db, first, "pid-a", minutes_ago=5)
    actor = _actor(db, joined)
    assert _judge(db, actor, 10) == 10
    assert crowd.settle(db, actor, now=T0).code == "C0MPLETE"  # every trial: finished
    again = _join(db, second, "pid-a")
    assert again.resumed and again.state.finished and _actor(db, again) == actor
    assert db["crowd_participants"].count == 1
    assert [r["link_id"] for r in db["crowd_participants"].rows] == [first_link["id"]]
    # Another id through the second link is a new person of that link.
    other = _join(db, second, "pid-b")
    assert not other.resumed and db["crowd_participants"].count == 2
    # The same id under another id parameter (another platform) is not this person.
    _, third = _link(db, study_id, id_param="workerId")
    assert not crowd.join(db, third, {"workerId": "pid-a"}, address="5.6.7.8", now=T0).resumed


@pytest.mark.parametrize(
    "options, when, message",
    [
        ({"quota": 1}, None, "this study is full: its one place is taken"),
        (
            {},
            "closed",
            "^this study link is closed and takes no new participants; please return it on the platform$",
        ),
        (
            {},
            "study closed",
            "^this study is closed and takes no new participants; please return it on the platform$",
        ),
        (
            {"ends": T0 - dt.timedelta(minutes=1)},
            None,
            r"this study ended on .*; please return it on the platform",
        ),
    ],
)
def test_a_full_closed_or_ended_link_refuses_the_next_person_and_writes_nothing(
    setup, options, when, message
):
    db, study_id = setup
    ends = options.pop("ends", None)
    link, token = _link(db, study_id, **options)
    _join(db, token, "pid-a", minutes_ago=10)
    if when == "closed":
        crowd.close_link(db, link["id"], ADMIN, now=T0 - dt.timedelta(minutes=5))
    if when == "study closed":
        study.close_study(db, study_id, ADMIN, "enough votes", now=T0 - dt.timedelta(minutes=5))
    if ends is not None:
        db["crowd_links"].update(link["id"], {"ends": iso(ends)})
    before = _dump(db)
    with pytest.raises(crowd.LinkClosed, match=message):
        _join(db, token, "pid-b")
    assert _dump(db) == before


def test_a_place_freed_by_a_time_out_or_a_return_is_taken_again(setup):
    db, study_id = setup
    link, token = _link(db, study_id, quota=1)
    _join(db, token, "pid-a", minutes_ago=31)
    assert not _join(db, token, "pid-b").resumed
    crowd.mark_returned(db, link["id"], "pid-b", ADMIN, now=T0)
    # A second press says it was done already (it said "marked returned" again); an empty id is named.
    before = _dump(db)
    with pytest.raises(Conflict, match=r"^'pid-b' is marked returned already; nothing changed$"):
        crowd.mark_returned(db, link["id"], "pid-b", ADMIN, now=T0)
    with pytest.raises(
        InvalidInput, match=r"^`External id` is empty: type the platform id of the person to mark"
    ):
        crowd.mark_returned(db, link["id"], "", ADMIN, now=T0)
    assert _dump(db) == before
    assert not _join(db, token, "pid-c").resumed
    with pytest.raises(Conflict, match="your time for this study ran out"):
        _join(db, token, "pid-a")
    with pytest.raises(Conflict, match="you returned this study"):
        _join(db, token, "pid-b")


def test_closing_a_crowd_persons_account_frees_their_place_and_they_cannot_come_back(setup):
    """Their place stayed taken (the link "full", the payment table "active") until their
    time ran out; an outside check had to press Mark returned."""
    db, study_id = setup
    link, token = _link(db, study_id, quota=1)
    person = _actor(db, _join(db, token, "pid-a"))
    with pytest.raises(crowd.LinkClosed, match="its one place is taken"):
        _join(db, token, "pid-b")
    revoke_annotator(db, person.annotator_id, ADMIN, "a bot", now=T0)
    counts = crowd.live_counts(db, link["id"], now=T0)
    assert (counts["active"], counts["account_closed"], counts["places_left"]) == (0, 1, 1)
    assert list(crowd.payment_rows(db, link["id"], now=T0)["status"]) == ["account_closed"]
    assert not _join(db, token, "pid-b").resumed
    with pytest.raises(Conflict, match="the organisers closed your account for this study"):
        _join(db, token, "pid-a")
    # Neither marked returned nor let start again: it was taken, and the closed account's
    # record lost, then let start again (outside probe 224).
    before = _dump(db)
    with pytest.raises(Conflict, match=r"^'pid-a' has status account_closed; it is not changed to returned$"):
        crowd.mark_returned(db, link["id"], "pid-a", ADMIN, now=T0)
    with pytest.raises(Conflict, match=r"^'pid-a' has status account_closed: their part is over"):
        crowd.let_start_again(db, link["id"], "pid-a", ADMIN, now=T0)
    assert _dump(db) == before


def test_a_newcomer_is_refused_once_the_pairs_votes_are_spoken_for(setup):
    """9 model pairs of 6 votes each want 54 votes; each person is asked for 10 trials, 9 of
    them model pairs beside one attention check: six people can be given their trials, a
    seventh would find none, so places beyond the study's votes are refused before anyone
    agrees and starts the clock."""
    db, study_id = setup
    assert db["studies"].get(study_id)["votes_per_pair"] == 6
    link, token = _link(db, study_id, quota=100)
    people = [_actor(db, _join(db, token, f"pid-{i}")) for i in range(6)]
    before = _dump(db)
    # (It said the pairs had all the votes they need, none cast yet.)
    owed = "this study is full: the votes its pairs still need are owed to the people already in it"
    with pytest.raises(crowd.LinkClosed, match=owed):
        _join(db, token, "pid-6")
    assert _dump(db) == before
    assert _judge(db, people[0], 10) == 10  # what was owed is now cast: still no room
    with pytest.raises(crowd.LinkClosed, match=owed):
        _join(db, token, "pid-6")
    crowd.mark_returned(db, link["id"], "pid-1", ADMIN, now=T0)  # their 10 votes are wanted again
    assert not _join(db, token, "pid-6").resumed
    assert _join(db, token, "pid-2").resumed  # someone already in always comes back
    # Someone who leaves after 3 of their 10 trials (one of them their check) frees 6 votes,
    # fewer than one person's 9 beside their check: the refusal says so (it said the pairs had
    # all their votes, with 7 still open).
    assert _judge(db, people[3], 3) == 3
    crowd.mark_returned(db, link["id"], "pid-3", ADMIN, now=T0)
    with pytest.raises(
        crowd.LinkClosed,
        match=r"has fewer trials left \(6\) than one person takes \(9, not counting attention checks\)",
    ):
        _join(db, token, "pid-7")
    for person in [*people[2:3], *people[4:], _actor(db, _join(db, token, "pid-6"))]:
        assert _judge(db, person, 10) == 10
    # An invited participant takes the 7; then every pair has its votes.
    assert _judge(db, _invitee(db), 10) >= 7
    assert crowd.votes_left(db, study_id)[2] == 0
    with pytest.raises(crowd.LinkClosed, match="this study is full: its pairs have all the votes they need"):
        _join(db, token, "pid-8")


def test_attention_checks_are_not_counted_as_votes_a_newcomer_could_give(db, tmp_path):
    """With every model pair's votes cast, a newcomer read "fewer trials left (2) than one
    person takes (8)": the check pairs, which take any number of answers, were counted as
    pairs still wanting ``votes_per_pair`` votes each (outside probe 198)."""
    study_id = _open_study(
        db,
        tmp_path,
        "checks",
        seed=198,
        n_concepts=4,
        votes_per_pair=3,
        attention_rate=0.2,
        trials_per_participant=8,
    )
    _, token = _link(db, study_id, quota=100)
    # 12 model pairs of 3 votes; 8 trials hold one run of 5 and its check, and maybe a second
    assert crowd.votes_left(db, study_id)[:4] == (36, 7, 36, 0.2)
    while crowd.votes_left(db, study_id).needed > 0:
        assert _judge(db, _invitee(db), 8) > 0
    answers = [
        n
        for (n,) in db.execute(
            f"select (select count(*) from judgments j where j.pair_id = p.id) from study_pairs p "
            f"where p.study_id = ? and {assignment.IS_CHECK}",
            [study_id],
        )
    ]
    assert len(answers) == 3 and min(answers) < 3, answers  # a check pair short of 3 answers
    before = _dump(db)
    with pytest.raises(
        crowd.LinkClosed, match=r"^this study is full: its pairs have all the votes they need; please return"
    ):
        _join(db, token, "pid-late")
    assert _dump(db) == before


def _voted_study(db, tmp_path, seed, votes):
    """An open study of 6 model pairs at 6 votes each, 5 trials a person (4 model pairs and a
    check at 0.2), a link of 100 places, and `votes[i]` votes cast on its i-th model pair by
    six invited participants; ``(study id, link token, pair ids, the six's ids)``."""
    study_id = _open_study(
        db,
        tmp_path,
        f"voted {seed}",
        seed=seed,
        n_concepts=2,
        votes_per_pair=6,
        attention_rate=0.2,
        trials_per_participant=5,
    )
    _, token = _link(db, study_id, quota=100)
    pairs = [
        p["id"]
        for p in db.query(
            f"select p.id from study_pairs p where p.study_id = ? and not {assignment.IS_CHECK} order by p.id",
            [study_id],
        )
    ]
    assert len(pairs) == 6 and crowd.votes_left(db, study_id).asked == 4
    people = [_invitee(db).annotator_id for _ in range(6)]
    with transaction(db):
        for pair, n in zip(pairs, votes):
            left = db.execute("select a from study_pairs where id = ?", [pair]).fetchone()[0]
            for who in people[:n]:
                row = {"pair_id": pair, "participant_id": who, "left_item": left, "choice": "left"}
                insert_row(db, "judgments", {**row, "winner": left, "created": iso(T0)})
    return study_id, token, pairs, people


def test_a_newcomer_is_not_let_in_when_too_few_pairs_can_take_their_votes(db, tmp_path):
    """Outside probe 216: with 4 votes still needed, 0 + 1 + 1 + 2 on four model pairs, a
    newcomer asked for 4 model-pair trials was let in, judged the three pairs open to them and
    read "No pair is waiting for you right now (4 of 5 judged)" until their time ran out:
    each person votes on a pair once."""
    study_id, token, pairs, people = _voted_study(db, tmp_path, 216, [6, 5, 5, 4, 6, 6])
    assert crowd.votes_left(db, study_id)[:3] == (4, 4, 4) and crowd.open_pairs(db, study_id) == 3
    before = _dump(db)
    with pytest.raises(
        crowd.LinkClosed,
        match=r"^this study has fewer model pairs still open to a vote \(3\) than one person takes \(4, not "
        r"counting attention checks\), and each person judges a pair once; please return it on the platform$",
    ):
        _join(db, token, "pid-stranded")
    assert _dump(db) == before
    # One vote each on four pairs: the newcomer is let in and finishes with their code.
    with transaction(db):
        db.execute("delete from judgments where pair_id = ? and participant_id = ?", [pairs[0], people[5]])
    assert crowd.open_pairs(db, study_id) == 4
    newcomer = _actor(db, _join(db, token, "pid-whole"))
    assert _judge(db, newcomer, 5) == 5
    assert judging.progress(db, newcomer) == (5, 5)
    assert crowd.settle(db, newcomer).status == "completed"


def test_a_second_newcomer_is_not_let_in_when_the_two_cannot_both_be_placed(db, tmp_path):
    """Outside probe 218: with votes 5 + 1 + 1 + 1 still needed on four model pairs, two
    newcomers asked for 4 each joined before either started: each fitted alone (8 votes, 4
    pairs), but the first took all four pairs and the second judged one pair and was never done."""
    study_id, token, _, _ = _voted_study(db, tmp_path, 218, [1, 5, 5, 5, 6, 6])
    first = _actor(db, _join(db, token, "pid-first"))
    room = crowd.votes_left(db, study_id)
    assert (room.left, room.asked, room.owed_each) == (4, 4, (4,)) and crowd.open_pairs(db, study_id) == 4
    assert not crowd.everyone_fits(db, study_id, room)
    before = _dump(db)
    with pytest.raises(
        crowd.LinkClosed,
        match=r"^this study cannot give one more person all their trials: the votes its pairs still need are "
        r"on too few pairs for the people already in it and one more, and each person judges a pair once; ",
    ):
        _join(db, token, "pid-second")
    assert _dump(db) == before
    assert _judge(db, first, 5) == 5 and crowd.settle(db, first).status == "completed"
    # A fresh study's pairs take as many people as its votes cover.
    fresh = _open_study(
        db, tmp_path, "fresh", seed=2180, n_concepts=2, votes_per_pair=2, trials_per_participant=3
    )
    _, fresh_token = _link(db, fresh, quota=100)
    room = crowd.votes_left(db, fresh)
    for i in range(room.needed // room.asked):
        _join(db, fresh_token, f"pid-fresh-{i}")
    with pytest.raises(crowd.LinkClosed, match="owed to the people already in it|fewer trials left"):
        _join(db, fresh_token, "pid-fresh-last")


def test_a_newcomer_is_not_let_in_when_the_people_in_can_judge_only_a_pair_they_would_take(db, tmp_path):
    """Needs 2 + 1 + 1 + 1 on four model pairs; the one person in judged the first three and
    is owed one trial, which only the fourth pair can give. A newcomer asked for 4 must take
    all four pairs, the fourth's last vote too: a count of pairs alone (Gale–Ryser's test)
    let them in, and one of the two was never done."""
    study_id, token, pairs, people = _voted_study(db, tmp_path, 2181, [3, 4, 4, 5, 6, 6])
    early = _actor(db, _join(db, token, "pid-early"))
    with transaction(db):  # the person in judged the first three pairs
        for pair in pairs[:3]:
            left = db.execute("select a from study_pairs where id = ?", [pair]).fetchone()[0]
            row = {"pair_id": pair, "participant_id": early.annotator_id, "left_item": left, "choice": "left"}
            insert_row(db, "judgments", {**row, "winner": left, "created": iso(T0)})
    room = crowd.votes_left(db, study_id)
    assert (room.left, room.asked, room.needed, room.owed_each, room.owed_to) == (
        4,
        4,
        5,
        (1,),
        (early.annotator_id,),
    )
    assert crowd.open_pairs(db, study_id) == 4
    assert not crowd.everyone_fits(db, study_id, room)
    before = _dump(db)
    with pytest.raises(crowd.LinkClosed, match=r"^this study cannot give one more person all their trials"):
        _join(db, token, "pid-newcomer")
    assert _dump(db) == before
    # One more vote needed on the fourth pair: both fit, and the newcomer finishes.
    with transaction(db):
        db.execute("delete from judgments where pair_id = ? and participant_id = ?", [pairs[3], people[4]])
    assert crowd.everyone_fits(db, study_id, crowd.votes_left(db, study_id))
    newcomer = _actor(db, _join(db, token, "pid-newcomer"))
    assert _judge(db, newcomer, 5) == 5 and crowd.settle(db, newcomer).status == "completed"
    mine = {
        p
        for (p,) in db.execute(
            "select pair_id from judgments where participant_id = ?", [newcomer.annotator_id]
        )
    }
    assert set(pairs[:4]) <= mine


def test_no_link_is_made_for_a_study_that_would_turn_everyone_away(db, tmp_path):
    """Outside probe 222: *Make open link* on a study whose pairs had all their votes made a
    link without a word, and everyone who opened it read "this study is full"; so it was
    for a closed study."""
    study_id, _, pairs, people = _voted_study(db, tmp_path, 222, [6] * 6)
    name = db["studies"].get(study_id)["name"]
    before = _dump(db)
    with pytest.raises(
        InvalidInput,
        match=rf"^study '{name}' has all the votes its model pairs need \(6 each\), so a link to it would "
        "turn everyone away$",
    ):
        _link(db, study_id)
    assert _dump(db) == before
    with transaction(db):  # one vote withdrawn: the pair needs it again
        db.execute("delete from judgments where pair_id = ? and participant_id = ?", [pairs[0], people[0]])
    link, _ = _link(db, study_id)
    study.close_study(db, study_id, ADMIN, "enough votes", now=T0)
    before = _dump(db)
    with pytest.raises(
        InvalidInput,
        match=rf"^study '{name}' was closed on \d{{4}}-\d\d-\d\d \d\d:\d\d UTC, so a link to it would turn",
    ):
        _link(db, study_id)
    assert _dump(db) == before


def test_people_of_another_link_whose_time_ran_out_do_not_keep_a_newcomer_out(db, tmp_path):
    """Outside probe 224: with a top-up link, people of the other link whose time had run out
    still counted as in, and newcomers read "this study is full: the votes its pairs still
    need are owed to the people already in it" until someone opened that link's payments."""
    study_id, token, _, _ = _voted_study(db, tmp_path, 2240, [5, 5, 5, 5, 6, 6])
    _, other = _link(db, study_id)
    early = _actor(db, _join(db, other, "pid-early", minutes_ago=40))  # out of time 10 minutes ago
    late = _actor(db, _join(db, token, "pid-late"))
    assert _judge(db, late, 5) == 5 and crowd.settle(db, late).status == "completed"
    [status] = db.execute(
        "select status from crowd_participants where annotator_id = ?", [early.annotator_id]
    ).fetchone()
    assert status == "timed_out"


def _judged_by(db, actor, n, rng):
    """Up to `n` trials judged by `actor`, each drawn with `rng`; how many."""
    judging.set_background(db, actor, True)
    done = 0
    while done < n and (trial := judging.next_trial(db, actor, rng)) is not None:
        judging.record_judgment(db, actor, trial.task_id, "left", 2.0)
        done += 1
    return done


def _taken_back(db, tmp_path, seed, trials, first):
    """One concept's 3 model pairs at 2 votes each, `trials` per person, no check: R judges
    `first` and returns; B judges `trials` (or 1, returned, when R is to end one short of a
    single pair); R is let start again and comes back. ``(link token, R, rng)``."""
    study_id = _open_study(
        db,
        tmp_path,
        f"back {seed}",
        seed=seed,
        n_concepts=1,
        votes_per_pair=2,
        trials_per_participant=trials,
        attention_rate=0.0,
    )
    link, token = _link(db, study_id, quota=10)
    rng = np.random.default_rng(seed)
    assert _judged_by(db, _actor(db, _join(db, token, "R")), first, rng) == first
    crowd.mark_returned(db, link["id"], "R", ADMIN, now=T0)
    other = _actor(db, _join(db, token, "B"))
    if trials - first == 1:
        assert _judged_by(db, other, 1, rng) == 1
        crowd.mark_returned(db, link["id"], "B", ADMIN, now=T0)
    else:
        assert _judged_by(db, other, trials, rng) == trials
    crowd.let_start_again(db, link["id"], "R", ADMIN, now=T0)
    back = _actor(db, _join(db, token, "R", SESSION_ID="sess-R-2"))
    return token, back, rng


@pytest.mark.parametrize("seed", range(6))
def test_a_newcomers_hand_out_leaves_a_person_taken_back_the_pairs_they_need(db, tmp_path, seed):
    """Outside probe 224: R, taken back, could finish on only the two pairs they had not
    judged; a newcomer let in (rightly: a placement holds both) pressed Start first and
    was handed exactly those two, and R read "No pair is waiting for you" until time ran
    out (12 of 20 seeds). Trials are handed out by the placement."""
    token, back, rng = _taken_back(db, tmp_path, seed, trials=2, first=1)
    newcomer = _actor(db, _join(db, token, "N"))
    assert _judged_by(db, newcomer, 2, rng) == 2
    assert _judged_by(db, back, 2, rng) == 1 and judging.progress(db, back) == (2, 2)
    assert crowd.settle(db, back).status == "completed"


@pytest.mark.parametrize("seed", range(6))
def test_an_invitee_takes_no_pair_a_person_taken_back_still_needs(db, tmp_path, seed):
    """Outside probe 224: R, taken back, needed one pair more; an invited participant was
    handed it (the room beside the crowd was a count of votes, not of pairs), and R was
    told to come back after their own time limit (13 of 20 seeds)."""
    _, back, rng = _taken_back(db, tmp_path, seed, trials=3, first=2)
    invitee = _invitee(db)
    judging.set_background(db, invitee, False)
    while (trial := judging.next_trial(db, invitee, rng)) is not None:
        judging.record_judgment(db, invitee, trial.task_id, "left", 2.0)
    assert _judged_by(db, back, 3, rng) == 1 and judging.progress(db, back) == (3, 3)
    assert crowd.settle(db, back).status == "completed"


def test_an_invited_participant_part_way_keeps_their_trials_from_newcomers(setup):
    """An outside check: five crowd newcomers took the trials of two invited participants
    part-way through, whose "Trial 2 of 20" became "of 10". An invitee who holds trials of
    the study is one of the people already in; once their held trials ran out, not."""
    db, study_id = setup
    _, token = _link(db, study_id, quota=100)
    # six people's trials: 54 model votes, 9 model pairs in each person's 10 trials
    assert crowd.votes_left(db, study_id)[:4] == (54, 9, 54, 0.1)
    invitee = _invitee(db)
    judging.set_background(db, invitee, True)
    assert judging.next_trial(db, invitee, np.random.default_rng(0)) is not None  # holds their batch
    assert crowd.votes_left(db, study_id)[:4] == (45, 9, 54, 0.1)
    newcomers = [_actor(db, _join(db, token, f"pid-{i}")) for i in range(5)]
    with pytest.raises(crowd.LinkClosed, match="owed to the people already in it"):
        _join(db, token, "pid-5")
    # An invitee who stopped part-way holds a share only while their held trials last.
    later = utcnow() + dt.timedelta(minutes=assignment.RESERVATION_MINUTES + 1)
    assert crowd.votes_left(db, study_id, now=later)[:4] == (9, 9, 54, 0.1)
    # Nothing was taken from the invitee: each of their 10 trials comes, and the newcomers' too.
    assert _judge(db, invitee, 10) == 10 and judging.progress(db, invitee) == (10, 10)
    assert [_judge(db, person, 10) for person in newcomers] == [10] * 5


def test_people_let_in_by_a_link_keep_their_share_from_an_invitee_arriving_before_they_start(setup):
    """A person let in holds no trial until they agree and press Start: an invitee arriving
    meanwhile took the pairs their place was counted on, and the last of them timed out with
    no trial and no code (outside probe 137). The invitee takes what is left beyond them."""
    db, study_id = setup
    _, token = _link(db, study_id)
    waiting = [_actor(db, _join(db, token, f"pid-{i}")) for i in range(5)]  # at the consent text
    assert crowd.votes_left(db, study_id)[:4] == (9, 9, 54, 0.1)
    early = _invitee(db)
    assert _judge(db, early, 10) == 10  # the study's spare votes (one person's trials)
    late = _invitee(db)
    judging.set_background(db, late, True)
    assert judging.next_trial(db, late, np.random.default_rng(0)) is None  # the rest is owed
    # ... until the last of them is done or out of time, which the invitee is told
    assert judging.kept_for_links(db, late) == iso(T0 + dt.timedelta(minutes=30))
    assert judging.kept_for_links(db, late, now=T0 + dt.timedelta(minutes=30)) is None
    assert judging.kept_for_links(db, early) is None  # they judged every pair they may
    assert [_judge(db, person, 10) for person in waiting] == [10] * 5
    assert crowd.votes_left(db, study_id)[2] == 0
    assert judging.kept_for_links(db, late) is None


def test_closing_a_study_ends_its_link_people_still_judging_as_study_closed(setup):
    """They stayed `active`: their minutes ran on in the payments, and at their deadline they
    read as `timed_out`, as if they had let their time run out (outside probe 138)."""
    db, study_id = setup
    link, token = _link(db, study_id)
    judging_person = _actor(db, _join(db, token, "pid-a", minutes_ago=5))
    crowd.consent(db, judging_person, True, now=T0 - dt.timedelta(minutes=4))
    assert _judge(db, judging_person, 3, at=T0 - dt.timedelta(minutes=3)) == 3
    done = _actor(db, _join(db, token, "pid-b", minutes_ago=5))
    crowd.consent(db, done, True, now=T0 - dt.timedelta(minutes=4))
    assert _judge(db, done, 10, at=T0 - dt.timedelta(minutes=3)) == 10
    assert crowd.settle(db, done, now=T0 - dt.timedelta(minutes=3)).status == "completed"
    study.close_study(db, study_id, ADMIN, "enough votes", now=T0)
    later = T0 + dt.timedelta(hours=2)  # past every deadline
    table = crowd.payment_rows(db, link["id"], now=later).set_index("participant_id")
    assert table.loc["pid-a", ["status", "finished", "minutes", "trials", "code"]].tolist() == [
        "study_closed",
        iso(T0),
        5.0,
        3,
        "",
    ]
    assert table.loc["pid-b", "status"] == "completed"  # finished before: unchanged
    assert crowd.live_counts(db, link["id"], now=later)["study_closed"] == 1
    with pytest.raises(Conflict, match="no more votes are taken"):
        crowd.check_active(db, judging_person)
    with pytest.raises(Conflict, match="has status study_closed: their part is over"):
        crowd.let_start_again(db, link["id"], "pid-a", ADMIN)
    [details] = [
        json.loads(r[0]) for r in db.execute("select details from audit where action = 'close_study'")
    ]
    assert details["ended_link_people"] == 1


def test_an_invitee_holding_trials_of_another_study_keeps_their_share_of_this_one(db, tmp_path):
    """An invited participant judges every open study: holding trials of one, they are in
    the other's count too (an outside check's invitee paused on "Trial 10 of 35" holding
    trials of one study, and newcomers of the other left them "of 28")."""
    ids = _open_studies(db, tmp_path, [("first", 1, 3, 10), ("second", 2, 3, 10)])
    invitee = _invitee(db)
    judging.set_background(db, invitee, True)
    assert judging.next_trial(db, invitee, np.random.default_rng(0), batch_size=1) is not None
    [held] = {
        r[0]
        for r in db.execute(
            "select p.study_id from tasks t join study_pairs p on p.id = t.pair_id where t.status = 'reserved'"
        )
    }
    assert [crowd.votes_left(db, study_id)[:4] for study_id in ids] == [(45, 9, 54, 0.1)] * 2, held


def test_a_person_whose_check_falls_on_their_last_trial_meets_it_and_completes(setup):
    """Asked for every pair of a study (9 pairs and a check, 10 trials), one person in ten
    has their check drawn for trial 10, when every model pair is judged: the check was
    withheld (no model pair was left for them) and they could never complete."""
    db, study_id = setup
    _, token = _link(db, study_id)
    # Annotator ids run in order: skip ahead to one whose check is drawn for trial 10.
    while assignment.checks_due(0.1, 9, next_id := db["annotators"].count + 1, study_id) > 0:
        create_annotators(db, 1, "participant")
    actor = _actor(db, _join(db, token, "pid-a"))
    assert actor.annotator_id == next_id
    assert _judge(db, actor, 10) == 10
    assert crowd.settle(db, actor, now=T0).code == "C0MPLETE"
    last = db.execute(
        f"select {assignment.IS_CHECK} from judgments j join study_pairs p on p.id = j.pair_id "
        "where j.participant_id = ? order by j.id desc limit 1",
        [actor.annotator_id],
    ).fetchone()[0]
    assert last == 1  # the tenth trial was the check


def test_bad_links_and_ids_are_refused_with_the_field_named(setup):
    db, study_id = setup
    _, token = _link(db, study_id, id_param="workerId")
    with pytest.raises(InvalidToken, match="not valid"):
        _join(db, token + "x", "pid-a", workerId="w1")
    with pytest.raises(InvalidInput, match="participant id in `workerId`"):
        _join(db, token, "pid-a")
    for bad in ("<script>", "-A1+B2", "x" * 65, "café", "١٢٣"):
        with pytest.raises(
            InvalidInput, match=r"`workerId` must be 1-64 letters, .* \(ASCII letters a-z, A-Z"
        ):
            _join(db, token, "pid-a", workerId=bad)
    assert _join(db, token, "ignored", workerId="A1B2").state.external_id == "A1B2"


def test_an_mturk_worker_is_kept_by_hit_and_assignment_and_approved_by_the_assignment(setup):
    """MTurk appends hitId and assignmentId to an external HIT's URL and approves, pays and
    bonuses by the assignment: outside probe 111 found payments.csv's study and session ids
    empty and approve.txt listing worker ids."""
    db, study_id = setup
    submit = "https://www.mturk.com/mturk/externalSubmit?assignmentId={assignmentId}&code={code}"
    link, token = _link(db, study_id, id_param="workerId", return_url=submit)
    before = _dump(db)
    with pytest.raises(crowd.HitPreview, match="^accept the HIT on MTurk to start the study"):
        crowd.join(db, token, {"assignmentId": crowd.MTURK_PREVIEW, "hitId": "H1"}, address="1.2.3.4", now=T0)
    assert _dump(db) == before
    query = {"workerId": "W1", "hitId": "H1", "assignmentId": "A1", "turkSubmitTo": "https://www.mturk.com"}
    joined = crowd.join(db, token, query, address="1.2.3.4", now=T0 - dt.timedelta(minutes=20))
    worker = _actor(db, joined)
    assert _judge(db, worker, 10) == 10
    # Sent back to MTurk's external submit with the assignment (outside probe 112: one code
    # for everyone named no assignment, so an ExternalQuestion HIT could not be submitted).
    assert crowd.settle(db, worker, now=T0).return_url == (
        "https://www.mturk.com/mturk/externalSubmit?assignmentId=A1&code=C0MPLETE"
    )
    with pytest.raises(
        Conflict, match="this workerId has finished this study already, with another assignmentId"
    ):
        crowd.join(db, token, {**query, "assignmentId": "A2"}, address="1.2.3.4", now=T0)
    table = crowd.payment_rows(db, link["id"], now=T0)
    assert table[["participant_id", "status", "study_id", "session_id"]].values.tolist() == [
        ["W1", "completed", "H1", "A1"]
    ]
    assert crowd.approval_ids(table, id_param="workerId") == "A1\n"
    assert crowd.bonus_csv(table, 0.05, id_param="workerId") == "W1,A1,0.50\n"


def test_an_mturk_worker_who_does_not_agree_is_given_no_link_that_would_submit_the_hit(setup):
    """The no-code link went to MTurk's external submit with ``code=`` empty: it would submit
    the assignment, where the worker should return the HIT (outside probe 171)."""
    db, study_id = setup
    submit = "https://www.mturk.com/mturk/externalSubmit?assignmentId={assignmentId}&code={code}"
    _, token = _link(db, study_id, id_param="workerId", return_url=submit)
    query = {"workerId": "W1", "hitId": "H1", "assignmentId": "A1"}
    worker = _actor(db, crowd.join(db, token, query, address="1.2.3.4", now=T0))
    state = crowd.consent(db, worker, False, now=T0)
    # No way back but MTurk's own (tests/app/test_crowd.py: what the page says instead).
    assert (state.status, state.code, state.return_url, state.platform_url) == ("returned", "", "", "")


def test_a_worker_who_returned_the_hit_and_took_it_again_goes_on_once_let_start_again(setup):
    """Outside probe 112: an MTurk worker who returned the HIT and accepted it again came
    with a new assignment and was refused for good, their place held until it timed out."""
    db, study_id = setup
    submit = "https://www.mturk.com/mturk/externalSubmit?assignmentId={assignmentId}&code={code}"
    link, token = _link(db, study_id, id_param="workerId", quota=1, return_url=submit)
    first = {"workerId": "W1", "hitId": "H1", "assignmentId": "A1"}
    again = {**first, "assignmentId": "A2"}
    worker = _actor(db, crowd.join(db, token, first, address="1.2.3.4", now=T0 - dt.timedelta(minutes=10)))
    assert _judge(db, worker, 3) == 3
    with pytest.raises(
        Conflict, match=r"another assignmentId: .* returned it and took it again, write to the"
    ):
        crowd.join(db, token, again, address="1.2.3.4", now=T0)
    with pytest.raises(crowd.LinkClosed, match="its one place is taken"):
        crowd.join(
            db, token, {"workerId": "W2", "hitId": "H1", "assignmentId": "B1"}, address="5.6.7.8", now=T0
        )

    row = crowd.let_start_again(db, link["id"], "W1", ADMIN, now=T0)
    assert (row["status"], row["platform_session_id"]) == ("may_restart", "A1")
    assert crowd.live_counts(db, link["id"], now=T0)["places_left"] == 1
    held = "select count(*) from tasks where annotator_id = ? and kind = 'judgment' and status = 'reserved'"
    assert db.execute(held, [worker.annotator_id]).fetchone()[0] == 0  # back to the pool
    with pytest.raises(Conflict, match="the organisers let you start this study again"):
        crowd.check_active(db, worker, now=T0)
    before = _dump(db)
    for external_id, error, message in (
        ("W1", Conflict, r"^'W1' may start again already; nothing changed$"),
        ("W9", NotFound, r"^nobody with the id 'W9' joined open link"),
        ("", InvalidInput, r"^`External id` is empty: type the platform id of the person to let start again"),
        ("(erased 7)", InvalidInput, r"is what an erased person's id reads"),
    ):
        with pytest.raises(error, match=message):
            crowd.let_start_again(db, link["id"], external_id, ADMIN, now=T0)
    assert _dump(db) == before

    joined = crowd.join(db, token, again, address="1.2.3.4", now=T0)
    assert joined.resumed and joined.state.status == "active"
    row = db["crowd_participants"].get(worker.annotator_id)
    assert (row["platform_session_id"], row["started"], row["finished"]) == ("A2", iso(T0), None)
    worker = _actor(db, joined)
    assert judging.progress(db, worker) == (3, 10)  # the votes they gave count
    with pytest.raises(crowd.LinkClosed, match="its one place is taken"):
        crowd.join(
            db, token, {"workerId": "W2", "hitId": "H1", "assignmentId": "B1"}, address="5.6.7.8", now=T0
        )
    assert _judge(db, worker, 7, at=T0) == 7
    state = crowd.settle(db, worker, now=T0)
    assert state.return_url == "https://www.mturk.com/mturk/externalSubmit?assignmentId=A2&code=C0MPLETE"
    assert crowd.approval_ids(crowd.payment_rows(db, link["id"], now=T0), id_param="workerId") == "A2\n"
    # Paid for both visits, from the first start: 10 minutes until let start again, then none
    # (outside probes 223 and 225: the new start replaced the first visit's).
    [paid] = crowd.payment_rows(db, link["id"], now=T0).to_dict("records")
    assert (paid["started"], paid["minutes"]) == (iso(T0 - dt.timedelta(minutes=10)), 10.0)
    # Finished, a second HIT of the study is told so (it read "took part ... with another hitId").
    with pytest.raises(Conflict, match=r"^this workerId has finished this study already, with another hitId"):
        crowd.join(
            db, token, {"workerId": "W1", "hitId": "H2", "assignmentId": "C1"}, address="1.2.3.4", now=T0
        )
    with pytest.raises(Conflict, match=r"^'W1' has status completed: their part is over"):
        crowd.let_start_again(db, link["id"], "W1", ADMIN, now=T0)
    actions = [
        r["action"]
        for r in db.query(
            "select action from audit where object_type = 'annotator' and object_id = ? order by id",
            [worker.annotator_id],
        )
    ]
    assert [a for a in actions if a.startswith("crowd_")] == ["crowd_may_restart", "crowd_restart"]


def test_one_let_start_again_comes_back_only_to_a_free_place_and_a_closed_account_does_not(setup):
    db, study_id = setup
    link, token = _link(db, study_id, quota=1)
    _join(db, token, "pid-a", minutes_ago=31)  # timed out
    crowd.let_start_again(db, link["id"], "pid-a", ADMIN, now=T0)
    assert not _join(db, token, "pid-b").resumed  # the free place goes to whoever comes first
    before = _dump(db)
    with pytest.raises(crowd.LinkClosed, match="its one place is taken"):
        _join(db, token, "pid-a", SESSION_ID="sess-new")
    assert _dump(db) == before
    crowd.mark_returned(db, link["id"], "pid-b", ADMIN, now=T0)
    person = _actor(db, _join(db, token, "pid-a", SESSION_ID="sess-new"))
    assert db["crowd_participants"].get(person.annotator_id)["platform_session_id"] == "sess-new"
    crowd.let_start_again(db, link["id"], "pid-a", ADMIN, now=T0)  # active: ended as returned first
    revoke_annotator(db, person.annotator_id, ADMIN, "a bot", now=T0)
    assert db["crowd_participants"].get(person.annotator_id)["status"] == "account_closed"
    with pytest.raises(Conflict, match="the organisers closed your account"):
        _join(db, token, "pid-a", SESSION_ID="sess-new")


def test_a_platform_id_that_is_not_an_id_or_a_parameter_given_twice_is_refused_and_writes_nothing(setup):
    """They were dropped or resolved unsaid: a bad ``STUDY_ID`` or ``SESSION_ID`` joined with
    no platform id stored, a PID given twice joined as the last one."""
    db, study_id = setup
    _, token = _link(db, study_id)
    before = _dump(db)
    for name, value in (("STUDY_ID", "<img src=x onerror=alert(3)>"), ("SESSION_ID", "z" * 3000)):
        with pytest.raises(InvalidInput, match=rf"^`{name}` must be 1-64 letters, .*; open the study from"):
            _join(db, token, "pid-a", **{name: value})
    with pytest.raises(
        InvalidInput, match=r"^the study link gives `PROLIFIC_PID` 2 times, so it is not clear which is yours"
    ):
        _join(db, token, ["dupA", "dupB"])
    with pytest.raises(InvalidInput, match=r"^`SESSION_ID` is in the study link but empty"):
        _join(db, token, "pid-a", SESSION_ID="")
    assert _dump(db) == before
    joined = crowd.join(db, token, {"PROLIFIC_PID": "pid-m"}, address="1.2.3.4", now=T0)  # ids are optional
    row = db["crowd_participants"].get(joined.session.annotator_id)
    assert (row["platform_study_id"], row["platform_session_id"]) == (None, None)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"quota": 0}, "`quota` must be a whole number from 1 to 10000, got 0"),
        ({"minutes": 0}, r"`minutes` must be a number in \(0, 1440\]"),
        ({"completion_code": "a b"}, "`completion_code` must be 1-40 letters"),
        ({"screenout_code": "café"}, r"`screenout_code` must be 1-40 letters, .* \(ASCII letters a-z, A-Z"),
        ({"screenout_code": CODES["completion_code"]}, "`screenout_code` must differ"),
        ({"id_param": "1x"}, "`id_param` must be a query parameter name"),
        # The app's and the platform's own parameters: Prolific's STUDY_ID is everyone's.
        *(
            (
                {"id_param": taken},
                rf"^`id_param` must name the parameter of the person's id, .*, got '{taken}'$",
            )
            for taken in ("study", "invite", "STUDY_ID", "SESSION_ID", "assignmentId")
        ),
        ({"return_url": "javascript:alert(1)"}, "`return_url` must be an http:// or https:// URL"),
        # Markdown's marks closed the page's link to it and loaded another host's image (probe 206).
        *(
            (
                {"return_url": f"https://x.example/?cc={{code}}{tail}"},
                r"^`return_url` must be an http:// or https:// URL of letters, digits and - \. _ ~ : / \? # @ "
                r"\$ & \+ , ; = % \{ \} \(any other character percent-encoded, \( as %28\), its host first, got ",
            )
            for tail in (")![t](http://evil.example/t.png)", "[j]", "!", " x", "é", "*", "'")
        ),
        ({"return_url": "https:///?cc={code}"}, r"its host first, got 'https:///\?cc=\{code\}'$"),
        (  # taken, it sent everyone back with no code
            {"return_url": "https://x.example/?cc=nocode"},
            r"^`return_url` must hold \{code\} where each person's code goes \(their completion or "
            r"screen-out code\), as https://app.prolific.com/submissions/complete\?cc=\{code\}; got "
            r"'https://x.example/\?cc=nocode'$",
        ),
    ],
)
def test_bad_link_settings_are_refused_with_the_setting_named(setup, change, message):
    db, study_id = setup
    before = _dump(db)
    with pytest.raises(InvalidInput, match=message):
        _link(db, study_id, **change)
    assert _dump(db) == before


def test_joins_are_limited_per_address(setup):
    db, study_id = setup
    _, token = _link(db, study_id, joins_per_address=2)
    _join(db, token, "pid-a", minutes_ago=2)
    _join(db, token, "pid-b", minutes_ago=1)
    before = _dump(db)
    with pytest.raises(crowd.TooManyJoins, match="2 people joined through this study link from your address"):
        _join(db, token, "pid-c")
    assert _dump(db) == before
    assert _join(db, token, "pid-a").resumed  # resuming is not a new join
    _join(db, token, "pid-c", address="5.6.7.8")
    _join(db, token, "pid-d", minutes_ago=-61)
    # The address serves the limit alone: a join an hour later has forgotten the older ones
    # (outside probe 93: every address stayed, a declining person's too).
    kept = dict(db.execute("select external_id, address from crowd_participants").fetchall())
    assert kept == {"pid-a": None, "pid-b": None, "pid-c": None, "pid-d": "1.2.3.4"}
    _, one = _link(db, study_id, joins_per_address=1)  # a second link counts its own
    _join(db, one, "pid-e")
    with pytest.raises(crowd.TooManyJoins, match="^1 person joined through this study link"):
        _join(db, one, "pid-f")


def test_a_failed_check_screens_out_and_a_finished_person_votes_no_more(setup):
    db, study_id = setup
    _, token = _link(db, study_id)
    failing = _actor(db, _join(db, token, "pid-b"))
    _judge(db, failing, 10, pass_checks=False)
    state = crowd.settle(db, failing, now=T0)
    assert (state.status, state.code, state.return_url) == (
        "screened_out",
        "SCREEN-1",
        "https://app.prolific.com/submissions/complete?cc=SCREEN-1",
    )
    assert not list(
        db["tasks"].rows_where("annotator_id = ? and status = 'reserved'", [failing.annotator_id])
    )
    with pytest.raises(Conflict, match="your code is SCREEN-1"):
        crowd.check_active(db, failing)
    passing = _actor(db, _join(db, token, "pid-a"))
    assert _judge(db, passing, 10) == 10
    assert crowd.settle(db, passing, now=T0).code == "C0MPLETE"
    assert _join(db, token, "pid-a").state.code == "C0MPLETE"


def test_a_crowd_person_judges_their_links_study_alone_and_completes_with_it(db, tmp_path):
    """With other studies open beside it, an open link's people get trials of its study only
    and are done (and given the code) when its trials are judged; an invited participant is
    still asked for every open study's."""
    ids = _open_studies(
        db,
        tmp_path,
        [(name, seed, n, n * 3) for name, seed, n in (("linked", 1, 2), ("other", 2, 3), ("third", 3, 3))],
    )
    pairs = {row["id"]: row["study_id"] for row in db["study_pairs"].rows}
    asked = {
        s: min(
            json.loads(db["studies"].get(s)["meta"])["trials_per_participant"], list(pairs.values()).count(s)
        )
        for s in ids
    }
    _, token = _link(db, ids[0])
    person = _actor(db, _join(db, token, "pid-scope"))
    assert judging.progress(db, person) == (0, asked[ids[0]])
    assert _judge(db, person, 100) == asked[ids[0]]
    judged = [
        pairs[row["pair_id"]]
        for row in db["judgments"].rows_where("participant_id = ?", [person.annotator_id])
    ]
    assert set(judged) == {ids[0]} and len(judged) == asked[ids[0]]
    assert crowd.settle(db, person, now=T0).code == "C0MPLETE"
    [(invited_id, invite)] = create_annotators(db, 1, "participant", expires_days=1, created_by="admin")
    invited = require(db, login_with_invite(db, invite).token)
    assert judging.progress(db, invited) == (0, sum(asked.values()))


def test_the_counts_say_when_a_links_study_takes_nobody_more_as_a_newcomer_is_told(setup):
    """Outside probe 225: a link of 8 places for a study that holds 6 people said "open
    until ..., places left 4" once every pair had its votes, while each newcomer was told
    the study is full."""
    db, study_id = setup
    people = db["studies"].get(study_id)["votes_per_pair"] * 9 // 9  # 9 model pairs, 9 trials each
    link, token = _link(db, study_id, quota=people + 2)
    assert crowd.live_counts(db, link["id"], now=T0)["places_left"] == people  # not the quota
    for n in range(people):
        actor = _actor(db, _join(db, token, f"pid-{n}", minutes_ago=1))
        assert _judge(db, actor, 10) == 10
        crowd.settle(db, actor, now=T0)
    counts = crowd.live_counts(db, link["id"], now=T0)
    assert counts["places_left"] == 0 and counts["completed"] == people
    assert counts["takes_nobody"] == "this study is full: its pairs have all the votes they need"
    with pytest.raises(crowd.LinkClosed) as refused:
        _join(db, token, "pid-late")
    assert str(refused.value) == f"{counts['takes_nobody']}; please return it on the platform"


def test_the_payment_table_of_a_small_crowd_row_by_row(setup):
    db, study_id = setup
    link, token = _link(db, study_id, return_url="http://127.0.0.1:9/done?code={code}")
    minutes = {"pid-c": 40, "pid-a": 20, "pid-b": 10, "pid-d": 5}
    actors = {"pid-c": _actor(db, _join(db, token, "pid-c", minutes_ago=40))}
    _judge(db, actors["pid-c"], 2, at=T0 - dt.timedelta(minutes=39))
    actors |= {pid: _actor(db, _join(db, token, pid, minutes_ago=m)) for pid, m in list(minutes.items())[1:]}
    assert _judge(db, actors["pid-a"], 10) == 10
    crowd.settle(db, actors["pid-a"], now=T0 + dt.timedelta(minutes=1))
    trials_b = _judge(db, actors["pid-b"], 10, pass_checks=False)
    crowd.settle(db, actors["pid-b"], now=T0)
    _judge(db, actors["pid-d"], 1)
    crowd.mark_returned(db, link["id"], "pid-d", ADMIN, now=T0)
    table = crowd.payment_rows(db, link["id"], now=T0 + dt.timedelta(minutes=2))
    started = {pid: iso(T0 - dt.timedelta(minutes=m)) for pid, m in minutes.items()}
    expected = [
        [
            "pid-c",
            "timed_out",
            "S1",
            "sess-pid-c",
            started["pid-c"],
            iso(T0 - dt.timedelta(minutes=10)),
            30.0,
            2,
            0,
            0,
            "",
        ],
        [
            "pid-a",
            "completed",
            "S1",
            "sess-pid-a",
            started["pid-a"],
            iso(T0 + dt.timedelta(minutes=1)),
            21.0,
            10,
            1,
            0,
            "C0MPLETE",
        ],
        [
            "pid-b",
            "screened_out",
            "S1",
            "sess-pid-b",
            started["pid-b"],
            iso(T0),
            10.0,
            trials_b,
            0,
            1,
            "SCREEN-1",
        ],
        ["pid-d", "returned", "S1", "sess-pid-d", started["pid-d"], iso(T0), 5.0, 1, 0, 0, ""],
    ]
    # pid-c's two trials: neither was the check (it would be counted above otherwise)
    checks_c = db.execute(
        "select count(*) from judgments j join study_pairs p on p.id = j.pair_id "
        "where j.participant_id = ? and p.b = ?",
        [actors["pid-c"].annotator_id, GROUND_TRUTH],
    ).fetchone()[0]
    expected[0][8] = checks_c
    # The pseudonym beside the platform's id: the study's votes name people by it.
    expected = [[row[0], actors[row[0]].pseudonym, *row[1:]] for row in expected]
    assert table.values.tolist() == expected
    lines = crowd.payment_csv(table).splitlines()
    assert lines[0] == ",".join(crowd.PAYMENT_COLUMNS)
    assert (
        lines[2]
        == f"pid-a,{actors['pid-a'].pseudonym},completed,S1,sess-pid-a,{started['pid-a']},{iso(T0 + dt.timedelta(minutes=1))},21.0,10,1,0,C0MPLETE"
    )
    assert crowd.approval_ids(table) == "pid-a\n"
    assert crowd.bonus_csv(table, 0.05) == "pid-a,0.50\n"
    counts = crowd.live_counts(db, link["id"], now=T0 + dt.timedelta(minutes=2))
    assert counts == {
        "started": 4,
        "active": 0,
        "completed": 1,
        "screened_out": 1,
        "timed_out": 1,
        "returned": 1,
        "account_closed": 0,
        "may_restart": 0,
        "study_closed": 0,
        # 10 places less pid-a's, but the 40 votes left give 9 model trials each to 4 people.
        "places_left": 4,
        "takes_nobody": None,
        "study_people": 4,
        "median_minutes": 21.0,
        "attention_failure_rate": 1 / (2 + checks_c),
    }
    # The median is of the minutes as spent, not of the table's tenths (0.2 was said for a
    # median of 0.1455: outside probe 232).
    with db.conn:
        db.execute(
            "update crowd_participants set finished = ? where external_id = 'pid-a'",
            [iso(T0 + dt.timedelta(minutes=1, seconds=3.6))],
        )
    later = T0 + dt.timedelta(minutes=2)
    assert (
        crowd.payment_rows(db, link["id"], now=later).set_index("participant_id").at["pid-a", "minutes"]
        == 21.1
    )
    assert crowd.live_counts(db, link["id"], now=later)["median_minutes"] == pytest.approx(21.06)
    # the timed-out and returned people's reservations went back to the pool
    for pid in ("pid-c", "pid-d"):
        assert not list(
            db["tasks"].rows_where("annotator_id = ? and status = 'reserved'", [actors[pid].annotator_id])
        )


def test_external_ids_map_pseudonyms_for_an_export_that_asks(setup):
    db, study_id = setup
    link, token = _link(db, study_id)
    a = _join(db, token, "pid-a", minutes_ago=2)
    b = _join(db, token, "pid-b", minutes_ago=1)
    assert crowd.external_ids(db).values.tolist() == [
        [a.session.pseudonym, link["id"], "pid-a", "S1", "sess-pid-a", "active"],
        [b.session.pseudonym, link["id"], "pid-b", "S1", "sess-pid-b", "active"],
    ]
    _judge(db, _actor(db, a), 2)
    votes = judging.votes_frame(db, study_id)
    assert list(votes["participant"].unique()) == [a.session.pseudonym]
    assert "pid-a" not in votes.to_csv()


def test_consent_is_asked_once_stored_and_needed_before_a_vote(setup):
    db, study_id = setup
    _, token = _link(db, study_id, consent_text="  <b>Our</b> **study**: [x](javascript:alert(1))  ")
    link = crowd.get_link(db, 1)
    assert crowd.consent_text(link) == "<b>Our</b> **study**: [x](javascript:alert(1))"  # stored as typed
    actor = _actor(db, _join(db, token, "pid-a"))
    assert crowd.state(db, actor).consented == ""
    with pytest.raises(Conflict, match="consent text and choose I agree"):
        crowd.check_active(db, actor)
    state = crowd.consent(db, actor, True, now=T0)
    assert (state.status, state.consented) == ("active", iso(T0))
    assert db["crowd_participants"].get(actor.annotator_id)["consented"] == iso(T0)
    crowd.check_active(db, actor)
    # Agreeing again keeps the first time; a resume of the same id is consented already.
    assert crowd.consent(db, actor, True, now=T0 + dt.timedelta(minutes=1)).consented == iso(T0)
    assert _join(db, token, "pid-a").state.consented == iso(T0)
    with pytest.raises(Conflict, match="you agreed already"):
        crowd.consent(db, actor, False)
    with pytest.raises(InvalidInput, match="`agree` must be true or false"):
        crowd.consent(db, actor, "yes")
    assert [r["action"] for r in db.query("select action from audit where action like 'crowd_con%'")] == [
        "crowd_consent"
    ]


def test_not_agreeing_returns_the_study_frees_the_place_and_gives_no_code(setup):
    db, study_id = setup
    link, token = _link(db, study_id, quota=1)
    actor = _actor(db, _join(db, token, "pid-a"))
    state = crowd.consent(db, actor, False, now=T0)
    assert (state.status, state.code, state.return_url, state.consented) == ("returned", "", "", "")
    assert state.platform_url == "https://app.prolific.com/submissions/complete?cc="
    with pytest.raises(Conflict, match="you returned this study"):
        crowd.check_active(db, actor)
    with pytest.raises(Conflict, match="you returned this study"):
        crowd.consent(db, actor, True)
    with pytest.raises(Conflict, match="you returned this study; it cannot be taken again"):
        _join(db, token, "pid-a")
    _join(db, token, "pid-b")  # the one place is free again
    assert crowd.payment_rows(db, link["id"], now=T0)["status"].tolist() == ["returned", "active"]


def test_the_default_consent_text_and_its_bound(setup):
    db, study_id = setup
    link, _ = _link(db, study_id)
    assert link["consent_text"] is None and crowd.consent_text(link) == crowd.DEFAULT_CONSENT
    # The Study tab points researchers to docs/crowd.md for it: word for word there.
    quoted = [
        line.strip()[1:].strip() for line in DOCS.read_text().splitlines() if line.strip().startswith(">")
    ]
    assert " ".join(crowd.DEFAULT_CONSENT.split()) in " ".join(" ".join(quoted).split())
    # A paragraph per line: the text box shows every line break (outside probe 119).
    paragraphs = crowd.DEFAULT_CONSENT.split("\n\n")
    assert len(paragraphs) == 5 and not any("\n" in p or "  " in p for p in paragraphs)
    before = _dump(db)
    with pytest.raises(InvalidInput, match="`consent_text` may hold at most 5000 characters"):
        _link(db, study_id, consent_text="x" * 5001)
    assert _dump(db) == before


def test_a_person_from_an_invite_is_not_asked_for_consent(setup):
    db, study_id = setup
    from annotation.people.accounts import create_annotators, login_with_invite

    ((_, invite),) = create_annotators(db, 1, "participant", expires_days=1, created_by="admin")
    actor = require(db, login_with_invite(db, invite).token)
    crowd.check_active(db, actor)
    with pytest.raises(crowd.NotFound, match="open study link only"):
        crowd.consent(db, actor, True)


def test_a_v14_database_gains_the_consent_columns_and_its_people_are_asked(tmp_path, monkeypatch):
    """People who joined before schema v15 keep their row and are asked for consent."""
    from storage import open_db
    from storage import schema as schema_module

    db = open_db(tmp_path / "old.sqlite")
    v14 = schema_module.MIGRATIONS[:14]
    assert v14[-1][0] == "open study links for crowd platforms"
    monkeypatch.setattr(schema_module, "MIGRATIONS", v14)
    assert schema_module.ensure_schema(db) == 14
    assert "consented" not in db["crowd_participants"].columns_dict
    monkeypatch.undo()
    data_dir = tmp_path / "data"
    truths, _ = populate(db, data_dir, 6, np.random.default_rng(0))
    study_id = study.create_study(
        db, "old", sources(), truth_source(data_dir, truths), seed=1, n_concepts=2, trials_per_participant=4
    )
    study.open_study(db, study_id, ADMIN)
    from annotation.people.accounts import create_annotators, login_with_invite

    ((annotator, invite),) = create_annotators(db, 1, "participant", expires_days=1, created_by="open link 1")
    link = {"token_hash": "0" * 64, "study_id": study_id, "label": "", "quota": 5, "minutes": 30.0}
    link |= {
        "ends": iso(T0 + dt.timedelta(days=1)),
        "closed": None,
        "completion_code": "C",
        "screenout_code": "S",
    }
    link |= {"id_param": "PROLIFIC_PID", "return_url": crowd.PROLIFIC_RETURN_URL, "max_failed_checks": 0}
    link |= {"joins_per_address": 10, "created": iso(T0), "created_by": "admin"}
    link_id = db["crowd_links"].insert(link).last_pk
    db["crowd_participants"].insert(
        {"annotator_id": annotator["id"], "link_id": link_id, "external_id": "old-pid", "started": iso(T0)}
        | {"status": "active", "address": "x"}
    )
    assert schema_module.ensure_schema(db) == len(schema_module.MIGRATIONS)
    assert db["crowd_participants"].get(annotator["id"])["consented"] is None
    assert crowd.consent_text(crowd.get_link(db, link_id)) == crowd.DEFAULT_CONSENT
    actor = require(db, login_with_invite(db, invite).token)
    with pytest.raises(Conflict, match="consent text and choose I agree"):
        crowd.check_active(db, actor, now=T0)
    assert crowd.consent(db, actor, True, now=T0).consented == iso(T0)


def test_erasing_a_participants_platform_ids_closes_their_account_and_keeps_their_votes(
    setup, tmp_path, capsys
):
    """Outside probe 94: deleting the row as the docs said left the person signed in, and the
    same id joined again as a new participant; the command closes the account in the same step."""
    db, study_id = setup
    link, token = _link(db, study_id)
    joined = _join(db, token, "PIDerase1", minutes_ago=5)
    person = _actor(db, joined)
    crowd.consent(db, person, True, now=T0 - dt.timedelta(minutes=4))
    judged = _judge(db, person, 2, at=T0 - dt.timedelta(minutes=3))
    votes = db.execute(
        "select count(*) from judgments where participant_id = ?", [person.annotator_id]
    ).fetchone()
    assert judged == 2 and votes == (2,)
    before = _dump(db)
    with pytest.raises(InvalidInput, match="`why` is empty"):
        crowd.erase_platform_ids(db, "PIDerase1", ADMIN, " ")
    with pytest.raises(NotFound, match="no crowd participant is called or has the platform id 'nobody'"):
        crowd.erase_platform_ids(db, "nobody", ADMIN, "their request")
    assert _dump(db) == before  # the refusals wrote nothing
    row = crowd.erase_platform_ids(db, person.pseudonym.lower(), ADMIN, "their e-mail of 2 Dec", now=T0)
    assert (row["external_id"], row["platform_study_id"], row["platform_session_id"], row["address"]) == (
        f"(erased {person.annotator_id})",
        None,
        None,
        None,
    )
    assert row["consented"] and row["started"] and row["status"] == "account_closed"
    assert "PIDerase1" not in json.dumps(_dump(db)) and "sess-PIDerase1" not in json.dumps(_dump(db))
    # Signed out at once, and told why: their page said "only they can reopen it", which
    # nobody can (outside probe 225).
    with pytest.raises(InvalidToken, match="as you asked; this study has ended for you$"):
        require(db, joined.session.token, now=T0)
    assert db.execute(
        "select count(*) from judgments where participant_id = ?", [person.annotator_id]
    ).fetchone() == (2,)
    (audit,) = db.execute("select actor, why from audit where action = 'erase_platform_ids'").fetchall()
    assert audit == ("admin", "their e-mail of 2 Dec")
    with pytest.raises(Conflict, match="erased already"):
        crowd.erase_platform_ids(db, person.pseudonym, ADMIN, "again")
    # Nothing else takes the erased person for someone who can come back or return.
    erased = _dump(db)
    with pytest.raises(
        Conflict,
        match=rf"annotator {person.annotator_id} \({person.pseudonym}\) asked to be erased: their platform id is gone",
    ):
        reopen_annotator(db, person.annotator_id, ADMIN, "by mistake")
    with pytest.raises(InvalidInput, match=r"is what an erased person's id reads, not a platform id"):
        crowd.mark_returned(db, link["id"], row["external_id"], ADMIN, now=T0)
    assert _dump(db) == erased
    # The same platform id is someone new to the app now.
    again = _join(db, token, "PIDerase1")
    assert not again.resumed and _actor(db, again).annotator_id != person.annotator_id


def test_the_command_line_erases_by_platform_id_on_the_link_given(setup, tmp_path, capsys):
    db, study_id = setup
    _, token = _link(db, study_id)
    _link(db, study_id, label="second")
    _join(db, token, "PIDone")
    _join(db, token, "PIDtwo")
    db_path = str(db.execute("pragma database_list").fetchone()[2])
    base = ["--db", db_path, "--data-dir", str(tmp_path / "data"), "erase-platform-ids"]
    assert main([*base, "PIDone", "--why", "asked by e-mail"]) == 0
    said = capsys.readouterr().out
    # No payment file was written for the link: none is named (outside probe 225).
    assert "erased the platform ids of annotator" in said and "payment files" not in said
    assert main([*base, "PIDtwo", "--link", "2", "--why", "asked"]) == 1
    assert "has the platform id 'PIDtwo' on link 2" in capsys.readouterr().err
    (tmp_path / "data" / "exports" / "crowd-1").mkdir(parents=True)
    assert main([*base, "PIDtwo", "--link", "1", "--why", "asked"]) == 0
    assert f"Check the payment files in {tmp_path / 'data' / 'exports' / 'crowd-1'}/ and any" in (
        capsys.readouterr().out
    )
    rows = list(db["crowd_participants"].rows)
    assert [r["external_id"] for r in rows] == [f"(erased {r['annotator_id']})" for r in rows] and len(
        rows
    ) == 2


def test_an_id_that_is_also_a_pseudonym_is_refused_until_told_which_and_erased_ids_are_not_paid(setup):
    """Outside probe 98: a platform id equal to someone else's pseudonym erased that other
    person, for good; and the payment files held "(erased N)" where a platform id goes."""
    db, study_id = setup
    link, token = _link(db, study_id)
    first = _actor(db, _join(db, token, "dave01"))
    clash = _actor(db, _join(db, token, first.pseudonym))
    before = _dump(db)
    with pytest.raises(
        Conflict, match=rf"is the pseudonym of annotator {first.annotator_id} and the platform id"
    ):
        crowd.erase_platform_ids(db, first.pseudonym, ADMIN, "mallory asked")
    assert _dump(db) == before
    table = crowd.payment_rows(db, link["id"], now=T0)
    both = ("active", "account_closed")
    assert crowd.approval_ids(table, both) == f"dave01\n{first.pseudonym}\n"
    row = crowd.erase_platform_ids(db, first.pseudonym, ADMIN, "mallory asked", by="platform id")
    assert row["annotator_id"] == clash.annotator_id
    assert db["crowd_participants"].get(first.annotator_id)["external_id"] == "dave01"
    table = crowd.payment_rows(db, link["id"], now=T0)
    assert f"(erased {clash.annotator_id})" in set(table["participant_id"])
    assert crowd.approval_ids(table, both) == "dave01\n"
    assert crowd.bonus_csv(table, 0.1, both) == "dave01,0.00\n"


def test_a_restore_keeps_links_closed_and_platform_ids_erased_after_the_backup(setup, tmp_path):
    """Outside probe 126: a restore reopened a closed open link, and brought back erased ids."""
    from annotation import backup
    from storage import db_path, open_db

    db, study_id = setup
    link, token = _link(db, study_id)
    joined = _join(db, token, "PROLIFIC-SECRET-ID-42")
    data_dir, path = tmp_path / "data", Path(db_path(db))
    backup.backup(db, data_dir, tmp_path / "backup")
    crowd.close_link(db, link["id"], ADMIN)
    crowd.erase_platform_ids(db, joined.session.pseudonym, ADMIN, "asked for it")
    db.close()
    done = backup.restore(tmp_path / "backup", path, data_dir)
    assert "1 open study link(s) closed after the backup stay closed" in done["kept"]
    assert "the platform ids of 1 crowd participant(s) erased after the backup stay erased" in done["kept"]
    db = open_db(path)
    try:
        assert db["crowd_links"].get(link["id"])["closed"] is not None
        person = db["crowd_participants"].get(joined.session.annotator_id)
        assert person["external_id"].startswith("(erased ") and person["address"] is None
        assert "PROLIFIC-SECRET-ID-42" not in str(list(db["crowd_participants"].rows))
        with pytest.raises((Conflict, InvalidToken)):
            _join(db, token, "PIDNEW1")
    finally:
        db.close()


def test_the_command_line_closes_a_study_and_its_open_link(setup, tmp_path, capsys):
    db, study_id = setup
    link, token = _link(db, study_id)
    joined = _join(db, token, "PIDclose")
    rng = np.random.default_rng(2)
    assert judging.next_trial(db, _actor(db, joined), rng, batch_size=1) is not None  # held
    db_path = str(db.execute("pragma database_list").fetchone()[2])
    base = ["--db", db_path, "--data-dir", str(tmp_path / "data"), "close-study"]
    assert main([*base, str(study_id), "--why", "enough votes"]) == 0
    assert (
        f"closed study {study_id} for good: its trials are handed to nobody any more (1 held by"
        in capsys.readouterr().out
    )
    # Opening it again is refused, saying it was closed (it said only "its design is frozen").
    with pytest.raises(
        StudyFrozen,
        match=r"^study '.*' was opened on .* UTC and closed on .* UTC \(`close-study`\); a closed study is not opened again",
    ):
        study.open_study(db, study_id, ADMIN)
    assert db["crowd_links"].get(link["id"])["closed"] is not None
    assert judging.next_trial(db, _actor(db, joined), rng) is None
    with pytest.raises(Conflict):
        _join(db, token, "PIDlate")
    assert main([*base, str(study_id), "--why", "again"]) == 1
    err = capsys.readouterr().err
    assert f"study {study_id} was closed on " in err and err.rstrip().endswith("UTC already; nothing changed")


def test_link_people_left_judging_by_a_close_before_schema_19_are_ended_by_the_upgrade(setup):
    """Code before schema 19 left them `active` when their study closed, minutes running on,
    and at their deadline marked them `timed_out`; the upgrade ends both as closing does now,
    at the study's closing time."""
    import storage

    db, study_id = setup
    link, token = _link(db, study_id)
    for pid in ("pid-a", "pid-b"):
        person = _actor(db, _join(db, token, pid, minutes_ago=5))
        crowd.consent(db, person, True, now=T0 - dt.timedelta(minutes=4))
        assert _judge(db, person, 3, at=T0 - dt.timedelta(minutes=3)) == 3
    study.close_study(db, study_id, ADMIN, "enough votes", now=T0)
    # What that code left: both still active, and the database at schema 18.
    db.execute("update crowd_participants set status = 'active', finished = null")
    db.execute("delete from schema_version where version >= 19")
    db.execute("alter table tasks drop column shown")  # added by version 20
    db.conn.commit()
    later = T0 + dt.timedelta(hours=2)
    # pid-b's deadline passed under that code: it marked them timed out.
    db.execute(
        "update crowd_participants set status = 'timed_out', finished = ? where external_id = 'pid-b'",
        [iso(later)],
    )
    db.conn.commit()
    assert storage.ensure_schema(db) == len(storage.schema.MIGRATIONS)
    table = crowd.payment_rows(db, link["id"], now=later).set_index("participant_id")
    for pid in ("pid-a", "pid-b"):
        assert table.loc[pid, ["status", "finished", "minutes", "trials", "code"]].tolist() == [
            "study_closed",
            iso(T0),
            5.0,
            3,
            "",
        ], pid
    [(why, details)] = db.execute(
        "select why, details from audit where actor = 'upgrade' and action = 'end_link_people'"
    ).fetchall()
    assert iso(T0) in why and json.loads(details) == {"ended_link_people": 2}
    assert storage.ensure_schema(db) == len(storage.schema.MIGRATIONS)  # up to date: nothing more
    assert db.execute("select count(*) from audit where action = 'end_link_people'").fetchone() == (1,)


def test_marked_returned_or_let_start_again_past_their_deadline_their_minutes_stop_at_it(setup):
    """Unseen since their time ran out, a person marked returned read 1.3 minutes of a 1-minute
    limit, and one let start again 4.0 of 3: the minutes depended on whether anyone had
    opened the payment table first (outside probe 146)."""
    db, study_id = setup
    link, token = _link(db, study_id, minutes=1)
    for pid in ("pid-r", "pid-s"):
        crowd.consent(
            db, _actor(db, _join(db, token, pid, minutes_ago=5)), True, now=T0 - dt.timedelta(minutes=5)
        )
    crowd.mark_returned(db, link["id"], "pid-r", ADMIN, now=T0)
    crowd.let_start_again(db, link["id"], "pid-s", ADMIN, now=T0)
    table = crowd.payment_rows(db, link["id"], now=T0).set_index("participant_id")
    deadline = iso(T0 - dt.timedelta(minutes=4))
    assert table.loc["pid-r", ["status", "finished", "minutes"]].tolist() == ["returned", deadline, 1.0]
    assert table.loc["pid-s", ["status", "finished", "minutes"]].tolist() == ["may_restart", deadline, 1.0]
