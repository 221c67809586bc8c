"""The annotation database's tables, as an ordered list of forward migrations.

Each migration is a function ``(db) -> None`` that moves the schema one version up;
`annotation.db.ensure_schema` applies the ones a database has not seen yet, in order, in
one transaction each. Never edit a migration that has shipped: append a new one.

Conventions
-----------
- Timestamps are UTC text from `annotation.db.iso` (``2025-01-31T12:00:00.000000Z``),
  so text order is time order.
- Role lists and other small structures are JSON text.
- A handed-out unit of work is a ``tasks`` row (kind ``coloring``, ``review`` or
  ``judgment``); when it is submitted, ``tasks.result_id`` names the row it produced
  (a coloring, QC vote or judgment id, by kind).
- Nothing is deleted by the app: rows change ``status`` and an ``audit`` row says who,
  when and why.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

COLORING_STATUSES = ("submitted", "accepted", "recolor_requested", "excluded")
TASK_KINDS = ("coloring", "review", "judgment")
TASK_STATUSES = ("reserved", "submitted", "expired", "released")
ANNOTATOR_STATUSES = ("active", "revoked")

# (table, columns, pk, not_null, foreign keys, defaults) in creation order.
_TABLES_V1: list[tuple[str, dict, str, set, list, dict]] = [
    ("settings", {"key": str, "value": str}, "key", {"value"}, [], {}),
    ("concepts", {"key": str, "base": str, "base_id": int, "category": str,
                  "modifier_type": str, "modifier": str},
     "key", {"base", "base_id", "category", "modifier_type", "modifier"}, [], {}),
    ("sketches", {"id": int, "base": str, "path": str, "sha256": str, "source": str,
                  "selected": int, "width": int, "height": int, "meta": str, "created": str},
     "id", {"base", "path", "sha256", "source", "selected", "created"},
     [("base", "concepts", "key")], {"selected": 0, "meta": "{}"}),
    ("annotators", {"id": int, "pseudonym": str, "roles": str, "design_background": int,
                    "status": str, "created": str, "created_by": str,
                    "instructions_read": str, "practice_approved": str,
                    "practice_approved_by": str},
     "id", {"pseudonym", "roles", "status", "created"}, [], {"status": "active"}),
    ("invites", {"token_hash": str, "annotator_id": int, "role": str, "created": str,
                 "expires": str, "first_used": str, "last_used": str, "uses": int,
                 "revoked": str},
     "token_hash", {"annotator_id", "role", "created", "expires", "uses"},
     [("annotator_id", "annotators", "id")], {"uses": 0}),
    ("sessions", {"token_hash": str, "annotator_id": int, "roles": str, "created": str,
                  "expires": str, "last_seen": str, "revoked": str},
     "token_hash", {"roles", "created", "expires"},
     [("annotator_id", "annotators", "id")], {}),
    ("consents", {"id": int, "annotator_id": int, "form_sha256": str, "agreed": int,
                  "created": str},
     "id", {"annotator_id", "form_sha256", "agreed", "created"},
     [("annotator_id", "annotators", "id")], {}),
    ("studies", {"id": int, "name": str, "votes_per_pair": int, "frozen": str,
                 "meta": str, "created": str},
     "id", {"name", "votes_per_pair", "created"}, [], {"votes_per_pair": 6, "meta": "{}"}),
    ("study_pairs", {"id": int, "study_id": int, "concept_key": str, "a": str, "b": str,
                     "meta": str},
     "id", {"study_id", "concept_key", "a", "b"},
     [("study_id", "studies", "id"), ("concept_key", "concepts", "key")], {"meta": "{}"}),
    ("colorings", {"id": int, "annotator_id": int, "concept_key": str, "sketch_id": int,
                   "image_path": str, "image_sha256": str,
                   "mask_path": str, "mask_sha256": str, "practice": int, "round": int,
                   "status": str, "seconds_spent": float, "created": str},
     "id", {"annotator_id", "concept_key", "image_path", "image_sha256", "practice",
            "round", "status", "created"},
     [("annotator_id", "annotators", "id"), ("concept_key", "concepts", "key"),
      ("sketch_id", "sketches", "id")],
     {"practice": 0, "round": 1, "status": "submitted"}),
    ("coloring_distributions", {"coloring_id": int, "p": str, "method": str, "created": str},
     "coloring_id", {"p", "created"}, [("coloring_id", "colorings", "id")], {}),
    ("reviews", {"coloring_id": int, "reason": str, "votes_needed": int, "status": str,
                 "created": str},
     "coloring_id", {"votes_needed", "status", "created"},
     [("coloring_id", "colorings", "id")], {"votes_needed": 3, "status": "open"}),
    ("qc_votes", {"id": int, "coloring_id": int, "expert_id": int,
                  "vote": str, "comment": str, "created": str},
     "id", {"coloring_id", "expert_id", "vote", "created"},
     [("coloring_id", "colorings", "id"), ("expert_id", "annotators", "id")], {}),
    ("judgments", {"id": int, "pair_id": int, "participant_id": int,
                   "left_item": str, "choice": str, "winner": str, "seconds_spent": float,
                   "created": str},
     "id", {"pair_id", "participant_id", "left_item", "choice", "winner", "created"},
     [("pair_id", "study_pairs", "id"), ("participant_id", "annotators", "id")], {}),
    ("tasks", {"id": int, "kind": str, "annotator_id": int, "concept_key": str,
               "coloring_id": int, "pair_id": int, "left_item": str, "practice": int,
               "status": str, "created": str, "expires": str, "finished": str,
               "result_id": int},
     "id", {"kind", "annotator_id", "practice", "status", "created", "expires"},
     [("annotator_id", "annotators", "id"), ("concept_key", "concepts", "key"),
      ("coloring_id", "colorings", "id"), ("pair_id", "study_pairs", "id")], {"practice": 0, "status": "reserved"}),
    ("audit", {"id": int, "created": str, "actor": str, "action": str, "object_type": str,
               "object_id": str, "why": str, "details": str},
     "id", {"created", "actor", "action"}, [], {"details": "{}"}),
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
        db[name].create(columns, pk=pk, not_null=not_null, foreign_keys=fks,
                        defaults=defaults)
    for table, columns, unique in _INDEXES_V1:
        db[table].create_index(columns, unique=unique)


def _v2_review_plausibility(db: sqlite_utils.Database) -> None:
    # The SCD plausibility of a coloring under review, which orders the expert queue.
    db["reviews"].add_column("plausibility", float)


# Ordered forward migrations: version i+1 is MIGRATIONS[i].
MIGRATIONS: tuple[tuple[str, Callable[[sqlite_utils.Database], None]], ...] = (
    ("initial tables", _v1_initial),
    ("review plausibility", _v2_review_plausibility),
)
