"""Handing out work fairly: colorization, expert review and pairwise judgments.

Every unit of work is a ``tasks`` row reserved for one person until ``expires``. A
reservation counts against its target's quota while it lasts; when it expires it returns
to the pool. Reserving and submitting each run in one ``BEGIN IMMEDIATE`` transaction, so
concurrent people can neither exceed a quota nor take the same slot twice.

Rules (issue 3, paper §3.2, Appendix B.3, B.4, D)
-------------------------------------------------
- ``coloring``: each concept variant gets `k` main-task colorings (paper: 5) from `k`
  different designers; a designer never gets a concept they already colored. Only concepts
  whose base concept has a selected sketch are handed out. Excluded colorings stop
  counting, so the concept returns to the pool (for other designers).
- ``review``: each coloring under review (a ``reviews`` row) gets ``votes_needed`` votes
  (paper: 3) from different experts, never from the coloring's own designer.
- ``judgment``: each pair of a frozen study gets ``votes_per_pair`` votes (paper: 6) from
  different participants; nobody judges a pair twice; which item is shown on the left is
  balanced within each pair (the one its live and answered tasks showed there less often;
  a tie is drawn) and stored (``tasks.left_item``, then ``judgments.left_item``). A study's
  attention checks are spread evenly over each person's trials (`checks_due`).

Least-covered targets come first (fill = results + live reservations); ties are broken at
random with the `numpy.random.Generator` passed in. While a pilot study is set
(`annotation.pilot`), its concepts come before every other concept (least covered first
among them), so designers overlap on them: with a pilot no larger than a batch, each
designer colors every pilot concept and k designers give each one k colorings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sqlite_utils
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from annotation.errors import (
    AlreadyDone,
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    ReservationExpired,
)
from storage import insert_row, iso, parse_iso, select, transaction, update_rows, utcnow
from storage.shown import shown

RESERVATION_MINUTES = 120.0
#: Colorings that fill a concept's quota: excluded ones do not, so the concept returns to
#: the pool; a recolor request is redone by the same designer, so it keeps its slot.
COUNTED_STATUSES = ("submitted", "accepted", "recolor_requested")
_COUNTED = "('" + "', '".join(COUNTED_STATUSES) + "')"
_TARGET = {"coloring": "concept_key", "review": "coloring_id", "judgment": "pair_id"}
_ROLE = {"coloring": "designer", "review": "expert", "judgment": "participant"}
# Per kind: results counted against the quota for target :t (and those by person :a).
_DONE = {
    "coloring": f"select count(distinct annotator_id) from colorings where concept_key = :t "
    f"and practice = 0 and status in {_COUNTED}",
    "review": "select count(*) from qc_votes where coloring_id = :t",
    "judgment": "select count(*) from judgments where pair_id = :t",
}
_DONE_BY = {
    "coloring": "select count(*) from colorings where concept_key = :t and practice = 0 "
    "and annotator_id = :a",
    "review": "select count(*) from qc_votes where coloring_id = :t and expert_id = :a",
    "judgment": "select count(*) from judgments where pair_id = :t and participant_id = :a",
}
IS_CHECK = "coalesce(json_extract(p.meta, '$.attention_check'), 0)"
"""SQL condition on ``study_pairs p``: the pair is an attention check."""
CLOSED_STUDIES = "closed_studies"
"""The setting holding the closed studies, ``{"<id>": {"closed": time, "why": text}}`` as
JSON (`annotation.study.design.close_study`): a frozen study's row takes no change."""
OPEN_STUDY = (
    "s.frozen is not null and not exists (select 1 from settings c where c.key = "
    f"'{CLOSED_STUDIES}' and json_extract(c.value, '$.\"' || s.id || '\"') is not null)"
)
"""SQL condition on ``studies s``: open (frozen) and not closed."""
_QUOTA = {
    "coloring": "select :k",
    "review": "select votes_needed from reviews where coloring_id = :t and status = 'open'",
    # An attention check takes any number of answers (each person's one): with a quota like
    # a pair's, people screened out early used them up and the last people met none.
    "judgment": f"select case when {IS_CHECK} then {2**31} else s.votes_per_pair end from "
    f"study_pairs p join studies s on s.id = p.study_id where p.id = :t and {OPEN_STUDY}",
}
JUDGED_STUDIES = (
    "(s.id in (select l.study_id from crowd_participants c join crowd_links l on l.id = c.link_id "
    "where c.annotator_id = :a) or not exists (select 1 from crowd_participants c where c.annotator_id = :a))"
)
"""SQL condition on ``studies s``: the studies participant ``:a`` judges. Someone who came
through an open study link (`annotation.study.crowd`) judges that link's study alone, and is
done when it is; a participant from an invite judges every open study."""
# Per kind: the targets (t) and whether each comes first (priority 1: a pilot concept).
_POOL = {
    "coloring": "select c.key as t, exists (select 1 from pilot_concepts l where "
    "l.concept_key = c.key) as priority from concepts c where exists (select 1 from sketches s "
    "where s.base = c.base and s.selected = 1)",
    "review": "select r.coloring_id as t, 0 as priority from reviews r join colorings g on g.id = "
    "r.coloring_id where r.status = 'open' and g.annotator_id != :a",
    "judgment": "select p.id as t, 0 as priority from study_pairs p join studies s on s.id = "
    f"p.study_id where {OPEN_STUDY} and {JUDGED_STUDIES}",
}


@dataclass(frozen=True)
class Task:
    """One reserved unit of work (a ``tasks`` row)."""

    id: int
    kind: str
    annotator_id: int
    concept_key: str | None
    coloring_id: int | None
    pair_id: int | None
    left_item: str | None
    practice: bool
    status: str
    created: str
    expires: str

    @classmethod
    def from_row(cls, row: dict) -> Task:
        return cls(
            row["id"],
            row["kind"],
            row["annotator_id"],
            row["concept_key"],
            row["coloring_id"],
            row["pair_id"],
            row["left_item"],
            bool(row["practice"]),
            row["status"],
            row["created"],
            row["expires"],
        )

    @property
    def target(self) -> str | int:
        """The concept key, coloring id or pair id this task is about."""
        return getattr(self, _TARGET[self.kind])


def reserve(
    db: sqlite_utils.Database,
    kind: str,
    annotator_id: int,
    rng: np.random.Generator,
    batch_size: int,
    *,
    k: int = 5,
    minutes: float = RESERVATION_MINUTES,
    now: dt.datetime | None = None,
    created: str | None = None,
) -> list[Task]:
    """Reserve work for one person, topping their open tasks up to `batch_size`.

    Parameters
    ----------
    kind : {'coloring', 'review', 'judgment'}
    annotator_id : int
        An active annotator with the kind's role (designer, expert, participant).
    rng : numpy.random.Generator
        Breaks ties among equally covered targets and draws the left item of judgments.
    batch_size : int
        Open tasks a person may hold at once (issue: 40-50 for colorization), >= 1.
    k : int
        Colorings per concept variant (``coloring`` only; paper: 5).
    minutes : float
        Reservation lifetime, > 0.
    created : str, optional
        The ``created`` stamp of the new tasks (default `now`): a designer's batch is the
        set of tasks sharing one stamp (`annotation.coloring.tasks.top_up`).

    Returns
    -------
    list of Task
        The person's open tasks of this kind, oldest first (possibly fewer than
        `batch_size`, or none, when the pool runs dry).
    """
    _check_reserve(kind, batch_size, k, minutes)
    now = utcnow() if now is None else now
    with transaction(db):
        _check_annotator(db, annotator_id, _ROLE[kind])
        expire(db, now=now)
        held = _open(db, kind, annotator_id)
        wanted = batch_size - len(held)
        if wanted > 0:
            expires = iso(now + dt.timedelta(minutes=minutes))
            for target in _pick(db, kind, annotator_id, rng, wanted, k, now):
                left = _left_item(db, target, rng) if kind == "judgment" else None
                insert_row(
                    db,
                    "tasks",
                    {
                        "kind": kind,
                        "annotator_id": annotator_id,
                        _TARGET[kind]: target,
                        "left_item": left,
                        "practice": 0,
                        "status": "reserved",
                        "created": iso(now) if created is None else created,
                        "expires": expires,
                    },
                )
        return _open(db, kind, annotator_id)


def _left_item(db: sqlite_utils.Database, pair_id: int, rng: np.random.Generator) -> str:
    """The item of pair `pair_id` to show on the left: the one its reserved and answered
    tasks showed there less often, a tie drawn from `rng`. A coin per task left an outside
    check's pairs at 6 of 6 on one side, and "always left" voters made a preference of it."""
    shown = dict(
        db.execute(
            "select left_item, count(*) from tasks where pair_id = ? and kind = 'judgment' "
            "and status in ('reserved', 'submitted') group by left_item",
            [pair_id],
        ).fetchall()
    )
    a, b = shown.get("a", 0), shown.get("b", 0)
    return "a" if a < b else "b" if b < a else str(rng.choice(["a", "b"]))


def reserve_practice(
    db: sqlite_utils.Database,
    annotator_id: int,
    keys: tuple[str, ...],
    *,
    minutes: float = RESERVATION_MINUTES,
    now: dt.datetime | None = None,
) -> list[Task]:
    """Reserve the practice colorings `keys` a designer has no standing practice coloring of.

    Practice colorings count towards no quota. Returns the open practice tasks.
    """
    _check_reserve("coloring", 1, 1, minutes)
    now = utcnow() if now is None else now
    with transaction(db):
        _check_annotator(db, annotator_id, "designer")
        unknown = [key for key in keys if not db["concepts"].count_where("key = ?", [key])]
        if unknown:
            raise NotFound(f"unknown practice concepts {unknown}")
        expire(db, now=now)
        for key in keys:
            standing = db.execute(
                "select (select count(*) from colorings where annotator_id = ? and "
                "concept_key = ? and practice = 1 and status in ('submitted', 'accepted')) + "
                "(select count(*) from tasks where annotator_id = ? and concept_key = ? and "
                "practice = 1 and status = 'reserved')",
                [annotator_id, key, annotator_id, key],
            ).fetchone()[0]
            if not standing:
                insert_row(
                    db,
                    "tasks",
                    {
                        "kind": "coloring",
                        "annotator_id": annotator_id,
                        "concept_key": key,
                        "practice": 1,
                        "status": "reserved",
                        "created": iso(now),
                        "expires": iso(now + dt.timedelta(minutes=minutes)),
                    },
                )
        return _open(db, "coloring", annotator_id, practice=1)


def submit(
    db: sqlite_utils.Database,
    task_id: int,
    annotator_id: int,
    write: Callable[[sqlite_utils.Database, Task], int],
    *,
    k: int = 5,
    now: dt.datetime | None = None,
) -> int:
    """Complete a task: check it, let `write` store the result, mark the task submitted.

    All in one transaction: if `write` raises, nothing is stored and the task stays open.

    Parameters
    ----------
    task_id, annotator_id : int
        The task, and who submits it (must be its holder).
    write : callable
        ``write(db, task) -> int`` inserts the result row (coloring, QC vote or judgment)
        and returns its id. It runs inside the transaction; it must not commit.
    k : int
        Colorings per concept (``coloring`` tasks).

    Returns
    -------
    int
        The id `write` returned.

    Raises
    ------
    NotFound, PermissionDenied, Conflict
        Unknown task, someone else's task, already submitted or given back.
    ReservationExpired
        The reservation ran out and its slot was taken meanwhile (or the target closed).
    """
    now = utcnow() if now is None else now
    with transaction(db):
        task = _task_for(db, task_id, annotator_id)
        if not task.practice:
            _check_slot(db, task, k, now)
        result_id = write(db, task)
        update_rows(
            db,
            "tasks",
            {"id": task.id},
            {"status": "submitted", "finished": iso(now), "result_id": result_id},
        )
        return result_id


def release(
    db: sqlite_utils.Database, task_id: int, annotator_id: int, *, now: dt.datetime | None = None
) -> None:
    """Give a reserved task back to the pool (the person skips it)."""
    with transaction(db):
        task = _task_for(db, task_id, annotator_id)
        update_rows(db, "tasks", {"id": task.id}, {"status": "released", "finished": iso(now)})


def release_all(db: sqlite_utils.Database, annotator_id: int, *, now: dt.datetime | None = None) -> int:
    """Give every task the person holds back to the pool, as `release` gives one; how many.

    For closing the person's account (`annotation.people.accounts.revoke_annotator`): their
    reservations, practice ones included, would otherwise keep their targets' places until
    they expire. Submitted, expired and released tasks stay as they are.
    """
    with transaction(db):
        return update_rows(
            db,
            "tasks",
            {"annotator_id": annotator_id, "status": "reserved"},
            {"status": "released", "finished": iso(now)},
        )


def expire(db: sqlite_utils.Database, *, now: dt.datetime | None = None) -> int:
    """Mark every reservation past its deadline ``expired``; returns how many."""
    with transaction(db):
        return update_rows(
            db,
            "tasks",
            {"status": "reserved", "expires <=": iso(now)},
            {"status": "expired", "finished": iso(now)},
        )


def open_tasks(
    db: sqlite_utils.Database,
    kind: str,
    annotator_id: int,
    *,
    practice: bool = False,
    now: dt.datetime | None = None,
) -> list[Task]:
    """The person's reserved, unexpired tasks of `kind`, oldest first."""
    _check_kind(kind)
    rows = select(
        db,
        "select * from tasks where kind = ? and annotator_id = ? and practice = ? "
        "and status = 'reserved' and expires > ? order by id",
        [kind, annotator_id, int(practice), iso(now)],
    )
    return [Task.from_row(r) for r in rows]


def submitted_count(
    db: sqlite_utils.Database, kind: str, annotator_id: int, *, practice: bool = False
) -> int:
    """How many tasks of `kind` the person has submitted."""
    _check_kind(kind)
    return db["tasks"].count_where(
        "kind = ? and annotator_id = ? and practice = ? and status = 'submitted'",
        [kind, annotator_id, int(practice)],
    )


def _open(db, kind: str, annotator_id: int, practice: int = 0) -> list[Task]:
    rows = select(
        db,
        "select * from tasks where kind = ? and annotator_id = ? and practice = ? "
        "and status = 'reserved' order by id",
        [kind, annotator_id, practice],
    )
    return [Task.from_row(r) for r in rows]


def _pick(
    db, kind: str, annotator_id: int, rng: np.random.Generator, n: int, k: int, now: dt.datetime
) -> list:
    """Up to `n` targets the person may take: pilot concepts first, least filled first,
    random among equals (judgments: `_pick_judgments`)."""
    rows = pool_rows(db, kind, annotator_id, k)
    if not rows:
        return []
    order = rng.permutation(len(rows))
    ranked = [rows[i][0] for i in sorted(order, key=lambda i: (not rows[i][2], rows[i][1]))]
    return _pick_judgments(db, annotator_id, ranked, n, now) if kind == "judgment" else ranked[:n]


def checks_due(share: float, trial: int, annotator_id: int, study_id: int) -> int:
    """Attention checks a participant should have met by their `trial`-th trial of a study.

    The trials are cut into runs of about ``1 / share`` (e.g. 10 for a share of 0.1; run
    ``i`` holds the trials after ``floor(i / share)`` up to ``floor((i + 1) / share)``), and
    each run holds one check at a place drawn for the person, the study and the run, uniform
    within it. With a share of 0.1 everyone meets one check in trials 1-10, one in 11-20, and
    so on, at no place they could learn; by trial ``t`` they have met within one of
    ``share * t``.

    Parameters
    ----------
    share : float
        The study's attention-check share as designed (``attention_rate``), in [0, 1).
    trial : int
        1 for the first trial, >= 1.

    Examples
    --------
    >>> [checks_due(0.1, trial, 7, 1) for trial in (10, 20, 30)]
    [1, 2, 3]
    """
    if share <= 0:
        return 0
    t = trial - 1  # counted from 0
    run = int(np.floor(t * share))
    while np.floor((run + 1) / share) <= t:
        run += 1
    while run > 0 and np.floor(run / share) > t:
        run -= 1
    first, after = int(np.floor(run / share)), int(np.floor((run + 1) / share))
    place = first + int(np.random.default_rng([annotator_id, study_id, run]).random() * (after - first))
    return run + int(place <= t)


def fewest_checks(share: float, trials: int) -> int:
    """The fewest attention checks anyone meets in their first `trials` trials at `share`
    (`checks_due`): one in each run of trials that ends within them (the place of the check
    in a run that has not ended is drawn per person).

    Examples
    --------
    >>> fewest_checks(0.2, 8), fewest_checks(0.2, 10), fewest_checks(0.0, 8)
    (1, 2, 0)
    """
    if share <= 0:
        return 0
    runs = 0
    while np.floor((runs + 1) / share) <= trials:
        runs += 1
    return runs


def check_share(rate: float, trials: int) -> float:
    """The share of attention checks a participant asked for `trials` trials of a study meets:
    the design's `rate`, or one check in their trials when they take fewer than ``1 / rate``
    (at 10 % a person of 5 trials met a check by luck, one time in two).

    Examples
    --------
    >>> check_share(0.1, 30), check_share(0.1, 5), check_share(0.0, 5)
    (0.1, 0.2, 0.0)
    """
    return max(rate, 1 / trials) if rate > 0 and trials > 0 else rate


def study_check_share(rate: float | None, checks: int, pairs: int, trials: int) -> float:
    """`check_share` of a study of `pairs` pairs, `checks` of them attention checks, for a
    person asked for `trials`: its design's `rate` (``attention_rate``; when a study has
    none recorded, the share of its checks), 0 for a study without checks."""
    return check_share(checks / pairs if rate is None else float(rate), trials) if checks else 0.0


def _pick_judgments(db, annotator_id: int, ranked: list[int], n: int, now: dt.datetime) -> list[int]:
    """Up to `n` of the pair ids `ranked` (in order of preference), never more of a study
    than its ``trials_per_participant`` (at most its pairs) with the person's answered and
    held trials: at each step the first one that is an attention check exactly when the
    person is due one in its study (`checks_due`), else the first model pair. A participant
    from an invite takes no model pair a study's link's people are owed (`_room_beside_crowd`).

    Handed out by fill alone, checks fell unevenly (an outside check's participants met 0
    to 5 checks in 10 trials, so one was screened out sooner than another for the same
    carelessness, and one who met none could not be flagged), and a participant from an
    invite, who judges every open study, got 9 trials of a study asking 6."""
    pairs = {
        row[0]: (row[1], bool(row[2]))
        for row in db.execute(
            f"select p.id, p.study_id, {IS_CHECK} from study_pairs p join studies s on "
            "s.id = p.study_id where s.frozen is not null"
        )
    }
    share, cap = _shares(db)
    met = {
        study: [trials, checks]
        for study, trials, checks in db.execute(
            f"select p.study_id, count(*), sum({IS_CHECK}) "
            "from tasks t join study_pairs p on p.id = t.pair_id where t.kind = 'judgment' and "
            "t.practice = 0 and t.annotator_id = ? and t.status in ('reserved', 'submitted') "
            "group by p.study_id",
            [annotator_id],
        )
    }
    # Someone who came through a study link is asked for a fixed number of trials and
    # completes at that number: a check due after their last model pair is theirs too (at
    # 10 trials of a study of 9 pairs and a check, one person in ten met it at trial 10,
    # found it withheld and could never complete).
    fixed = db.execute(
        "select exists (select 1 from crowd_participants where annotator_id = ?)", [annotator_id]
    ).fetchone()[0]
    people = _link_people(db, share, cap, now)
    room = {} if fixed else _room_beside_crowd(db, people)
    placements = _crowd_placements(db, people, now)

    def may_take(pair: int) -> bool:
        """A model pair the person may take without leaving a link's person in the study
        short (`_crowd_placements`): slack, or one placed for them."""
        study = pairs[pair][0]
        if study not in placements:
            return True
        whole, placed, slack = placements[study]
        if pair in placed.get(annotator_id, ()):
            return True
        # Where no placement holds everyone already, a link's person is not held back by it
        return slack.get(pair, 0) > 0 or (fixed and not whole)

    picked = []
    while len(picked) < n:
        left = [
            p
            for p in ranked
            if p not in picked
            and met.get(pairs[p][0], (0, 0))[0] < cap[pairs[p][0]]
            # a check, or a model pair not owed to a link's people
            and (pairs[p][1] or room.get(pairs[p][0], 1) > 0 and may_take(p))
        ]
        due = {
            study: checks_due(share[study], trials + 1, annotator_id, study) > checks
            for study, (trials, checks) in ((s, met.get(s, (0, 0))) for s in share)
        }
        # A check only when one is due, and only in a study with a model pair still left for
        # the person, one they judged a model pair in, or one whose trials are fixed (checks
        # take any number of answers: no check alone in a study they have no pair of); a model
        # pair when a due check has none left. A check due right after the person's last model
        # pair is theirs (at 20 % and 5 trials, someone whose check fell on trial 5 of a study
        # with 4 model pairs left judged 4 and met none: outside probe 211).
        open_in = {pairs[p][0] for p in left if fixed or not pairs[p][1]}
        open_in |= {study for study, (trials, checks) in met.items() if trials > checks}
        pair_id = next(
            (p for p in left if pairs[p][1] == due[pairs[p][0]] and pairs[p][0] in open_in),
            next((p for p in left if not pairs[p][1]), None),
        )
        if pair_id is None:
            break
        picked.append(pair_id)
        study, check = pairs[pair_id]
        counts = met.setdefault(study, [0, 0])
        counts[0] += 1
        counts[1] += check
        if not check and study in room:
            room[study] -= 1
        if not check and study in placements:
            whole, placed, slack = placements[study]
            if pair_id in placed.get(annotator_id, ()):
                placed[annotator_id].discard(pair_id)
            elif pair_id in slack:
                slack[pair_id] -= 1
    return picked


def placement(
    demands: list[int], capacity: dict[int, int], barred: set[tuple[int, int]]
) -> tuple[bool, list[set[int]], dict[int, int]]:
    """A placement of people's trials on pairs: person ``i`` is given ``demands[i]`` pairs,
    distinct, none ``(i, pair)`` in `barred` (judged or held already), and no pair more
    people than its ``capacity`` (votes still wanted). A maximum flow (scipy's
    `maximum_flow`) from the people through the pairs they may take, one vote a pair.

    Returns
    -------
    (bool, list of set of int, dict)
        Whether every demand is placed; the pairs placed for each person; each pair's
        slack (its capacity less the people placed on it).
    """
    pairs = [p for p, n in capacity.items() if n > 0]
    first, sink = 1 + len(demands), 1 + len(demands) + len(pairs)
    # The people's edges to the pairs built as arrays: 0.25 s with the flow for 50 people on
    # 26,838 pairs, where a list of tuples took 1.8 s, at every hand-out and join.
    allowed = np.zeros((len(demands), len(pairs)), dtype=bool)
    allowed[[i for i, n in enumerate(demands) if n > 0]] = True
    column = {pair: k for k, pair in enumerate(pairs)}
    for i, pair in barred:
        if 0 <= i < len(demands) and pair in column:
            allowed[i, column[pair]] = False
    people, onto = np.nonzero(allowed)
    if not len(people):
        return sum(demands) == 0, [set() for _ in demands], {p: capacity[p] for p in pairs}
    given = [(i, n) for i, n in enumerate(demands) if n > 0]
    tails = np.concatenate([np.zeros(len(given)), 1 + people, first + np.arange(len(pairs))]).astype(np.int32)
    heads = np.concatenate([[1 + i for i, _ in given], first + onto, np.full(len(pairs), sink)]).astype(
        np.int32
    )
    caps = np.concatenate(
        [[n for _, n in given], np.ones(len(people)), [capacity[pair] for pair in pairs]]
    ).astype(np.int32)
    result = maximum_flow(csr_array((caps, (tails, heads)), shape=(sink + 1, sink + 1)), 0, sink)
    flow = result.flow.tocoo()
    used = (flow.data > 0) & (flow.row >= 1) & (flow.row < first) & (flow.col >= first) & (flow.col < sink)
    placed = [set() for _ in demands]
    slack = {p: capacity[p] for p in pairs}
    for tail, head in zip(flow.row[used], flow.col[used]):  # a person's edge to a pair
        pair = pairs[head - first]
        placed[tail - 1].add(pair)
        slack[pair] -= 1
    return int(result.flow_value) == sum(demands), placed, slack


def _link_people(
    db, share: dict[int, float], cap: dict[int, int], now: dt.datetime
) -> list[tuple[int, int, int, dt.datetime]]:
    """``(study, person, owed, end)`` of each person in an open study through one of its
    links now (active, their time not run out): the model-pair trials they are owed and do
    not hold yet (their trials, ``cap``, less the checks due in them and the model pairs
    they judged or hold), and when their time ends."""
    people = []
    for person, study, started, minutes, taken in db.execute(
        "select c.annotator_id, l.study_id, c.started, l.minutes, (select count(*) from tasks t "
        "join study_pairs p on p.id = t.pair_id where t.kind = 'judgment' and t.practice = 0 and "
        "t.annotator_id = c.annotator_id and p.study_id = l.study_id and t.status in "
        f"('reserved', 'submitted') and not {IS_CHECK}) from crowd_participants c "
        "join crowd_links l on l.id = c.link_id where c.status = 'active'"
    ):
        end = parse_iso(started) + dt.timedelta(minutes=minutes)
        if study not in cap or end <= now:
            continue  # a study not open, or a person whose time ran out (timed out when next seen)
        model_trials = cap[study] - checks_due(share[study], cap[study], person, study)
        people.append((study, person, max(0, model_trials - taken), end))
    return people


def _crowd_placements(
    db, people: list[tuple[int, int, int, dt.datetime]], now: dt.datetime
) -> dict[int, tuple[bool, dict[int, set[int]], dict[int, int]]]:
    """Per study that people of its links are in now (`_link_people`'s `people`): a
    `placement` of the model-pair trials each is owed and does not hold yet on the pairs'
    free votes (``votes_per_pair`` less votes and live reservations): whether all are
    placed, the pairs placed for each person, and each pair's slack. Trials handed out by
    it leave everyone in a placement: an invitee takes only slack, a link's person their
    own placed pairs or slack (outside probe 224: an invitee, and a newcomer's hand-out,
    took the one pair a person let in still needed, who was never done)."""
    owed: dict[int, dict[int, int]] = {}
    for study, person, owes, _ in people:
        owed.setdefault(study, {})[person] = owes
    placements = {}
    for study, people in owed.items():
        free = dict(
            db.execute(
                "select p.id, s.votes_per_pair - (select count(*) from judgments j where j.pair_id = p.id) - "
                "(select count(*) from tasks r where r.kind = 'judgment' and r.practice = 0 and "
                "r.status = 'reserved' and r.expires > ? and r.pair_id = p.id) from study_pairs p join "
                f"studies s on s.id = p.study_id where p.study_id = ? and not {IS_CHECK}",
                [iso(now), study],
            ).fetchall()
        )
        order = list(people)
        index = {person: i for i, person in enumerate(order)}
        barred = {
            (index[person], pair)
            for person, pair in db.execute(
                "select t.annotator_id, t.pair_id from tasks t join study_pairs p on p.id = t.pair_id "
                "where t.kind = 'judgment' and t.status in ('reserved', 'submitted') and p.study_id = ? "
                f"and t.annotator_id in ({','.join('?' * len(order))})",
                [study, *order],
            )
        }
        whole, placed, slack = placement([people[p] for p in order], free, barred)
        placements[study] = (whole, dict(zip(order, placed)), slack)
    return placements


def trials_asked(db: sqlite_utils.Database, study_id: int) -> tuple[float, int]:
    """The share of a person's trials in study `study_id` that are attention checks, and
    the trials it asks of a person (``trials_per_participant``, at most its pairs); a study
    without pairs asks none."""
    share, cap = _shares(db, study_id)
    return share.get(study_id, 0.0), cap.get(study_id, 0)


def _shares(db, study_id: int | None = None) -> tuple[dict[int, float], dict[int, int]]:
    """Per frozen study (or study `study_id`, frozen or not): the share of a person's
    trials that are attention checks, and the trials it asks of a person (its
    ``trials_per_participant``, at most its pairs)."""
    # The runs follow the design's share (runs of exactly 10 at 10 %), not the share its
    # rounded count of checks gives (0.1007: runs of 9 and 10, so two checks could meet at
    # trials 9 and 10, which an outside check read as two in ten).
    share, cap = {}, {}
    for study, total, checks, rate, asked in db.execute(
        f"select p.study_id, count(*), sum({IS_CHECK}), json_extract(s.meta, '$.attention_rate'), "
        "json_extract(s.meta, '$.trials_per_participant') from study_pairs p join studies s on "
        "s.id = p.study_id where "
        + ("s.frozen is not null" if study_id is None else "s.id = ?")
        + " group by p.study_id",
        [] if study_id is None else [study_id],
    ):
        cap[study] = total if asked is None else min(total, asked)
        share[study] = study_check_share(rate, checks, total, cap[study])
    return share, cap


def _room_beside_crowd(db, people: list[tuple[int, int, int, dt.datetime]]) -> dict[int, int]:
    """Per study that people of its links are in now (`_link_people`'s `people`): the model pairs' votes that are free
    (a pair's ``votes_per_pair`` less its votes and live reservations) beyond those its
    active link people are owed and do not hold yet (their trials, ``cap``, less the checks
    due in them and the model pairs they judged or hold). A participant from an invite
    takes no more of its model pairs than that.

    A person let in through a link holds no trial until they agree to the consent text and
    press Start; an invitee arriving meanwhile took the pairs their share was counted on,
    and they timed out with no trial and no code (outside probe 137).
    """
    return {study: room for study, (room, _) in _beside_crowd(db, people).items()}


def _beside_crowd(db, people: list[tuple[int, int, int, dt.datetime]]) -> dict[int, tuple[int, dt.datetime]]:
    """`_room_beside_crowd`, each study's room with when the last of its active link
    people's time ends."""
    owed: dict[int, int] = {}
    ends: dict[int, dt.datetime] = {}
    for study, _person, owes, end in people:
        owed[study] = owed.get(study, 0) + owes
        ends[study] = max(end, ends.get(study, end))
    if not owed:
        return {}
    free = dict(
        db.execute(
            f"select p.study_id, sum(max(0, s.votes_per_pair - (select count(*) from judgments j "
            f"where j.pair_id = p.id) - (select count(*) from tasks r where r.kind = 'judgment' and "
            f"r.practice = 0 and r.status = 'reserved' and r.pair_id = p.id))) from study_pairs p "
            f"join studies s on s.id = p.study_id where not {IS_CHECK} and p.study_id in "
            f"({','.join('?' * len(owed))}) group by p.study_id",
            list(owed),
        )
    )
    return {study: (free.get(study, 0) - debt, ends[study]) for study, debt in owed.items()}


def kept_for_links(db: sqlite_utils.Database, *, now: dt.datetime | None = None) -> dict[int, str]:
    """Per open study whose model pairs' free votes all go to the people of its links who
    are in it now (`_room_beside_crowd`): when the last of those people's time ends (ISO
    8601 UTC). A participant from an invite takes none of its model pairs until then, or
    until those people have judged their trials."""
    share, cap = _shares(db)
    open_ids = {row[0] for row in db.execute(f"select s.id from studies s where {OPEN_STUDY}")}
    return {
        study: iso(end)
        for study, (room, end) in _beside_crowd(
            db, _link_people(db, share, cap, utcnow() if now is None else now)
        ).items()
        if room <= 0 and study in open_ids
    }


def pool_rows(db: sqlite_utils.Database, kind: str, annotator_id: int, k: int) -> list[tuple]:
    """The targets of `kind` the person may take now, with how full each is.

    A target is open while its fill (results counted against the quota plus live and
    expired-but-unmarked reservations; call `expire` first) is under its quota, and the
    person has neither a result for it nor a reservation of it.

    Parameters
    ----------
    db : sqlite_utils.Database
    kind : {'coloring', 'review', 'judgment'}
    annotator_id : int
    k : int
        The quota of a concept (``coloring`` only; other kinds read theirs from the database).

    Returns
    -------
    list of (target, fill, priority)
        Concept key, coloring id or pair id; its fill (int); and whether it is handed out
        before the others (1 for a concept of the pilot study, `annotation.pilot`; else 0).
        In target order.
    """
    return db.execute(_pool_sql(kind), {"kind": kind, "a": annotator_id, "k": k}).fetchall()


def _pool_sql(kind: str) -> str:
    """`pool_rows`' statement for `kind` (parameters ``:kind``, ``:a``, ``:k``)."""
    column = _TARGET[kind]
    done = _DONE[kind].replace(":t", "pool.t")
    done_by = _DONE_BY[kind].replace(":t", "pool.t")
    quota = _QUOTA[kind].replace(":t", "pool.t")
    return (
        f"select t, fill, priority from (select pool.t as t, pool.priority as priority, ({done}) + "
        f"(select count(*) from tasks r "
        f"where r.kind = :kind and r.practice = 0 and r.status = 'reserved' and "
        f"r.{column} = pool.t) as fill, ({quota}) as quota from ({_POOL[kind]}) pool "
        f"where not exists (select 1 from tasks m where m.kind = :kind and m.practice = 0 "
        f"and m.status = 'reserved' and m.annotator_id = :a and m.{column} = pool.t) "
        f"and ({done_by}) = 0) where fill < quota order by t"
    )


def check_submittable(
    db: sqlite_utils.Database,
    task_id: int | Task,
    annotator_id: int,
    *,
    k: int = 5,
    now: dt.datetime | None = None,
) -> None:
    """Make the checks `submit` makes, without writing anything.

    For callers with costly work before `submit` (files to write): refusing first
    leaves nothing behind. `submit` repeats the checks inside its transaction. `task_id`
    may be the `Task` the caller has just read (it is not read again).

    Raises
    ------
    NotFound, PermissionDenied, Conflict, ReservationExpired
        As `submit`.
    """
    task = (
        _task_for(db, task_id, annotator_id)
        if not isinstance(task_id, Task)
        else _held(task_id, annotator_id, db)
    )
    if not task.practice:
        _check_slot(db, task, k, utcnow() if now is None else now)


def _task_for(db, task_id: int, annotator_id: int) -> Task:
    rows = select(db, "select * from tasks where id = ?", [task_id])
    if not rows:
        raise NotFound(f"unknown task id {task_id!r}")
    return _held(Task.from_row(rows[0]), annotator_id, db)


#: What a person is told of an answer they gave already (a second click, or another tab or
#: window: one that may still show what was answered), in their role's words.
ALREADY_DONE = {
    "judgment": (
        "this trial was already answered (a second click, or another tab or window); your first "
        "answer is kept: go on with the trial shown, or press Start if none is"
    ),
    "review": (
        "you already voted on this coloring (a second click, or another tab or window); your first "
        "vote is kept: go on with the coloring shown, or press Next coloring if none is"
    ),
    "coloring": (
        "this concept was already submitted (in another tab or window, say); that coloring is kept "
        "and nothing changed: reload the page for your next concept"
    ),
}


def _held(task: Task, annotator_id: int, db) -> Task:
    if task.annotator_id != annotator_id:
        raise PermissionDenied(f"task {task.id} was handed to someone else")
    if task.status == "submitted":
        raise AlreadyDone(
            ALREADY_DONE.get(
                task.kind,
                f"task {task.id} was already submitted; your first answer is kept and nothing changed",
            )
        )
    if task.status == "released":
        if task.coloring_id is not None and _withdrawn(db, task.coloring_id):
            # Its task was given back by the withdrawal; "given back" did not say why (probe 164)
            raise Conflict(
                f"coloring {task.coloring_id} was withdrawn from the data set (its designer asked) while "
                "it was shown; nothing was stored"
            )
        if task.kind == "coloring" and task.coloring_id is None and _withdrawn_since(db, task):
            raise Conflict(
                "the study organisers withdrew your colorings from the data set (as you asked) while "
                "this concept was shown, so this one was not stored; reload the page to go on"
            )
        raise Conflict(f"task {task.id} was already given back; nothing was stored")
    return task


def _withdrawn_since(db, task: Task) -> bool:
    """Whether the holder's colorings were withdrawn after `task` was handed out, which gave
    it back (`annotation.coloring.withdrawal`)."""
    return (
        db.execute(
            "select 1 from audit where action = 'withdraw_colorings' and object_type = 'annotator' "
            "and object_id = ? and created >= ?",
            [str(task.annotator_id), task.created],
        ).fetchone()
        is not None
    )


def _withdrawn(db, coloring_id: int) -> bool:
    return db.execute("select status from colorings where id = ?", [coloring_id]).fetchone() == ("withdrawn",)


def _check_slot(db, task: Task, k: int, now: dt.datetime) -> None:
    """Raise unless `task`'s target can still take a result from its holder."""
    params = {"t": task.target, "a": task.annotator_id, "k": k}
    quota = db.execute(_QUOTA[task.kind], params).fetchone()
    if quota is None:
        raise ReservationExpired(
            f"task {task.id}: {task.kind} target {task.target!r} is closed; nothing was stored"
        )
    if db.execute(_DONE_BY[task.kind], params).fetchone()[0]:
        raise AlreadyDone(ALREADY_DONE[task.kind])  # by another of their tasks (a stale tab)
    others = db.execute(
        f"select count(*) from tasks where kind = ? and practice = 0 and status = 'reserved' "
        f"and expires > ? and {_TARGET[task.kind]} = ? and id != ?",
        [task.kind, iso(now), task.target, task.id],
    ).fetchone()[0]
    fill = db.execute(_DONE[task.kind], params).fetchone()[0] + others
    if fill >= quota[0]:
        if task.status == "reserved" and task.expires > iso(now):
            raise QuotaExceeded(
                f"task {task.id}: {task.kind} {task.target!r} already has its "
                f"{quota[0]} results; nothing was stored"
            )
        raise ReservationExpired(
            f"task {task.id}: your reservation ran out at "
            f"{task.expires[:16]} UTC and {task.kind} {task.target!r} "
            "was given to someone else; nothing was stored"
        )


def _check_annotator(db, annotator_id: int, role: str) -> None:
    rows = select(db, "select * from annotators where id = ?", [annotator_id])
    if not rows:
        raise NotFound(f"unknown annotator id {annotator_id!r}")
    if rows[0]["status"] != "active" or f'"{role}"' not in rows[0]["roles"]:
        raise PermissionDenied(f"annotator {rows[0]['pseudonym']} is not an active {role}")


def _check_kind(kind: str) -> None:
    if kind not in _TARGET:
        raise InvalidInput(f"`kind` must be one of {tuple(_TARGET)}, got {shown(kind)}")


def _check_reserve(kind: str, batch_size: int, k: int, minutes: float) -> None:
    _check_kind(kind)
    for name, value in (("batch_size", batch_size), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"`{name}` must be a whole number >= 1, got {shown(value)}")
    if not isinstance(minutes, (int, float)) or not minutes > 0:
        raise InvalidInput(f"`minutes` must be a positive number, got {shown(minutes)}")
