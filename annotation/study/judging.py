"""Judging an open study: trials, votes, the participant's background, exports.

A participant is handed pairs by `annotation.assignment` (kind ``judgment``: votes per
pair from different people, nobody judges a pair twice, the left side drawn per task
and stored). `next_trial` shows the oldest reserved pair; `record_judgment` stores the
choice with the placement the task recorded. Nobody votes before saying whether they
have a design or art background (``annotators.design_background``, Appendix D).

`votes_frame` turns the votes of a study into the frame `evaluation.analysis.judgments` reads,
`study_metrics` the study's copied distributions into its metric values, and
`export_study` writes both (and the design) as files for ``python -m evaluation
judgments``, since `evaluation` never reads the annotation database.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import sqlite_utils

from annotation import assignment
from annotation.coloring.store import withdrawn_files
from annotation.errors import Conflict, InvalidInput, PermissionDenied
from annotation.people.accounts import Actor
from annotation.study.design import GROUND_TRUTH, GroundTruth, closed_studies, get_study, study_design
from evaluation.analysis.judgment_report import CI, analyse, with_resampling, write_tables
from evaluation.analysis.judgments import VOTE_COLUMNS
from evaluation.analysis.tables import dca_column
from evaluation.color.naming import DOMINANT_COLUMNS, with_bin_names
from evaluation.pipeline.scoring import concept_metrics
from storage import audit, insert_row, iso, parse_iso, shown_time, transaction, update_rows, utcnow
from storage.distributions import decode
from storage.shown import shown
from storage.spreadsheet import write_csv

SIDES = ("left", "right")
BATCH_SIZE = 10
EXTRA_COLUMNS = ("study_id", "participant", "left_model", "choice", "seconds", "created")
EXPORT_METRIC_COLUMNS = (
    "concept",
    "model",
    "pcc",
    "emd",
    "ed",
    "dominant_human",
    "dominant_model",
    "dca",
    "hue_diff",
)


@dataclass(frozen=True)
class Side:
    """One candidate of a trial: `item` is a model name or `GROUND_TRUTH` (never shown)."""

    item: str
    p: np.ndarray
    images: tuple[str, ...]


@dataclass(frozen=True)
class Trial:
    """One pairwise trial as a participant sees it.

    Attributes
    ----------
    task_id : int
        The reserved ``tasks`` row; pass it to `record_judgment`.
    concept : str
        The concept key.
    truth : GroundTruth
        P_H with its dominant colors and the colorings shown.
    left, right : Side
        The candidates, placed as the task recorded (``tasks.left_item``).
    number, total : int
        This is trial `number` of the `total` the participant is asked for.
    studies : int
        How many open studies `total` is summed over (an invited participant judges every
        open study).
    """

    task_id: int
    study_id: int
    concept: str
    truth: GroundTruth
    left: Side
    right: Side
    number: int
    total: int
    studies: int = 1


def _participant(actor: Actor) -> int:
    if actor.annotator_id is None or "participant" not in actor.roles:
        raise PermissionDenied(
            f"judging needs a participant account; {actor.pseudonym} "
            "is not one (open a participant invite link)"
        )
    return actor.annotator_id


def design_background(db: sqlite_utils.Database, actor: Actor) -> bool | None:
    """Whether the participant has a design or art background; None until they say."""
    value = db["annotators"].get(_participant(actor))["design_background"]
    return None if value is None else bool(value)


def set_background(
    db: sqlite_utils.Database, actor: Actor, has_background: bool, *, now: dt.datetime | None = None
) -> None:
    """Record the participant's answer to the background question.

    The answer is given once, before the first trial: the analyses split votes by it, so a
    different answer later (a second tab, an API client) is refused; the same answer again
    writes nothing.
    """
    if not isinstance(has_background, (bool, np.bool_)):
        raise InvalidInput(f"`has_background` must be True or False, got {shown(has_background)}")
    annotator_id = _participant(actor)
    with transaction(db):
        recorded = db["annotators"].get(annotator_id)["design_background"]
        if recorded is not None:
            if bool(recorded) == bool(has_background):
                return
            raise Conflict(
                f"your answer to the background question ({'yes' if recorded else 'no'}) is "
                "already recorded and stays as first given; nothing was changed"
            )
        update_rows(db, "annotators", {"id": annotator_id}, {"design_background": int(has_background)})
        audit.record(
            db,
            actor.pseudonym,
            "set_design_background",
            "annotator",
            annotator_id,
            details={"design_background": bool(has_background)},
            now=now,
        )


def progress(db: sqlite_utils.Database, actor: Actor) -> tuple[int, int]:
    """``(done, total)``: trials the participant judged in the open studies they judge
    (`annotation.assignment.JUDGED_STUDIES`: an open link's study alone for someone who came
    through one), and how many they are asked for: per such study its
    ``trials_per_participant``, at most its pairs; for a participant from an invite, at
    most what they judged there plus the pairs still short of votes that they have not
    judged (a study whose pairs all have their votes asks them for nothing more)."""
    done, asked = _progress(db, _participant(actor))
    return done, sum(asked)


def closed_for(db: sqlite_utils.Database, actor: Actor) -> dict | None:
    """The study closed last (`annotation.study.design.close_study`) among those the
    participant judges (`annotation.assignment.JUDGED_STUDIES`), ``{"id", "name", "closed",
    "done"}`` with the trials they judged in it, when they judge no open study any more;
    else None. A participant of a closed study was told every pair had its votes, or (from
    a study link) to come back later (outside probe 129)."""
    if judges_open_study(db, actor):
        return None
    return _last_closed(db, _participant(actor))


def judges_open_study(db: sqlite_utils.Database, actor: Actor) -> bool:
    """Whether an open study is among those the participant judges."""
    return bool(
        db.execute(
            f"select exists (select 1 from studies s where {assignment.OPEN_STUDY} and {assignment.JUDGED_STUDIES})",
            {"a": _participant(actor)},
        ).fetchone()[0]
    )


def judged(db: sqlite_utils.Database, actor: Actor) -> int:
    """Trials the participant judged in every study they judge, open or closed."""
    return db.execute(
        "select count(*) from judgments j join study_pairs p on p.id = j.pair_id join studies s on "
        f"s.id = p.study_id where j.participant_id = :a and {assignment.JUDGED_STUDIES}",
        {"a": _participant(actor)},
    ).fetchone()[0]


def last_closed_judged(db: sqlite_utils.Database, actor: Actor) -> dict | None:
    """`closed_for`'s answer for the study closed last among those the participant judged
    a trial in, whether or not they judge an open study too; None when there is none."""
    return _last_closed(db, _participant(actor), judged_in=True)


def _last_closed(db: sqlite_utils.Database, a: int, *, judged_in: bool = False) -> dict | None:
    """The closed study, of those participant `a` judges (with a trial judged in it:
    `judged_in`), closed last, as `closed_for` gives it."""
    closed = closed_studies(db)
    found = [
        {**row, "closed": closed[str(row["id"])]["closed"]}
        for row in db.query(
            "select s.id, s.name, (select count(*) from judgments j join study_pairs p on p.id = j.pair_id "
            f"where p.study_id = s.id and j.participant_id = :a) as done from studies s where {assignment.JUDGED_STUDIES}",
            {"a": a},
        )
        if str(row["id"]) in closed and (row["done"] or not judged_in)
    ]
    return max(found, key=lambda row: row["closed"], default=None)


def _progress(db: sqlite_utils.Database, annotator_id: int) -> tuple[int, list[int]]:
    """`progress` with the trials asked per open study judged, one entry per study that
    asks any. An invited participant's count took in full studies too ("34 of 139 judged"
    after everything asked of them, told to come back later for good, an outside check):
    it counts the model pairs still short of votes they have not judged, and the attention
    checks they would meet over those (`annotation.assignment.checks_due`), at most the
    checks they have not met."""
    crowd = db.execute(
        "select exists (select 1 from crowd_participants where annotator_id = ?)", [annotator_id]
    ).fetchone()[0]
    mine = "exists (select 1 from judgments j where j.pair_id = p.id and j.participant_id = :a)"
    done, asked = 0, []
    for row in db.query(
        f"select s.id, s.meta, count(p.id) as pairs, coalesce(sum({mine}), 0) as done, "
        f"coalesce(sum({mine} and {assignment.IS_CHECK}), 0) as checks_met, "
        f"coalesce(sum(not {mine} and {assignment.IS_CHECK}), 0) as checks_left, "
        f"coalesce(sum(not {mine} and not {assignment.IS_CHECK} and (select count(*) from judgments j "
        "where j.pair_id = p.id) < s.votes_per_pair), 0) as open from studies s join study_pairs p on "
        f"p.study_id = s.id where {assignment.OPEN_STUDY} and {assignment.JUDGED_STUDIES} group by s.id",
        {"a": annotator_id},
    ):
        meta = json.loads(row["meta"])
        cap = min(meta["trials_per_participant"], row["pairs"])
        done += row["done"]
        if crowd:
            wanted = cap
        else:
            checks = row["checks_met"] + row["checks_left"]
            share = assignment.study_check_share(meta.get("attention_rate"), checks, row["pairs"], cap)
            wanted = _trials_to_come(share, cap, row, annotator_id)
        if wanted:
            asked.append(wanted)
    return done, asked


def _trials_to_come(share: float, cap: int, row: dict, annotator_id: int) -> int:
    """The trials an invited participant will have judged in study ``row["id"]`` once its
    open model pairs (``row["open"]``) are judged, as `annotation.assignment` hands them out:
    trial by trial, an attention check where one is due (`annotation.assignment.checks_due`),
    one is left and the person has a model pair judged or to come, else a model pair; at
    most `cap`."""
    trials, met, checks_left, model_left = row["done"], row["checks_met"], row["checks_left"], row["open"]
    judged_models = trials - met
    while trials < cap:
        if (
            checks_left
            and (model_left or judged_models)
            and assignment.checks_due(share, trials + 1, annotator_id, row["id"]) > met
        ):
            met, checks_left = met + 1, checks_left - 1
        elif model_left:
            model_left, judged_models = model_left - 1, judged_models + 1
        else:
            break
        trials += 1
    return trials


def held_by_others(
    db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None
) -> tuple[int, str | None]:
    """Model pairs the participant has not judged, in the studies they judge, that other
    participants hold now: the pairs that may still come to them (a reservation its holder
    does not answer in time is released; an attention check, which takes any number of
    answers, is never held from them), and when the last of those reservations ends (ISO
    8601 UTC; None when there is none). When `next_trial` has none to give and the count is
    0, nothing in the study is left for them."""
    annotator_id = _participant(actor)
    count, latest = db.execute(
        "select count(distinct t.pair_id), max(t.expires) from tasks t join study_pairs p on p.id = t.pair_id "
        "join studies s on s.id = p.study_id where t.kind = 'judgment' and t.status = 'reserved' "
        f"and t.expires > :now and t.annotator_id != :a and not {assignment.IS_CHECK} and {assignment.OPEN_STUDY} and "
        f"{assignment.JUDGED_STUDIES} and not exists (select 1 from judgments j "
        "where j.pair_id = t.pair_id and j.participant_id = :a)",
        {"a": annotator_id, "now": iso(utcnow() if now is None else now)},
    ).fetchone()
    return int(count), latest


def kept_for_links(db: sqlite_utils.Database, actor: Actor, *, now: dt.datetime | None = None) -> str | None:
    """When the last person, of those who came through a study link and are in it now, runs
    out of time, among the open studies whose free votes are all kept for them
    (`annotation.assignment.kept_for_links`) and in which the participant from an invite has
    a model pair short of votes left to judge (ISO 8601 UTC); None when no such study.

    Such a participant was told "All done: you judged 0 trials" while the study still needed
    votes (outside probe 138)."""
    kept = assignment.kept_for_links(db, now=now)
    if not kept:
        return None
    left = {
        row[0]
        for row in db.execute(
            f"select distinct p.study_id from study_pairs p join studies s on s.id = p.study_id where "
            f"not {assignment.IS_CHECK} and p.study_id in ({','.join('?' * len(kept))}) and "
            "(select count(*) from judgments j where j.pair_id = p.id) < s.votes_per_pair and not exists "
            "(select 1 from judgments j where j.pair_id = p.id and j.participant_id = ?)",
            [*kept, _participant(actor)],
        )
    }
    return max((kept[study] for study in left), default=None)


def next_trial(
    db: sqlite_utils.Database,
    actor: Actor,
    rng: np.random.Generator,
    *,
    batch_size: int = BATCH_SIZE,
    minutes: float = assignment.RESERVATION_MINUTES,
    now: dt.datetime | None = None,
) -> Trial | None:
    """The participant's next trial, reserving up to `batch_size` pairs when none is held.

    Parameters
    ----------
    rng : numpy.random.Generator
        Passed to `annotation.assignment.reserve` (ties, left/right placement).
    batch_size : int
        Pairs held at once, >= 1 (never more than the trials still asked for).
    minutes : float
        Reservation lifetime.

    Returns
    -------
    Trial or None
        None when the participant has judged what was asked or no pair is left for them.
    """
    annotator_id = _participant(actor)
    done, asked = _progress(db, annotator_id)
    total = sum(asked)
    if done >= total:
        return None
    held = assignment.open_tasks(db, "judgment", annotator_id, now=now)
    if not held:
        held = assignment.reserve(
            db, "judgment", annotator_id, rng, min(batch_size, total - done), minutes=minutes, now=now
        )
    if not held:
        return None
    # When the trial first reached the page bounds the time its vote reports (`seconds_on_trial`);
    # written once, so that showing it again (a reload, each answer's next view) stays a read.
    if db.execute("select shown is null from tasks where id = ?", [held[0].id]).fetchone()[0]:
        with transaction(db):
            update_rows(
                db,
                "tasks",
                {"id": held[0].id, "shown": None},
                {"shown": iso(utcnow() if now is None else now)},
            )
    return trial(db, held[0].id, actor, number=done + 1, total=total, studies=len(asked))


def trial(
    db: sqlite_utils.Database,
    task_id: int,
    actor: Actor,
    *,
    number: int = 0,
    total: int = 0,
    studies: int = 1,
) -> Trial:
    """The `Trial` of a judgment task the participant holds."""
    task = _judgment_task(db, task_id, _participant(actor))
    pair = db["study_pairs"].get(task.pair_id)
    truth_row = db["study_ground_truths"].get((pair["study_id"], pair["concept_key"]))
    truth = GroundTruth(
        decode(truth_row["p"]),
        truth_row["n_colorings"],
        tuple((h, n) for h, n in json.loads(truth_row["dominant"])),
        _not_withdrawn(db, json.loads(truth_row["colorings"])),
    )
    sides = {slot: _side(db, pair, pair[slot], truth) for slot in ("a", "b")}
    right = "b" if task.left_item == "a" else "a"
    return Trial(
        task.id,
        pair["study_id"],
        pair["concept_key"],
        truth,
        sides[task.left_item],
        sides[right],
        number,
        total,
        studies,
    )


def _not_withdrawn(db, paths: list[str]) -> tuple[str, ...]:
    """The coloring images `paths` a trial may show: a study keeps the ground truth it was
    made with, but a coloring withdrawn since (its designer asked) is not shown to anyone
    (outside probe 221: a participant was shown a withdrawn designer's apple)."""
    withdrawn = withdrawn_files(db, paths)
    return tuple(p for p in paths if p not in withdrawn)


def _side(db, pair: dict, item: str, truth: GroundTruth) -> Side:
    if item == GROUND_TRUTH:
        return Side(item, truth.p, truth.colorings)
    row = db["study_candidates"].get((pair["study_id"], pair["concept_key"], item))
    return Side(item, decode(row["p"]), tuple(json.loads(row["images"])))


def _judgment_task(db, task_id, annotator_id: int) -> assignment.Task:
    if isinstance(task_id, bool) or not isinstance(task_id, (int, np.integer)):
        raise InvalidInput(f"`task_id` must be a whole number, got {shown(task_id)}")
    rows = list(
        db["tasks"].rows_where(
            "id = ? and annotator_id = ? and kind = 'judgment'", [int(task_id), annotator_id]
        )
    )
    if not rows:
        raise InvalidInput(f"`task_id` {task_id} is not a pair handed to you; ask for the next trial")
    return assignment.Task.from_row(rows[0])


def record_judgment(
    db: sqlite_utils.Database,
    actor: Actor,
    task_id: int,
    side: str,
    seconds: float,
    *,
    now: dt.datetime | None = None,
) -> int:
    """Store a participant's choice for the pair of a task they hold.

    Parameters
    ----------
    task_id : int
        A reserved judgment task of the participant.
    side : {'left', 'right'}
        The side they judged to match the ground truth better.
    seconds : float
        Time spent on the trial, >= 0.

    Returns
    -------
    int
        The ``judgments`` row id. Its ``left_item`` is the task's placement and
        ``winner`` the chosen item (``"a"`` or ``"b"`` of the pair).

    Raises
    ------
    InvalidInput
        Bad side or seconds, not the participant's judgment task, or the background
        question is unanswered. Nothing is stored then.
    """
    if side not in SIDES:
        raise InvalidInput(f"`side` must be one of {SIDES}, got {shown(side)}")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise InvalidInput(f"`seconds` must be a finite number >= 0, got {shown(seconds)}")
    annotator_id = _participant(actor)
    if design_background(db, actor) is None:
        raise InvalidInput("answer the question about your design or art background before your first trial")
    _judgment_task(db, task_id, annotator_id)
    # The trial on screen is the oldest one held (`next_trial`): a vote naming another held,
    # never shown one (an API client's) was stored with a placement nobody saw.
    held = assignment.open_tasks(db, "judgment", annotator_id, now=now)
    if held and held[0].id != int(task_id) and any(t.id == int(task_id) for t in held):
        raise Conflict(
            f"`task_id` {task_id} is not the trial shown to you now ({held[0].id} is): answer the trial on screen"
        )

    def write(conn, task: assignment.Task) -> int:
        other = "b" if task.left_item == "a" else "a"
        return insert_row(
            conn,
            "judgments",
            {
                "pair_id": task.pair_id,
                "participant_id": annotator_id,
                "left_item": task.left_item,
                "choice": side,
                "winner": task.left_item if side == "left" else other,
                "seconds_spent": float(seconds),
                "created": iso(now),
            },
        )

    _check_study_open(db, int(task_id), annotator_id)
    return assignment.submit(db, int(task_id), annotator_id, write, now=now)


class StudyClosed(Conflict):
    """An answer to a trial of a study closed since the trial was shown."""


def _check_study_open(db: sqlite_utils.Database, task_id: int, annotator_id: int) -> None:
    """Refuse an answer to a trial of the participant's whose study was closed since it was
    shown (`annotation.study.design.close_study` gave it back: they read "task 10 was already
    given back", a give-back they never made: outside probe 133)."""
    row = db.execute(
        "select p.study_id from tasks t join study_pairs p on p.id = t.pair_id where t.id = ? and t.annotator_id = ?",
        [task_id, annotator_id],
    ).fetchone()
    closed = None if row is None else closed_studies(db).get(str(row[0]))
    if closed is not None:
        raise StudyClosed(
            f"this study was closed by its organisers on {shown_time(closed['closed'])}; this answer was not "
            "stored, and those you gave before are kept"
        )


def seconds_since(shown_at: str, *, now: dt.datetime | None = None) -> float:
    """Seconds from `shown_at` (`storage.db.iso` text) to `now`, at least 0."""
    try:
        at = parse_iso(shown_at)
    except (TypeError, ValueError) as error:
        # A time written otherwise ("2000-01-01T00:00:00Z") read as refused for being a time.
        raise InvalidInput(
            f"`shown_at` must be the time participant_next gave with the trial, written as it writes "
            f"times (UTC with microseconds, such as {iso()!r}), got {shown(shown_at)}"
        ) from error
    return max(0.0, ((utcnow() if now is None else now) - at).total_seconds())


def seconds_on_trial(
    db: sqlite_utils.Database, actor: Actor, task_id: int, shown_at: str, *, now: dt.datetime | None = None
) -> float:
    """Seconds a participant spent on the trial of `task_id`, as `record_judgment` stores them.

    Counted from `shown_at` (the time ``participant_next`` gave with the trial, which the
    page sends back with the vote) to `now`, but from no earlier than the server first
    showed the trial (the task's ``shown``, set by `next_trial`; its ``created`` for one
    never shown): the value a client sends may shorten the time it reports, never lengthen
    it, and one later than `now` is refused. A participant's API call wrote 26.9 years, or
    any time a speeding check would pass, into the study's ``votes.csv`` (outside probe
    108); bounded by when the batch was handed out, another trial's ``shown_at`` stored 2.0 s
    for a trial on screen 0.3 s (outside probe 198). A task that is not theirs is left to
    `record_judgment` to refuse.
    """
    now = utcnow() if now is None else now
    seconds = seconds_since(shown_at, now=now)
    if parse_iso(shown_at) > now:
        raise InvalidInput(
            f"`shown_at` must be the time the trial was shown, as participant_next gave it; "
            f"{shown(shown_at)} is later than now"
        )
    try:
        rows = db.execute(
            "select coalesce(shown, created) from tasks where id = ? and annotator_id = ? and kind = 'judgment'",
            [int(task_id), actor.annotator_id],
        ).fetchall()
    except (TypeError, ValueError, OverflowError):  # no task id: `record_judgment` says so
        rows = []
    if rows:
        seconds = min(seconds, max(0.0, (now - parse_iso(rows[0][0])).total_seconds()))
    return seconds


def votes_frame(db: sqlite_utils.Database, study_id: int) -> pd.DataFrame:
    """The study's votes as `evaluation.analysis.judgments` reads them, one row per trial.

    Returns
    -------
    pandas.DataFrame
        Columns `VOTE_COLUMNS` (``model_a``/``model_b`` are the pair's items, the
        ground-truth side of a check is `GROUND_TRUTH`; ``chosen`` is the item picked;
        ``attention_passed`` is True/False for checks and None otherwise) then
        `EXTRA_COLUMNS` (``left_model`` the item shown on the left, ``choice`` the side
        clicked, ``seconds`` spent), ordered by judgment id.
    """
    get_study(db, study_id)
    rows = db.execute(
        "select p.id, p.concept_key, p.a, p.b, case j.winner when 'a' then p.a else p.b end, "
        "j.participant_id, a.design_background, p.b = ?, p.study_id, a.pseudonym, "
        "case j.left_item when 'a' then p.a else p.b end, j.choice, j.seconds_spent, "
        "j.created from judgments j join study_pairs p on p.id = j.pair_id join annotators a "
        "on a.id = j.participant_id where p.study_id = ? order by j.id",
        [GROUND_TRUTH, study_id],
    ).fetchall()
    frame = pd.DataFrame(
        rows, columns=[c for c in VOTE_COLUMNS if c != "attention_passed"] + list(EXTRA_COLUMNS)
    )
    frame["design_background"] = frame["design_background"].astype(bool)
    frame["attention_check"] = frame["attention_check"].astype(bool)
    passed = (frame["chosen"] == GROUND_TRUTH).astype(object)
    frame["attention_passed"] = passed.where(frame["attention_check"], None)
    return frame[list(VOTE_COLUMNS + EXTRA_COLUMNS)]


def study_metrics(db: sqlite_utils.Database, study_id: int) -> pd.DataFrame:
    """Metric values per (concept, model) of the study's copied distributions.

    Returns
    -------
    pandas.DataFrame
        Columns `EXPORT_METRIC_COLUMNS`, one row per candidate: PCC in [-1, 1], EMD in CIELAB
        ΔE units, ED in nats, the dominant UW-71 bins, DCA 1.0 when they agree else 0.0,
        and ``hue_diff`` in degrees [0, 180] (NaN when a dominant bin is achromatic), all
        from `evaluation.pipeline.scoring.concept_metrics`.
    """
    get_study(db, study_id)
    rows = list(
        db.query(
            "select c.concept_key, c.model, c.p, g.p as human from study_candidates c join "
            "study_ground_truths g on g.study_id = c.study_id and g.concept_key = c.concept_key "
            "where c.study_id = ? order by c.concept_key, c.model",
            [study_id],
        )
    )
    frame = pd.DataFrame({"concept": [r["concept_key"] for r in rows], "model": [r["model"] for r in rows]})
    if not rows:
        return frame.reindex(columns=EXPORT_METRIC_COLUMNS)
    human = np.array([decode(r["human"]) for r in rows])
    model = np.array([decode(r["p"]) for r in rows])
    frame = frame.assign(**concept_metrics(human, model))
    frame["dca"] = dca_column(frame)
    return frame[list(EXPORT_METRIC_COLUMNS)]


def export_votes(db: sqlite_utils.Database, path: str | Path, *, study_id: int | None = None) -> int:
    """Write the votes of one study (default: every study) as CSV; returns the row count."""
    ids = (
        [study_id]
        if study_id is not None
        else [row[0] for row in db.execute("select id from studies order by id")]
    )
    frames = [votes_frame(db, i) for i in ids]
    frame = pd.concat(frames) if frames else pd.DataFrame(columns=list(VOTE_COLUMNS + EXTRA_COLUMNS))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_csv(frame, path, index=False)
    return len(frame)


def export_study(db: sqlite_utils.Database, study_id: int, folder: str | Path) -> dict[str, Path]:
    """Write ``votes.csv``, ``metrics.csv`` and ``design.json`` of a study into `folder`.

    Returns
    -------
    dict of str to Path
        ``{"votes": ..., "metrics": ..., "design": ...}``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "votes": folder / "votes.csv",
        "metrics": folder / "metrics.csv",
        "design": folder / "design.json",
    }
    export_votes(db, paths["votes"], study_id=study_id)
    write_csv(with_bin_names(study_metrics(db, study_id), DOMINANT_COLUMNS), paths["metrics"], index=False)
    paths["design"].write_text(json.dumps(study_design(db, study_id), indent=2), encoding="utf-8")
    return paths


def _check_analysable(
    db: sqlite_utils.Database, study_id: int, votes: pd.DataFrame, exclude_flagged: bool
) -> None:
    """Refuse, before anything is written, a study without a vote on a model pair to analyse."""
    if get_study(db, study_id)["frozen"] is None:
        raise Conflict(f"study {study_id} is a draft: open it and collect votes first; nothing was written")
    if exclude_flagged:
        flagged = set(votes.loc[votes["attention_passed"].eq(False), "participant_id"])
        votes = votes[~votes["participant_id"].isin(flagged)]
    if not (~votes["attention_check"]).any():
        left = " once participants who failed a check are left out" if exclude_flagged else ""
        raise Conflict(
            f"study {study_id} has no vote on a model pair yet{left}: nothing to analyse; nothing was written"
        )


def analyse_study(
    db: sqlite_utils.Database,
    study_id: int,
    folder: str | Path,
    *,
    seed: int = 0,
    n_boot: int = 1000,
    exclude_flagged: bool = False,
) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """Analyse a study (`evaluation.analysis.judgment_report.analyse`) and write every table as CSV.

    Parameters
    ----------
    folder : str or Path
        Where the export (`export_study`) and the tables' CSV files go.
    seed : int
        Seed of the bootstrap resamples (``numpy.random.default_rng``).
    n_boot : int
        Bootstrap resamples, >= 1 (the CSVs with intervals carry both, and the level, as
        columns: `evaluation.analysis.judgment_report.with_resampling`).
    exclude_flagged : bool
        Leave out participants who failed an attention check.

    Returns
    -------
    tables : dict of str to pandas.DataFrame
        See `evaluation.analysis.judgment_report.analyse`.
    paths : list of Path
        The CSV and JSON files written.

    Raises
    ------
    Conflict
        The study is a draft, or has no vote on a model pair (after leaving out flagged
        participants, if asked); nothing is written.
    """
    votes = votes_frame(db, study_id)
    _check_analysable(db, study_id, votes, exclude_flagged)
    exported = export_study(db, study_id, folder)
    tables = analyse(
        votes,
        study_metrics(db, study_id),
        rng=np.random.default_rng(seed),
        n_boot=n_boot,
        exclude_flagged=exclude_flagged,
    )
    written = write_tables(with_resampling(tables, n_boot=n_boot, ci=CI, seed=seed), folder)
    return tables, [*written.values(), *exported.values()]
