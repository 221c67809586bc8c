"""Every table of the project, as one ordered list of forward migrations.

Each migration is a function ``(db) -> None`` that moves the schema one version up;
`ensure_schema` applies the ones a database has not seen yet, in order, in one
transaction each. Never edit a migration that has shipped: append a new one. The
annotation tables came first (versions 1-3); the evaluation run tables, which earlier
code created on their own when missing, are adopted by version 4 and from then on live
here too.

Conventions
-----------
- Timestamps are UTC text from `storage.db.iso` (``2025-01-31T12:00:00.000000Z``),
  so text order is time order; version 4 rewrote the run tables' older
  ``2025-01-31T12:00:00+00:00`` values to this form.
- Distributions are JSON text in a column named ``p`` (`storage.distributions`).
- Role lists and other small structures are JSON text.
- A handed-out unit of work is a ``tasks`` row (kind ``coloring``, ``review`` or
  ``judgment``); when it is submitted, ``tasks.result_id`` names the row it produced
  (a coloring, QC vote or judgment id, by kind).
- Nothing is deleted by the app: rows change ``status`` and an ``audit`` row says who,
  when and why.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import logging
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from storage import serving
from storage.db import create_private, db_path, file_stamp, iso, transaction, unused_path

log = logging.getLogger(__name__)

COLORING_STATUSES = ("submitted", "accepted", "recolor_requested", "excluded", "withdrawn")
TASK_KINDS = ("coloring", "review", "judgment")
TASK_STATUSES = ("reserved", "submitted", "expired", "released")
ANNOTATOR_STATUSES = ("active", "revoked")

# (table, columns, pk, not_null, foreign keys, defaults) in creation order.
_TABLES_V1: list[tuple[str, dict, str, set, list, dict]] = [
    ("settings", {"key": str, "value": str}, "key", {"value"}, [], {}),
    (
        "concepts",
        {"key": str, "base": str, "base_id": int, "category": str, "modifier_type": str, "modifier": str},
        "key",
        {"base", "base_id", "category", "modifier_type", "modifier"},
        [],
        {},
    ),
    (
        "sketches",
        {
            "id": int,
            "base": str,
            "path": str,
            "sha256": str,
            "source": str,
            "selected": int,
            "width": int,
            "height": int,
            "meta": str,
            "created": str,
        },
        "id",
        {"base", "path", "sha256", "source", "selected", "created"},
        [("base", "concepts", "key")],
        {"selected": 0, "meta": "{}"},
    ),
    (
        "annotators",
        {
            "id": int,
            "pseudonym": str,
            "roles": str,
            "design_background": int,
            "status": str,
            "created": str,
            "created_by": str,
            "instructions_read": str,
            "practice_approved": str,
            "practice_approved_by": str,
        },
        "id",
        {"pseudonym", "roles", "status", "created"},
        [],
        {"status": "active"},
    ),
    (
        "invites",
        {
            "token_hash": str,
            "annotator_id": int,
            "role": str,
            "created": str,
            "expires": str,
            "first_used": str,
            "last_used": str,
            "uses": int,
            "revoked": str,
        },
        "token_hash",
        {"annotator_id", "role", "created", "expires", "uses"},
        [("annotator_id", "annotators", "id")],
        {"uses": 0},
    ),
    (
        "sessions",
        {
            "token_hash": str,
            "annotator_id": int,
            "roles": str,
            "created": str,
            "expires": str,
            "last_seen": str,
            "revoked": str,
        },
        "token_hash",
        {"roles", "created", "expires"},
        [("annotator_id", "annotators", "id")],
        {},
    ),
    (
        "consents",
        {"id": int, "annotator_id": int, "form_sha256": str, "agreed": int, "created": str},
        "id",
        {"annotator_id", "form_sha256", "agreed", "created"},
        [("annotator_id", "annotators", "id")],
        {},
    ),
    (
        "studies",
        {"id": int, "name": str, "votes_per_pair": int, "frozen": str, "meta": str, "created": str},
        "id",
        {"name", "votes_per_pair", "created"},
        [],
        {"votes_per_pair": 6, "meta": "{}"},
    ),
    (
        "study_pairs",
        {"id": int, "study_id": int, "concept_key": str, "a": str, "b": str, "meta": str},
        "id",
        {"study_id", "concept_key", "a", "b"},
        [("study_id", "studies", "id"), ("concept_key", "concepts", "key")],
        {"meta": "{}"},
    ),
    (
        "colorings",
        {
            "id": int,
            "annotator_id": int,
            "concept_key": str,
            "sketch_id": int,
            "image_path": str,
            "image_sha256": str,
            "mask_path": str,
            "mask_sha256": str,
            "practice": int,
            "round": int,
            "status": str,
            "seconds_spent": float,
            "created": str,
        },
        "id",
        {
            "annotator_id",
            "concept_key",
            "image_path",
            "image_sha256",
            "practice",
            "round",
            "status",
            "created",
        },
        [
            ("annotator_id", "annotators", "id"),
            ("concept_key", "concepts", "key"),
            ("sketch_id", "sketches", "id"),
        ],
        {"practice": 0, "round": 1, "status": "submitted"},
    ),
    (
        "coloring_distributions",
        {"coloring_id": int, "p": str, "method": str, "created": str},
        "coloring_id",
        {"p", "created"},
        [("coloring_id", "colorings", "id")],
        {},
    ),
    (
        "reviews",
        {"coloring_id": int, "reason": str, "votes_needed": int, "status": str, "created": str},
        "coloring_id",
        {"votes_needed", "status", "created"},
        [("coloring_id", "colorings", "id")],
        {"votes_needed": 3, "status": "open"},
    ),
    (
        "qc_votes",
        {"id": int, "coloring_id": int, "expert_id": int, "vote": str, "comment": str, "created": str},
        "id",
        {"coloring_id", "expert_id", "vote", "created"},
        [("coloring_id", "colorings", "id"), ("expert_id", "annotators", "id")],
        {},
    ),
    (
        "judgments",
        {
            "id": int,
            "pair_id": int,
            "participant_id": int,
            "left_item": str,
            "choice": str,
            "winner": str,
            "seconds_spent": float,
            "created": str,
        },
        "id",
        {"pair_id", "participant_id", "left_item", "choice", "winner", "created"},
        [("pair_id", "study_pairs", "id"), ("participant_id", "annotators", "id")],
        {},
    ),
    (
        "tasks",
        {
            "id": int,
            "kind": str,
            "annotator_id": int,
            "concept_key": str,
            "coloring_id": int,
            "pair_id": int,
            "left_item": str,
            "practice": int,
            "status": str,
            "created": str,
            "expires": str,
            "finished": str,
            "result_id": int,
        },
        "id",
        {"kind", "annotator_id", "practice", "status", "created", "expires"},
        [
            ("annotator_id", "annotators", "id"),
            ("concept_key", "concepts", "key"),
            ("coloring_id", "colorings", "id"),
            ("pair_id", "study_pairs", "id"),
        ],
        {"practice": 0, "status": "reserved"},
    ),
    (
        "audit",
        {
            "id": int,
            "created": str,
            "actor": str,
            "action": str,
            "object_type": str,
            "object_id": str,
            "why": str,
            "details": str,
        },
        "id",
        {"created", "actor", "action"},
        [],
        {"details": "{}"},
    ),
]

_INDEXES_V1: list[tuple[str, list[str], bool]] = [
    ("annotators", ["pseudonym"], True),
    ("sketches", ["base"], False),
    ("invites", ["annotator_id"], False),
    ("consents", ["annotator_id"], False),
    ("studies", ["name"], True),
    ("study_pairs", ["study_id", "concept_key", "a", "b"], True),
    ("tasks", ["kind", "status", "expires"], False),
    ("tasks", ["annotator_id", "kind", "status"], False),
    ("colorings", ["concept_key", "practice", "status"], False),
    ("colorings", ["annotator_id", "practice"], False),
    ("qc_votes", ["coloring_id", "expert_id"], True),
    ("judgments", ["pair_id", "participant_id"], True),
    ("audit", ["object_type", "object_id"], False),
]


def _v1_initial(db: sqlite_utils.Database) -> None:
    for name, columns, pk, not_null, fks, defaults in _TABLES_V1:
        db[name].create(columns, pk=pk, not_null=not_null, foreign_keys=fks, defaults=defaults)
    for table, columns, unique in _INDEXES_V1:
        db[table].create_index(columns, unique=unique)


def _v2_review_plausibility(db: sqlite_utils.Database) -> None:
    # The SCD plausibility of a coloring under review, which orders the expert queue.
    db["reviews"].add_column("plausibility", float)


_STUDY_CONTENT_TABLES: list[tuple[str, dict, tuple, set, list]] = [
    (
        "study_ground_truths",
        {
            "study_id": int,
            "concept_key": str,
            "p": str,
            "n_colorings": int,
            "dominant": str,
            "colorings": str,
            "source": str,
        },
        ("study_id", "concept_key"),
        {"p", "n_colorings", "dominant", "colorings", "source"},
        [("study_id", "studies", "id"), ("concept_key", "concepts", "key")],
    ),
    (
        "study_candidates",
        {
            "study_id": int,
            "concept_key": str,
            "model": str,
            "p": str,
            "n_images": int,
            "images": str,
            "source": str,
        },
        ("study_id", "concept_key", "model"),
        {"p", "n_images", "images", "source"},
        [("study_id", "studies", "id"), ("concept_key", "concepts", "key")],
    ),
]
_FROZEN_MESSAGE = "this study is open (frozen): its design can no longer change"


def _v3_study_content(db: sqlite_utils.Database) -> None:
    """What a study's trials show, copied when it is set up, and the freeze rule.

    ``study_ground_truths`` holds P_H per concept with its dominant colors and the
    colorings shown; ``study_candidates`` each model's P_M and images. Triggers refuse
    any change to a study whose ``frozen`` is set, and to its pairs and content.
    """
    for name, columns, pk, not_null, fks in _STUDY_CONTENT_TABLES:
        db[name].create(columns, pk=pk, not_null=not_null, foreign_keys=fks)
    db.execute(
        f"create trigger studies_frozen_update before update on studies "
        f"when old.frozen is not null begin select raise(abort, "
        f"'{_FROZEN_MESSAGE}'); end"
    )
    db.execute(
        f"create trigger studies_frozen_delete before delete on studies "
        f"when old.frozen is not null begin select raise(abort, "
        f"'{_FROZEN_MESSAGE}'); end"
    )
    for table in ("study_pairs", "study_ground_truths", "study_candidates"):
        for event, row in (("insert", "new"), ("update", "old"), ("delete", "old")):
            db.execute(
                f"create trigger {table}_frozen_{event} before {event} on {table} "
                f"when (select frozen from studies where id = {row}.study_id) "
                f"is not null begin select raise(abort, '{_FROZEN_MESSAGE}'); end"
            )


_RUN_TABLES: list[tuple[str, dict, object, set, list]] = [
    ("runs", {"name": str, "created_at": str, "config": str}, "name", set(), []),
    (
        "run_items",
        {
            "id": int,
            "run": str,
            "model": str,
            "concept": str,
            "noun": str,
            "style": str,
            "cfg": float,
            "sample": int,
            "seed": int,
            "prompt": str,
            "status": str,
            "image_path": str,
            "image_sha256": str,
            "mask_path": str,
            "mask_sha256": str,
            "summary_path": str,
            "detected": int,
            "segment_status": str,
            "n_pixels": int,
            "gen_seconds": float,
            "seg_seconds": float,
            "error": str,
            "updated_at": str,
        },
        "id",
        {"run", "model", "concept", "style", "cfg", "sample", "seed", "status"},
        [("run", "runs", "name")],
    ),
    (
        "model_distributions",
        {
            "run": str,
            "model": str,
            "concept": str,
            "style": str,
            "cfg": float,
            "p": str,
            "n_images": int,
            "n_excluded": int,
            "groups": str,
            "created_at": str,
        },
        ("run", "model", "concept", "style", "cfg"),
        set(),
        [("run", "runs", "name")],
    ),
]
_RUN_TIMESTAMPS = (("runs", "created_at"), ("run_items", "updated_at"), ("model_distributions", "created_at"))


def _v4_run_tables(db: sqlite_utils.Database) -> None:
    """Adopt the evaluation run tables (created if missing; kept as they are if not).

    Their timestamps, written before as ``2025-01-31T12:00:00+00:00``, are rewritten in
    the one format of `storage.db.iso` (same instant, text order still time order).
    """
    for name, columns, pk, not_null, fks in _RUN_TABLES:
        db[name].create(columns, pk=pk, not_null=not_null, foreign_keys=fks, if_not_exists=True)
    db["run_items"].create_index(
        ["run", "model", "concept", "style", "cfg", "sample"], unique=True, if_not_exists=True
    )
    db["run_items"].create_index(["run", "status"], if_not_exists=True)
    for table, column in _RUN_TIMESTAMPS:
        db.execute(
            f"update {table} set {column} = substr({column}, 1, 19) || '.000000Z' "
            f"where {column} like '____-__-__T__:__:__+00:00'"
        )


def _v5_human_distributions(db: sqlite_utils.Database) -> None:
    """Stored human distributions P_H per (source, concept), and each coloring's pixels.

    ``human_distributions`` replaces ``reference_distributions`` (its rows are copied,
    source ``kind`` ``reference``) and adds the designers' P_H (``kind`` ``designers``),
    which `annotation.coloring.ground_truth` keeps current in the transaction of every change to a
    concept's counted colorings. ``coloring_samples`` holds each coloring's sampled
    painted pixels (the extraction's step 1), so P_H is recomputed without decoding PNGs.
    """
    db["human_distributions"].create(
        {
            "source": str,
            "concept_key": str,
            "kind": str,
            "p": str,
            "n_colorings": int,
            "colorings": str,
            "groups": str,
            "provenance": str,
            "updated": str,
        },
        pk=("source", "concept_key"),
        not_null={"kind", "p", "updated"},
        defaults={"colorings": "[]", "groups": "[]", "provenance": ""},
    )
    db["human_distributions"].create_index(["concept_key"])
    db["coloring_samples"].create(
        {"coloring_id": int, "n_pixels": int, "pixels": bytes},
        pk="coloring_id",
        not_null={"n_pixels", "pixels"},
        foreign_keys=[("coloring_id", "colorings", "id")],
    )
    if db["reference_distributions"].exists():
        db.execute(
            "insert into human_distributions (source, concept_key, kind, p, n_colorings, "
            "colorings, groups, provenance, updated) select source, concept, 'reference', p, "
            "null, '[]', '[]', provenance, case when created_at like '%+00:00' then "
            "substr(created_at, 1, 19) || '.000000Z' else created_at end "
            "from reference_distributions"
        )
        db["reference_distributions"].drop()


def _v6_scores(db: sqlite_utils.Database) -> None:
    """Per-concept metrics of each stored model distribution against each human source.

    A row is valid while the two distributions it was computed from are unchanged: it
    records the model row's ``created_at`` and the human row's ``updated`` and is ignored
    (and recomputed) once either differs (`evaluation.pipeline.scoring.stored_scores`).
    """
    db["scores"].create(
        {
            "source": str,
            "run": str,
            "model": str,
            "concept": str,
            "style": str,
            "cfg": float,
            "pcc": float,
            "emd": float,
            "ed": float,
            "dominant_human": int,
            "dominant_model": int,
            "hue_diff": float,
            "model_created": str,
            "human_updated": str,
        },
        pk=("source", "run", "model", "concept", "style", "cfg"),
        not_null={"emd", "ed", "dominant_human", "dominant_model", "model_created", "human_updated"},
    )


def _v7_audit_action_index(db: sqlite_utils.Database) -> None:
    """Failed sign-ins per address are counted from the audit trail on every attempt."""
    db["audit"].create_index(["action", "object_id", "created"], if_not_exists=True)


def _v8_batches(db: sqlite_utils.Database) -> None:
    """A designer's batch has a size of its own: only a few of its tasks are reserved at a
    time and topped up as they are done (`annotation.coloring.tasks.top_up`), so the size
    cannot be read from the reserved rows any more. Batches from before keep no row: their
    size is what was reserved for them."""
    db["batches"].create(
        {"annotator_id": int, "created": str, "size": int},
        pk=("annotator_id", "created"),
        not_null={"size"},
        foreign_keys=[("annotator_id", "annotators", "id")],
    )


def _v9_explicit_color(db: sqlite_utils.Database) -> None:
    """The explicit-color mode (issue 17, GenColorBench): a run's prompts, and one verdict per
    (image, object, scoring rule set). ``objects`` and ``targets`` are JSON arrays of the
    prompt's scored objects and their target color names; an object that failed the presence
    check or masking has a row with ``present`` 0 or a ``segment_status`` other than ``ok`` and
    no metrics (counted, not scored). Written by `evaluation.pipeline.runs`."""
    db["explicit_prompts"].create(
        {
            "run": str,
            "prompt_id": str,
            "task": str,
            "level": int,
            "system": str,
            "template": int,
            "text": str,
            "objects": str,
            "targets": str,
            "notation": str,
            "category": str,
        },
        pk=("run", "prompt_id"),
        not_null={"task", "level", "system", "text", "objects", "targets", "notation", "category"},
        foreign_keys=[("run", "runs", "name")],
    )
    db["explicit_results"].create(
        {
            "item_id": int,
            "object_index": int,
            "scoring": str,
            "run": str,
            "object": str,
            "target": str,
            "present": int,
            "presence_score": float,
            "presence_answer": str,
            "segment_status": str,
            "mask_path": str,
            "mask_sha256": str,
            "n_pixels": int,
            "dominant_l": float,
            "dominant_a": float,
            "dominant_b": float,
            "achromatic": int,
            "delta_chroma": float,
            "delta_e00": float,
            "hue_error": float,
            "chroma_pass": int,
            "e00_pass": int,
            "hue_pass": int,
            "correct": int,
            "created_at": str,
        },
        pk=("item_id", "object_index", "scoring"),
        not_null={"run", "object", "target", "present", "created_at"},
        foreign_keys=[("item_id", "run_items", "id"), ("run", "runs", "name")],
    )
    db["explicit_results"].create_index(["run", "scoring"])


DISTRIBUTIONS_CHANGED = "distributions"
"""The `change_counters` row that every insert, update or delete of a model or human
distribution bumps (`storage.schema.change_count`)."""


def _v10_change_counters(db: sqlite_utils.Database) -> None:
    """Research views keep what they computed until a distribution changes: triggers bump a
    counter on every change to a model or human distribution, whichever process (the app,
    the CLI) writes it, so a cached result is never served after its inputs changed.

    Also an index for the latest round of a designer's coloring of a concept (the counting
    rule's subquery, `storage.human.counted_colorings`): without it every counted coloring
    scanned all of its designer's colorings, 4.1 s instead of 0.08 s at the full study's size.
    """
    db["colorings"].create_index(["annotator_id", "concept_key", "practice", "round"], if_not_exists=True)
    db["change_counters"].create({"name": str, "n": int}, pk="name", not_null={"n"})
    db["change_counters"].insert({"name": DISTRIBUTIONS_CHANGED, "n": 0})
    for table in ("model_distributions", "human_distributions"):
        for event in ("insert", "update", "delete"):
            db.execute(
                f"create trigger bump_{table}_{event} after {event} on {table} begin "
                f"update change_counters set n = n + 1 where name = '{DISTRIBUTIONS_CHANGED}'; end"
            )


def _v11_reservations_by_target_indexes(db: sqlite_utils.Database) -> None:
    """The open pool counts each target's live reservations (`annotation.assignment.pool_rows`),
    inside the write transaction of every submission (the next task is reserved there):
    without an index by target each count scanned every reservation of the kind, 30 ms per
    submission at the full study's 1,278 concepts instead of 3 ms."""
    for target in ("concept_key", "coloring_id", "pair_id"):
        db["tasks"].create_index([target, "kind", "status"], if_not_exists=True)


def _v12_session_invites(db: sqlite_utils.Database) -> None:
    """A session records the invite that opened it (``invite_hash``, the invite's
    ``token_hash``; null for the admin's) and why it was ended (``end_reason``, with
    ``revoked`` its time): a new link or a revoke ends the sessions of the earlier links, and
    a person's oldest live session ends when one more opens than they may hold
    (`annotation.people.accounts`). Sessions opened before keep both null. The index finds
    a person's live sessions."""
    db["sessions"].add_column("invite_hash", str)
    db["sessions"].add_column("end_reason", str)
    db["sessions"].create_index(["annotator_id", "revoked"], if_not_exists=True)


def _v13_pilot_concepts(db: sqlite_utils.Database) -> None:
    """The pilot study's concepts (`annotation.pilot`): while any are stored, designers are
    handed these first (`annotation.assignment.pool_rows` looks each concept up here by its
    key, the primary key, inside every reservation). ``added`` is when it joined the pilot."""
    db["pilot_concepts"].create(
        {"concept_key": str, "added": str},
        pk="concept_key",
        not_null={"added"},
        foreign_keys=[("concept_key", "concepts", "key")],
    )


def _v14_crowd_links(db: sqlite_utils.Database) -> None:
    """Open study links for crowd platforms (`annotation.study.crowd`).

    ``crowd_links``: one open link of a frozen study; only the sha256 of its token is kept
    (``token_hash``). ``quota`` places, ``minutes`` per person, open until ``ends`` unless
    ``closed``; the researcher's ``completion_code`` and ``screenout_code``, the query
    parameter that carries the platform's participant id (``id_param``, e.g.
    ``PROLIFIC_PID``), the ``return_url`` with ``{code}`` where the code goes,
    ``max_failed_checks`` (attention checks a person may fail before being screened out)
    and ``joins_per_address`` (new people per client address per hour).

    ``crowd_participants``: the participant account a link made for one external id
    (unique per link: a second visit resumes), the platform's study and session ids,
    ``started``/``finished`` and ``status`` (`annotation.study.crowd.STATUSES`: active,
    completed, screened_out, timed_out, returned, account_closed, may_restart, study_closed)
    with the ``address`` that joined (for the per-address limit)."""
    db["crowd_links"].create(
        {
            "id": int,
            "token_hash": str,
            "study_id": int,
            "label": str,
            "quota": int,
            "minutes": float,
            "ends": str,
            "closed": str,
            "completion_code": str,
            "screenout_code": str,
            "id_param": str,
            "return_url": str,
            "max_failed_checks": int,
            "joins_per_address": int,
            "created": str,
            "created_by": str,
        },
        pk="id",
        not_null={
            "token_hash",
            "study_id",
            "quota",
            "minutes",
            "ends",
            "completion_code",
            "screenout_code",
            "id_param",
            "return_url",
            "max_failed_checks",
            "joins_per_address",
            "created",
        },
        foreign_keys=[("study_id", "studies", "id")],
    )
    db["crowd_links"].create_index(["token_hash"], unique=True)
    db["crowd_participants"].create(
        {
            "annotator_id": int,
            "link_id": int,
            "external_id": str,
            "platform_study_id": str,
            "platform_session_id": str,
            "address": str,
            "started": str,
            "finished": str,
            "status": str,
        },
        pk="annotator_id",
        not_null={"link_id", "external_id", "started", "status"},
        foreign_keys=[("annotator_id", "annotators", "id"), ("link_id", "crowd_links", "id")],
    )
    db["crowd_participants"].create_index(["link_id", "external_id"], unique=True)
    db["crowd_participants"].create_index(["address", "started"])


def _v15_crowd_consent(db: sqlite_utils.Database) -> None:
    """Consent of crowd participants (`annotation.study.crowd.consent`): the consent text
    a researcher sets with an open link (``crowd_links.consent_text``; null: the default
    text) and when a person agreed to it (``crowd_participants.consented``, UTC; null until
    they agree). People who joined before this version have not consented: they see the
    consent screen before their next trial."""
    db["crowd_links"].add_column("consent_text", str)
    db["crowd_participants"].add_column("consented", str)


def _v16_run_masking(db: sqlite_utils.Database) -> None:
    """How a run's images are masked (``runs.masking``, JSON: detector, SAM, thresholds;
    `evaluation.pipeline.runs.claim_masking`): null until a masking is given for the run."""
    db["runs"].add_column("masking", str)


def _v17_run_jobs(db: sqlite_utils.Database) -> None:
    """Which process runs a job on a run (``runs.job_owner``, ``host:pid``) and when it last
    said so (``runs.job_heartbeat``, UTC; `evaluation.pipeline.runs.claim_job`): null while
    no job runs. Two processes on one database then neither show the other's job as stopped
    nor start a second one on the same run."""
    db["runs"].add_column("job_owner", str)
    db["runs"].add_column("job_heartbeat", str)


UPGRADE_APPROVER = "upgrade"
"""Who the practice approvals that `_v18_recorded_approvals` records are by, and the actor of
the audit rows of later data upgrades (`_v19_closed_study_link_people`)."""


def _v18_recorded_approvals(db: sqlite_utils.Database) -> None:
    """Designers at work on the main task whose approval was never stored: until version 17,
    ``--auto-approve-practice`` opened the main task without recording an approval, so a
    start of newer code without the flag sent them back to "waiting for approval". A designer
    with a main-task coloring task of their own is recorded as approved when the first was
    handed out, by `UPGRADE_APPROVER`, with an audit row; not one whose practice an admin sent
    back to be redone after that (``redo_practice``)."""
    rows = db.execute(
        "select a.id, min(t.created) from annotators a join tasks t on t.annotator_id = a.id "
        "where a.practice_approved is null and t.kind = 'coloring' and t.practice = 0 group by a.id"
    ).fetchall()
    for annotator_id, first in rows:
        redone = db.execute(
            "select 1 from audit where action = 'redo_practice' and object_type = 'annotator' "
            "and object_id = ? and created >= ?",
            [str(annotator_id), first],
        ).fetchone()
        if redone:
            continue
        db.execute(
            "update annotators set practice_approved = ?, practice_approved_by = ? where id = ?",
            [first, UPGRADE_APPROVER, annotator_id],
        )
        db.execute(
            "insert into audit (created, actor, action, object_type, object_id, why, details) "
            "values (?, ?, 'approve_practice', 'annotator', ?, ?, '{}')",
            [
                iso(),
                UPGRADE_APPROVER,
                str(annotator_id),
                "recorded at the upgrade to schema 18: at work on the main task since "
                f"{first}, before approvals were recorded",
            ],
        )


def _v19_closed_study_link_people(db: sqlite_utils.Database) -> None:
    """End the link people a study's closing left judging, as closing does since version 19.

    Code before version 19 left them ``active`` when their study closed: their minutes ran
    on in the payments, and at their deadline they read as ``timed_out`` (outside probe 138).
    The upgrade gives those still ``active``, and those marked ``timed_out`` after the study
    closed, what `annotation.study.design.close_study` now does: status ``study_closed``,
    finished at the study's closing time (at their start, for anyone who joined after it),
    and an audit row per study by `UPGRADE_APPROVER`.
    """
    row = db.execute("select value from settings where key = 'closed_studies'").fetchone()
    for study_id, entry in sorted(json.loads(row[0]).items() if row else []):
        where = (
            "link_id in (select id from crowd_links where study_id = :study) and (status = 'active' "
            "or (status = 'timed_out' and finished > :closed))"
        )
        params = {"study": int(study_id), "closed": entry["closed"]}
        ended = db.execute(f"select count(*) from crowd_participants where {where}", params).fetchone()[0]
        if not ended:
            continue
        db.execute(
            "update crowd_participants set status = 'study_closed', finished = max(started, :closed) "
            f"where {where}",
            params,
        )
        db.execute(
            "insert into audit (created, actor, action, object_type, object_id, why, details) "
            "values (?, ?, 'end_link_people', 'study', ?, ?, ?)",
            [
                iso(),
                UPGRADE_APPROVER,
                study_id,
                f"recorded at the upgrade to schema 19: the study closed on {entry['closed']}",
                json.dumps({"ended_link_people": ended}),
            ],
        )


def _v20_shown_review_tasks(db: sqlite_utils.Database) -> None:
    """``tasks.shown``: when a review task was first shown to its expert
    (`annotation.qc.votes.vote_queue`); a vote takes only a shown one. Review tasks held at
    the upgrade count as shown, so an expert's coloring on screen still takes its vote."""
    db["tasks"].add_column("shown", str)
    db.execute("update tasks set shown = created where kind = 'review' and status = 'reserved'")


def change_count(db: sqlite_utils.Database, name: str = DISTRIBUTIONS_CHANGED) -> int:
    """How many changes the triggers of `_v10_change_counters` have counted (a cache key)."""
    row = db.execute("select n from change_counters where name = ?", [name]).fetchone()
    if row is None:
        raise ValueError(f"no change counter named {name!r}")
    return int(row[0])


# Ordered forward migrations: version i+1 is MIGRATIONS[i].
MIGRATIONS: tuple[tuple[str, Callable[[sqlite_utils.Database], None]], ...] = (
    ("initial tables", _v1_initial),
    ("review plausibility", _v2_review_plausibility),
    ("study content and freeze triggers", _v3_study_content),
    ("evaluation run tables, one timestamp format", _v4_run_tables),
    ("stored human distributions and coloring samples", _v5_human_distributions),
    ("stored scores", _v6_scores),
    ("audit index for sign-in throttling", _v7_audit_action_index),
    ("batch sizes: reserve a few tasks ahead", _v8_batches),
    ("explicit-color prompts and verdicts", _v9_explicit_color),
    ("change counters for cached research views; coloring rounds index", _v10_change_counters),
    ("reservations by target indexes", _v11_reservations_by_target_indexes),
    ("sessions record their invite and why they ended", _v12_session_invites),
    ("pilot study concepts", _v13_pilot_concepts),
    ("open study links for crowd platforms", _v14_crowd_links),
    ("consent of crowd participants", _v15_crowd_consent),
    ("the masking of each run", _v16_run_masking),
    ("which process runs a job on each run", _v17_run_jobs),
    ("practice approvals of designers at work before approvals were recorded", _v18_recorded_approvals),
    ("link people still judging in a study closed before closing ended them", _v19_closed_study_link_people),
    ("when a review task was shown to its expert", _v20_shown_review_tasks),
)


class SchemaRefused(RuntimeError):
    """The database cannot be brought to this code's schema; the message says why."""


class SchemaTooNew(SchemaRefused):
    """The database was written by a newer version of this code."""


class CopyBeforeUpgradeFailed(SchemaRefused):
    """The copy kept before a migration could not be written; nothing was migrated."""


class MigrationFailed(SchemaRefused):
    """A migration failed on the database or its disk (a full disk); nothing was migrated."""


class MigrationRefused(SchemaRefused):
    """Another process (the earlier code, most likely) uses the database this code would
    migrate; nothing was migrated."""


def schema_version(db: sqlite_utils.Database) -> int:
    """The number of migrations applied to `db` (0 for an empty database)."""
    if not db["schema_version"].exists():
        return 0
    return db.execute("select coalesce(max(version), 0) from schema_version").fetchone()[0]


def tables_at(version: int) -> frozenset[str]:
    """The names of the tables a database has at schema `version` (1 to ``len(MIGRATIONS)``),
    from `shape_at` (the first `version` migrations applied to an empty database in memory)."""
    return frozenset(name for kind, name in shape_at(version) if kind == "table")


_SQLITE_TABLES = frozenset({"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"})
"""Tables SQLite makes itself (AUTOINCREMENT, ANALYZE): no part of the app's schema."""
_QUOTED = re.compile(r""""(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`|'(?:[^']|'')*'""")
_CONSTRAINT_WORDS = re.compile(r"\b(CHECK|COLLATE)\b", re.IGNORECASE)


def constraint_words(sql: str | None) -> tuple[str, ...]:
    """The words of a table's SQL that no pragma reports, ``CHECK`` and ``COLLATE``, that
    stand outside quoted names and strings (sorted, upper case): a CHECK constraint a backup
    brought refused every write to its table (outside probe 118), a collation changes what
    is equal."""
    return tuple(sorted({w.upper() for w in _CONSTRAINT_WORDS.findall(_QUOTED.sub(" ", sql or ""))}))


def schema_shape(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple]:
    """What the schema of the database on `conn` is made of, by ``(type, name)``.

    A table is its columns (``pragma table_xinfo``: name, declared type, not null,
    default, primary-key rank, hidden; by name), foreign keys and `constraint_words`
    (whether its SQL has a CHECK or a COLLATE, which no pragma tells); an index its table,
    uniqueness, origin, whether partial, and columns (``pragma index_xinfo``); a trigger or
    view its SQL with white space runs made one space. Tables and indexes are compared by
    what SQLite reads from them, not their SQL text, which sqlite-utils words differently
    from release to release (the app's tables have no CHECK or COLLATE clause: one in a
    table is a difference whatever it says).
    SQLite's own tables (`_SQLITE_TABLES`) are left out.
    """
    shape: dict[tuple[str, str], tuple] = {}
    for kind, name, table, sql in conn.execute("select type, name, tbl_name, sql from sqlite_master"):
        if kind == "table" and name not in _SQLITE_TABLES:
            columns = sorted(
                tuple(r[1:]) for r in conn.execute("select * from pragma_table_xinfo(?)", [name])
            )
            keys = sorted(
                tuple(r[2:]) for r in conn.execute("select * from pragma_foreign_key_list(?)", [name])
            )
            shape[kind, name] = (tuple(columns), tuple(keys), constraint_words(sql))
        elif kind == "index":
            [listed] = [
                r[1:] for r in conn.execute("select * from pragma_index_list(?)", [table]) if r[1] == name
            ]
            columns = tuple(tuple(r[1:]) for r in conn.execute("select * from pragma_index_xinfo(?)", [name]))
            shape[kind, name] = (table, *listed[1:], columns)
        elif kind in ("trigger", "view"):
            shape[kind, name] = (table, " ".join((sql or "").split()))
    return shape


@functools.cache
def shape_at(version: int) -> dict[tuple[str, str], tuple]:
    """`schema_shape` of a database at schema `version` (1 to ``len(MIGRATIONS)``), found by
    applying the first `version` migrations to an empty database in memory."""
    if not 1 <= version <= len(MIGRATIONS):
        raise ValueError(f"`version` must be from 1 to {len(MIGRATIONS)}, got {version}")
    db = sqlite_utils.Database(memory=True)
    try:
        with transaction(db):
            db["schema_version"].create({"version": int, "name": str, "applied": str}, pk="version")
            for _, migrate in MIGRATIONS[:version]:
                migrate(db)
        return schema_shape(db.conn)
    finally:
        db.close()


def ensure_schema(db: sqlite_utils.Database) -> int:
    """Bring `db` to the current schema; safe to call any number of times.

    Applies, in order and all in one transaction, the `MIGRATIONS` that `db` has not seen,
    recording each in the ``schema_version`` table: a migration that fails (a full disk)
    leaves the database at its version. Before it migrates a database of an earlier version
    it keeps a copy of it as it was (`_keep_before_upgrade`), removed if nothing migrated.
    It migrates such a database only while no other process holds its lock
    (`storage.serving.alone`): an app or a command of the earlier code still at work on it
    would go on writing rows the new schema reads otherwise.

    Returns
    -------
    int
        The schema version after the call.

    Raises
    ------
    SchemaTooNew
        If `db` records more migrations than this code knows.
    CopyBeforeUpgradeFailed
        If the copy before a migration cannot be written (a full disk); nothing is migrated.
    MigrationFailed
        If a migration of a database of an earlier version fails on SQLite or its disk (a
        full disk); nothing is migrated.
    MigrationRefused
        If another process holds the lock of a database of an earlier version; nothing is
        migrated.
    """
    with transaction(db):
        db["schema_version"].create(
            {"version": int, "name": str, "applied": str}, pk="version", if_not_exists=True
        )
    version = schema_version(db)
    if version > len(MIGRATIONS):
        raise SchemaTooNew(
            f"database schema version {version} is newer than this code's "
            f"{len(MIGRATIONS)}; update the code before opening it{_kept_copy(db_path(db))}"
        )
    path = db_path(db)
    if not (0 < version < len(MIGRATIONS)) or not path:
        _migrate(db, version)
        return schema_version(db)
    try:
        with serving.alone(path):
            version = schema_version(db)  # another process may have migrated it meanwhile
            _migrate(db, version)
    except serving.DatabaseInUse as error:
        raise MigrationRefused(
            f"the database {path!r} is at schema version {version} and this code would migrate it to "
            f"{len(MIGRATIONS)}, but {error.holders} uses it (the earlier code, if it was not stopped): "
            "stop every app and evaluation command on this database, then start again; nothing was "
            "migrated"
        ) from None
    return schema_version(db)


def copy_before_upgrade(path: str | Path, version: int | None = None) -> Path | None:
    """The newest copy an upgrade kept of the database at `path` (`_keep_before_upgrade`),
    of the one to schema `version` when given; None where none is beside it."""
    path = Path(path)
    to = "*" if version is None else f"{version}-*"
    copies = [
        c
        for c in path.parent.glob(f"{glob.escape(path.name)}.before-schema-{to}")
        if not c.name.endswith(("-wal", "-shm", "-journal"))
    ]
    return max(copies, key=lambda c: c.stat().st_mtime, default=None)


def _kept_copy(path: str | None) -> str:
    """The way back to this code's schema, where a newer code's start left one beside the
    database at `path` (`_keep_before_upgrade`): "" where none is there."""
    copy = copy_before_upgrade(path) if path else None
    if copy is None:
        return ""
    return (
        f", or go back to the database as it was before that upgrade, kept as {copy.name} beside it "
        "(README, Upgrading: what was stored since is not in it)"
    )


def _migrate(db: sqlite_utils.Database, version: int) -> None:
    """Apply the migrations after `version` in one transaction (`ensure_schema`), keeping a
    copy first when `version` is an earlier one."""
    kept = _keep_before_upgrade(db, version) if 0 < version < len(MIGRATIONS) else None
    try:
        # All or none: a start refused part-way (a disk filled by the migration) left the
        # database at a version between, which no released code wrote and earlier code
        # refuses, and the next start kept that as the copy "as it was".
        with transaction(db):
            for number, (name, migrate) in enumerate(MIGRATIONS, start=1):
                # Re-read under the write lock: another process may have migrated meanwhile.
                if number <= schema_version(db):
                    continue
                migrate(db)
                db["schema_version"].insert({"version": number, "name": name, "applied": iso()})
    except BaseException as error:
        if kept is None:
            raise
        with contextlib.suppress(OSError):  # the database is as it was: the copy would be a second one
            os.unlink(kept)
        if not isinstance(error, (sqlite3.Error, OSError)):
            raise  # a bug in a migration: its own traceback
        raise MigrationFailed(
            f"the database {db_path(db)!r} is at schema version {version} and could not be migrated to "
            f"{len(MIGRATIONS)} ({error}); nothing was migrated and the copy made for it was removed: free "
            "some space beside the database and start again"
        ) from None


def _keep_before_upgrade(db: sqlite_utils.Database, version: int) -> Path | None:
    """Copy the database file of `db`, at schema `version`, to
    ``<name>.before-schema-<new version>-<time>`` beside it before it is migrated, and log
    where: the way back to the earlier code (stop the app, move the copy into place, start the
    earlier code). A database in memory has no copy.

    The copy is made with ``VACUUM INTO``: one consistent file (no ``-wal``), readable by its
    owner alone, like the database.
    """
    path = db_path(db)
    if not path:
        return None
    copy = unused_path(f"{path}.before-schema-{len(MIGRATIONS)}-{file_stamp()}")
    try:
        create_private(copy)
        db.execute("VACUUM INTO ?", [str(copy)])
    except (OSError, sqlite3.Error) as error:
        with contextlib.suppress(OSError):
            os.unlink(copy)
        raise CopyBeforeUpgradeFailed(
            f"the database {path!r} is at schema version {version} and this code would migrate it "
            f"to {len(MIGRATIONS)}, but the copy kept before an upgrade could not be written "
            f"({error}); nothing was migrated: free some space beside the database and start again"
        ) from None
    log.warning(
        "The database %s is at schema version %d; migrating it to %d. It is kept as it was in %s: "
        "to go back to the earlier code, stop the app, delete %s-wal and %s-shm if they are there "
        "and move that file to %s.",
        path,
        version,
        len(MIGRATIONS),
        copy,
        path,
        path,
        path,
    )
    return copy
