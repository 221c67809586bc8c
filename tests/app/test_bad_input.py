"""Bad input through the public API of a real server: one table, one row per bad input.

Each row names an endpoint, how to build its arguments from the people set up for the
module (`tests.bad_input_world.World`) and a pattern the error message must match. For
every row the test checks that the call fails with that message (HTML-escaped: no raw
tag comes back), that nothing stored changed (a dump of every table and the data
folder's files, by content), and that the app keeps serving (a follow-up call answers as
before). A refusal never sends a huge input back: each message stays under
`MAX_MESSAGE_CHARS`. Sketch imports answer bad files with a result row, not an error:
their own table checks the row's reason the same way.

A row whose endpoint the app does not have fails, naming the endpoint: a renamed or
removed endpoint must not silently drop its rows.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from annotation.coloring.fill import canvas_value
from storage import ensure_schema, open_db, transaction
from storage.shown import shown_path
from tests.app_server import make_config, running_app
from tests.bad_input_world import (
    FORGED,
    IMG,
    SCRIPT,
    Case,
    as_role,
    bomb_png,
    build_world,
    designer_submit,
    painted_layer,
    snapshot,
    upload_args,
    value_with_png,
)
from tests.png_modes import WRONG_PNGS, raw_png, wrong_png

HUGE = 1_000_000
MAX_MESSAGE_CHARS = 1_000


def _wrong_canvas(name: str) -> Callable[[dict], str]:
    """The canvas value of the designer's task with the wrong PNG `name` at the sketch's size."""

    def value(task: dict) -> str:
        height, width = task["sketch"].shape[:2]
        return value_with_png(task["key"], wrong_png(name, width, height)[0])

    return value


def _short_canvas(task: dict) -> str:
    """The canvas value of the designer's task: a red RGBA PNG whose rows stop a third of the way."""
    height, width = task["sketch"].shape[:2]
    rows = b"".join(b"\x00" + bytes([208, 48, 48, 255]) * width for _ in range(height // 3))
    return value_with_png(task["key"], raw_png(width, height, 8, 6, zlib.compress(rows)))


def _half_transparent(sketch: np.ndarray) -> np.ndarray:
    """`painted_layer` of `sketch` with its second half of painted pixels at alpha 128."""
    layer = painted_layer(sketch)
    rows, cols = np.nonzero(layer[..., 3])
    layer[rows[len(rows) // 2 :], cols[len(cols) // 2 :], 3] = 128
    return layer


def _any_size(arrived: str) -> str:
    size = {"w": r"\d+", "h": r"\d+", "w1": r"\d+"}
    return rf"^`canvas` must be an 8-bit RGBA PNG of \d+×\d+ pixels, got {arrived.format(**size)}$"


# The Evaluate form up to its mode, set to explicit (`app.evaluate.PREVIEW`'s order); the
# explicit fields follow.
EXPLICIT_MODE = (["tiny-random"], [], [], [], "", 0, 0, ["natural"], "7.5", 1, "explicit")

CASES = [
    # Invite links: forged, expired, revoked, malformed, hostile text.
    Case("invite-forged-token", "/login_invite", lambda w: (FORGED,), "invite link is not valid"),
    Case(
        "invite-forged-link",
        "/login_invite",
        lambda w: (f"{w.config.public_url}/?invite={FORGED}",),
        "invite link is not valid",
    ),
    Case(
        "invite-expired",
        "/login_invite",
        lambda w: (w.links["expired"],),
        r"this invite link expired on \d{4}-\d\d-\d\d",
    ),
    Case(
        "invite-of-closed-account",
        "/login_invite",
        lambda w: (w.links["closed"],),
        # Not "ask the study admin for a new one": no new link can be made for a closed account
        # (before *Reopen account*; the way on was not said: outside probe 184).
        r"^the account \w+ was closed by the study admin; ask them if you should go on: only they can "
        "reopen it$",
    ),
    Case("invite-empty", "/login_invite", lambda w: ("",), "^the invite box is empty: paste the invite link"),
    Case(
        "invite-overlong", "/login_invite", lambda w: ("a" * 300,), "invite token is malformed: .* length 300"
    ),
    Case("invite-script", "/login_invite", lambda w: (SCRIPT,), "invite link is not valid"),
    Case(
        "invite-path-traversal",
        "/login_invite",
        lambda w: ("../../../etc/passwd",),
        "invite link is not valid",
    ),
    # The admin password.
    Case("admin-wrong-password", "/login_admin", lambda w: ("not the password",), "wrong admin password"),
    Case("admin-empty-password", "/login_admin", lambda w: ("",), "^the password box is empty"),
    Case("admin-password-html", "/login_admin", lambda w: (IMG,), "wrong admin password"),
    # Actions outside a role, or with a bad session.
    Case(
        "designer-creates-invites",
        "/admin_create_invites",
        as_role("designer", "designer", 1, "unknown", 7),
        "needs the role admin; .* D0001",
    ),
    Case("expert-exports", "/admin_export", as_role("expert"), "needs the role admin"),
    Case(
        "participant-lists-people", "/admin_list_annotators", as_role("participant"), "needs the role admin"
    ),
    Case(
        "researcher-closes-account",
        "/admin_revoke",
        as_role("researcher", 1, "spite"),
        "needs the role admin",
    ),
    Case("nobody-reads-coverage", "/admin_coverage", lambda w: ("",), "you are not signed in"),
    Case("forged-session", "/admin_practice_pending", lambda w: (FORGED,), "session is not valid any more"),
    Case(
        "expired-session",
        "/admin_create_invites",
        as_role("expired", "designer", 1, "yes", 7),
        "your session expired",
    ),
    Case(
        "signed-out-session",
        "/admin_review_practice",
        as_role("signed_out", 1, "approve", ""),
        "session is not valid any more",
    ),
    Case(
        "session-of-closed-account",
        "/admin_list_annotators",
        as_role("closed"),
        "^your session is not valid any more: the study admin closed your account; ask them if you should "
        "go on: only they can reopen it$",
    ),
    # A new link ends the sessions of the old one; a person holds at most 5 live sessions.
    Case(
        "session-of-a-replaced-link",
        "/designer_submissions",
        as_role("replaced"),
        "^your session is not valid any more: it was opened with an invite link that has since been replaced",
    ),
    Case(
        "invite-replaced-link",
        "/login_invite",
        lambda w: (w.links["replaced"],),
        "this invite link was replaced",
    ),
    Case(
        "session-beyond-the-cap",
        "/expert_concepts",
        as_role("crowded"),
        "^your session is not valid any more: you signed in on more than 5 devices or browsers",
    ),
    # Admin inputs out of range or of the wrong kind.
    Case(
        "invite-count-zero",
        "/admin_create_invites",
        as_role("admin", "designer", 0, "yes", 7),
        "`How many` must be from 1 to 500, got 0",
    ),
    Case(
        "invite-count-too-many",
        "/admin_create_invites",
        as_role("admin", "designer", 501, "yes", 7),
        "`How many` must be from 1 to 500, got 501",
    ),
    Case(
        "invite-role-admin",
        "/admin_create_invites",
        as_role("admin", "admin", 1, "yes", 7),
        r"^`Role` must be one of 'designer', 'expert', 'participant', 'researcher', got 'admin'; nothing was changed\.$",
    ),
    Case(
        "invite-role-script",
        "/admin_create_invites",
        as_role("admin", SCRIPT, 1, "yes", 7),
        r"^`Role` must be one of .*, got \"&lt;script>",
    ),
    Case(
        "invite-background-unknown",
        "/admin_create_invites",
        as_role("admin", "designer", 1, "maybe", 7),
        r"^`Design/art background` must be one of 'unknown', 'yes', 'no', got 'maybe'; nothing was changed\.$",
    ),
    Case(
        "invite-days-negative",
        "/admin_create_invites",
        as_role("admin", "designer", 1, "yes", -1),
        r"`Link valid for \(days\)` must be in \[1/24, 3650\] days \(one hour to ten years\), got -1",
    ),
    Case(
        "invite-days-huge",
        "/admin_create_invites",
        as_role("admin", "designer", 1, "yes", 1e9),
        r"`Link valid for \(days\)` must be in \[1/24, 3650\] days",
    ),
    Case(
        # 0 used to stand for the default (30 days); an empty field is refused, not guessed at.
        "invite-days-zero",
        "/admin_create_invites",
        as_role("admin", "designer", 1, "yes", 0),
        r"`Link valid for \(days\)` must be in \[1/24, 3650\] days \(one hour to ten years\), got 0",
    ),
    Case(
        "invite-days-empty",
        "/admin_create_invites",
        as_role("admin", "designer", 1, "yes", None),
        r"^`Link valid for \(days\)` must be a number of days, got nothing \(an empty box, or a number too large to hold\)$",
    ),
    Case(
        # A link dead on arrival would replace (and end the sessions of) the person's old one.
        "new-link-days-tiny",
        "/admin_new_invite",
        as_role("admin", "1", 1e-8),
        r"`Link valid for \(days\)` must be in \[1/24, 3650\] days \(one hour to ten years\), got 1e-08",
    ),
    Case(
        "practice-unknown-annotator",
        "/admin_review_practice",
        as_role("admin", 99, "approve", "ok"),
        r"^`Annotator id or pseudonym`: nobody has the id 99 \(the people table lists every id\)$",
    ),
    Case(
        "practice-bad-decision",
        "/admin_review_practice",
        as_role("admin", 1, "delete", "ok"),
        r"^`Decision` must be one of 'approve', 'redo', got 'delete'; nothing was changed\.$",
    ),
    Case(
        "invite-count-fraction",
        "/admin_create_invites",
        as_role("admin", "designer", 1.5, "yes", 7),
        "`How many` must be a whole number, got 1.5",
    ),
    Case(
        "practice-fractional-annotator",
        "/admin_review_practice",
        as_role("admin", 1.5, "approve", "ok"),
        "`Annotator id or pseudonym` must be a whole number, got '1.5'",
    ),
    Case(
        "revoke-fractional-annotator",
        "/admin_revoke",
        as_role("admin", 1.5, "left"),
        "`Annotator id or pseudonym \\(close, reopen or withdraw\\)` must be a whole number, got '1.5'",
    ),
    Case(
        "revoke-annotator-script",
        "/admin_revoke",
        as_role("admin", SCRIPT, "left"),
        "`Annotator id or pseudonym \\(close, reopen or withdraw\\)` must be a whole number, got",
    ),
    Case(
        "revoke-empty-annotator",
        "/admin_revoke",
        as_role("admin", None, "left"),
        "`Annotator id or pseudonym \\(close, reopen or withdraw\\)`: give the person's id or pseudonym \\(D0003\\), got nothing",
    ),
    Case(
        "practice-approve-an-expert",
        "/admin_review_practice",
        as_role("admin", 2, "approve", "ok"),
        r"annotator 2 \(E\d+\) is not a designer \(roles: expert\)",
    ),
    Case(
        "practice-redo-without-colorings",
        "/admin_review_practice",
        as_role("admin", 1, "redo", "ok"),
        r"annotator 1 \(D0001\) has no practice colorings",
    ),
    Case(
        "revoke-without-why",
        "/admin_revoke",
        as_role("admin", 1, "  "),
        "`why` must say why the account is closed",
    ),
    Case(
        "revoke-unknown-annotator-html-why",
        "/admin_revoke",
        as_role("admin", 99, IMG),
        r"^`Annotator id or pseudonym \(close, reopen or withdraw\)`: nobody has the id 99 \(the people table "
        r"lists every id\)$",
    ),
    # Expert review.
    Case(
        "designer-reveals-designers",
        "/expert_grid",
        as_role("designer", "apple", True),
        "needs the role expert or admin",
    ),
    Case(
        "expert-grid-unknown-concept",
        "/expert_grid",
        as_role("expert", "unicorn", False),
        "unknown concept 'unicorn'",
    ),
    Case("expert-grid-script-concept", "/expert_grid", as_role("expert", SCRIPT, False), "unknown concept"),
    # Nothing picked: what to do, not "unknown concept None".
    Case("expert-grid-no-concept", "/expert_grid", as_role("expert", None, False), "^Pick a concept first"),
    Case(
        "expert-recolor-unknown-coloring",
        "/expert_recolor",
        as_role("expert", 99999, "browner"),
        "unknown coloring id 99999",
    ),
    Case(
        "expert-recolor-empty-note",
        "/expert_recolor",
        as_role("expert", 99999, " "),
        "`note` is empty: say what the designer should reconsider",
    ),
    # /expert_vote(session_token, task_id, verdict): the verdict is checked on the server.
    Case(
        "expert-vote-unknown-task",
        "/expert_vote",
        as_role("expert", 99999, "Consistent"),
        "unknown task id 99999",
    ),
    Case(
        # a task of another kind was "handed to someone else" (outside probe 194)
        "expert-vote-on-a-coloring-task",
        "/expert_vote",
        lambda w: (w.tokens["expert"], w.designer["task_id"], "Consistent"),
        r"^task \d+ is a coloring task, not a review: vote on the coloring shown to you$",
    ),
    Case(
        "expert-vote-bad-verdict",
        "/expert_vote",
        as_role("expert", 99999, SCRIPT),
        "`verdict` must be one of \\['Consistent', 'Inconsistent'\\]",
    ),
    Case(
        # 840 characters of the value came back
        "expert-vote-huge-verdict",
        "/expert_vote",
        as_role("expert", 99999, "x" * 200_000),
        r"^`verdict` must be one of \['Consistent', 'Inconsistent'\], got 'x{80}'… \(200000 characters\)$",
    ),
    Case(
        # a list is no key: it failed as "unhashable type", a traceback logged per call (outsider 76)
        "expert-vote-list-verdict",
        "/expert_vote",
        as_role("expert", 99999, ["Consistent"]),
        r"^`verdict` must be one of \['Consistent', 'Inconsistent'\], got \['Consistent'\]$",
    ),
    Case(
        "participant-votes-as-expert",
        "/expert_vote",
        as_role("participant", 1, "Consistent"),
        "needs the role expert",
    ),
    Case(
        # where to find the id, not "must be a whole number, got nothing" (outside probe 149)
        "expert-recolor-no-coloring",
        "/expert_recolor",
        as_role("expert", "", "browner"),
        r"^`Coloring id` is empty: click a picture of the concept's colorings, or type its coloring_id \(the "
        r"first column of the table that the Show colorings button fills above\)$",
    ),
    Case(
        "expert-recolor-fractional-coloring",
        "/expert_recolor",
        as_role("expert", 1.5, "browner"),
        "`Coloring id` must be a whole number, got '1.5'",
    ),
    Case(
        "participant-vote-fractional-task",
        "/participant_vote",
        as_role("judge", 1.5, "left", "2025-01-01T00:00:00.000000Z"),
        "`task_id` must be a whole number, got 1.5",
    ),
    Case("expert-reinstates", "/expert_reinstate", as_role("expert", 1, "mistake"), "needs the role admin"),
    Case(
        "expert-ranking-share-zero",
        "/expert_consistency",
        as_role("expert", 0, 5),
        r"`high-variance share` must be in \(0, 1\], got 0",
    ),
    Case(
        "expert-ranking-share-empty",
        "/expert_consistency",
        as_role("expert", None, 5),
        r"`high-variance share` must be in \(0, 1\], got nothing \(an empty box, or a number too large to hold\)",
    ),
    # Pairwise judgments.
    Case(
        "participant-vote-time-written-otherwise",
        "/participant_vote",
        as_role("judge", 99999, "left", "2000-01-01T00:00:00Z"),
        r"`shown_at` must be the time participant_next gave with the trial, written as it writes times "
        r"\(UTC with microseconds, such as '\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z'\), got '2000-01-01T00:00:00Z'",
    ),
    Case(
        "participant-vote-unknown-task",
        "/participant_vote",
        as_role("judge", 99999, "left", "2025-01-01T00:00:00.000000Z"),
        "`task_id` 99999 is not a pair handed to you",
    ),
    Case(
        "participant-vote-bad-side",
        "/participant_vote",
        as_role("judge", 99999, "middle", "2025-01-01T00:00:00.000000Z"),
        "`side` must be one of|is not a pair handed to you",
    ),
    Case(
        "participant-vote-bad-time",
        "/participant_vote",
        as_role("judge", 1, "left", IMG),
        "`shown_at` must be the time participant_next gave|is not a pair handed to you",
    ),
    Case("expert-judges", "/participant_next", as_role("expert"), "needs the role participant"),
    # Studies.
    Case("study-open-unknown", "/study_open", as_role("researcher", 999), "unknown study id 999"),
    Case(
        "study-analyse-unknown",
        "/study_analyse",
        as_role("researcher", 999, False, 100, 0),
        "unknown study id 999",
    ),
    Case(
        "study-analyse-negative-seed",
        "/study_analyse",
        as_role("researcher", 999, False, 100, -1),
        r"`Bootstrap seed` must be a whole number, 0 or more \(a random seed\), got -1",
    ),
    Case(
        # Each resample is a Bradley–Terry fit: 10**12 of them would hold the server for good.
        "study-analyse-resamples-huge",
        "/study_analyse",
        as_role("researcher", 999, False, 10**12, 0),
        r"^`Bootstrap resamples` must be a whole number from 1 to 10,000, got 1,000,000,000,000$",
    ),
    Case(
        "pilot-draw-negative-seed",
        "/admin_draw_pilot",
        as_role("admin", 3, -1),
        r"`Seed of the draw` must be a whole number, 0 or more \(a random seed\), got -1",
    ),
    Case(
        "study-create-html-name-no-sources",
        "/study_create",
        as_role("researcher", SCRIPT, "uw71-ratings", "natural", [], 4, 6, 0.1, 20, 0),
        "`sources`|`ground_truth`",
    ),
    Case(
        # The form's labels, not the library's parameter names.
        "study-create-negative-concepts",
        "/study_create",
        as_role("researcher", "x", "uw71-ratings", "natural", [], -3, 6, 0.1, 20, 0),
        "`Concepts` must be a whole number, 1 or more, got -3",
    ),
    Case(
        "study-create-no-votes",
        "/study_create",
        as_role("researcher", "x", "uw71-ratings", "natural", [], 4, 0, 0.1, 20, 0),
        "`Votes per pair` must be a whole number from 1 to 1,000, got 0",
    ),
    Case(
        # 1e12 was taken: a study that would never count as complete (outside probe 162).
        "study-create-votes-past-any-study",
        "/study_create",
        as_role("researcher", "x", "uw71-ratings", "natural", [], 4, 1e12, 0.1, 20, 0),
        "`Votes per pair` must be a whole number from 1 to 1,000, got 1,000,000,000,000",
    ),
    Case(
        # A slider's bounds: Gradio's "Value 2.0 is greater than maximum value 0.5." named no input.
        "study-create-share-over-its-bound",
        "/study_create",
        as_role("researcher", "x", "uw71-ratings", "natural", [], 4, 3, 2.0, 10, 0),
        r"^`Attention-check share of trials` must be a number in \[0, 0.5\], got 2.0; nothing was changed\.$",
    ),
    Case(
        "designer-creates-study",
        "/study_create",
        as_role("designer", "x", "uw71-ratings", "natural", [], 4, 6, 0.1, 20, 0),
        "needs the role researcher or admin",
    ),
    # Evaluation imports: uploads and folders.
    Case(
        "import-path-traversal",
        "/evaluate_import",
        as_role("researcher", "", None, "../../../etc", "tiny-random", 0.3, 0.25),
        r"^'imports/\.\./\.\./\.\./etc' is outside the allowed import folders \(imports/\)$",
    ),
    Case(
        "import-absolute-path",
        "/evaluate_import",
        as_role("researcher", "", None, "/etc", "tiny-random", 0.3, 0.25),
        r"^'/etc' is outside the allowed import folders \(imports/\)$",
    ),
    Case(
        "import-missing-folder",
        "/evaluate_import",
        as_role("researcher", "", None, "nothing-here", "tiny-random", 0.3, 0.25),
        r"^'imports/nothing-here' must be an existing folder or \.zip file$",
    ),
    Case(
        "import-run-name-script",
        "/evaluate_import",
        as_role("researcher", SCRIPT, None, "x", "tiny-random", 0.3, 0.25),
        r"`run` name must be 1-.* letters, digits, .* \(ASCII letters a-z, A-Z and digits 0-9 only\)",
    ),
    Case(
        "import-nothing",
        "/evaluate_import",
        as_role("researcher", "", None, "", "tiny-random", 0.3, 0.25),
        "`…or folder under imports/` is empty: name a folder under imports/, or upload a zip",
    ),
    # An emptied threshold box was a TypeError: "Something went wrong" (outside probe 219).
    Case(
        "import-empty-box-threshold",
        "/evaluate_import",
        as_role("researcher", "", None, "x", "tiny-random", None, 0.25),
        r"^`Box threshold` must be a number in \[0, 1\], got nothing \(an empty box, or a number too large",
    ),
    Case(
        "import-text-threshold-above-one",
        "/evaluate_import",
        as_role("researcher", "", None, "x", "tiny-random", 0.3, 2.5),
        r"^`Text threshold` must be a number in \[0, 1\], got 2\.5$",
    ),
    # Long values are quoted cut to 80 characters (about 900 came back: outsider 74).
    Case(
        "import-long-folder",
        "/evaluate_import",
        as_role("researcher", "", None, "a" * 1500, "tiny-random", 0.3, 0.25),
        r"^…'a{80}' \(1508 characters\) must be an existing folder or \.zip file$",
    ),
    Case(
        "browser-long-cfg",
        "/browser_show",
        as_role("researcher", "apple", "uw71-ratings", "natural", "c" * 1500),
        r"got 'c{80}'… \(1500 characters\)$",
    ),
    Case(
        "evaluate-cluster-long-address",
        "/evaluate_cluster",
        as_role("researcher", "ray", "b" * 1500),
        r"got 'b{80}'… \(1500 characters\)$",
    ),
    Case(
        "judge-audit-long-kind",
        "/judge_audit_run",
        as_role("researcher", "z" * 1500, 5, 0),
        r"^judge 'z{80}'… \(1500 characters\) must start with one of ",
    ),
    Case(
        # The name was cut at the start of the refusal and quoted whole in its `hf download`.
        "judge-audit-long-model-not-here",
        "/judge_audit_run",
        as_role("researcher", "contrastive:" + "a" * 240, 5, 0),
        r"^judge model 'a{80}'… \(240 characters\) is not on this machine: download it on a machine "
        r"with internet \(`hf download` and its hub id, (?:(?!aaa).)+, or put the model's folder in the data "
        r"folder's models/ and give its name$",
    ),
    Case(
        # The file system's refusal: "Something went wrong on the server (OSError)" and a traceback
        "judge-audit-model-name-too-long",
        "/judge_audit_run",
        as_role("researcher", "contrastive:" + "a" * 1900, 5, 0),
        r"judge model 'a{80}'… \(1900 characters\): a folder's or hub id's name has at most 255 bytes$",
    ),
    Case("import-corrupt-zip", "/evaluate_import", upload_args("corrupt.zip"), "zip"),
    Case("import-empty-file", "/evaluate_import", upload_args("empty.zip"), "zip|empty"),
    Case("import-non-image", "/evaluate_import", upload_args("text.zip"), "no usable image"),
    Case("import-truncated-png", "/evaluate_import", upload_args("truncated.zip"), "no usable image"),
    Case(
        "import-decompression-bomb",
        "/evaluate_import",
        upload_args("bomb.zip"),
        "no usable image in 'bomb.zip'.*has [\\d,]+ pixels; at most [\\d,]+ are allowed",
    ),
    Case(
        "import-oversized-file",
        "/evaluate_import",
        upload_args("oversized.zip"),
        r"no usable image in 'oversized.zip'.*the file is 34,603,008 bytes; at most 33,554,432 are read",
    ),
    Case("import-zip-slip", "/evaluate_import", upload_args("slip.zip"), "would leave the archive folder"),
    Case(
        "import-upload-and-folder",
        "/evaluate_import",
        lambda w: (
            w.tokens["researcher"],
            "",
            handle_file(w.files["text.zip"]),
            "x",
            "tiny-random",
            0.3,
            0.25,
        ),
        "either a zip upload or a folder, not both",
    ),
    # Research views.
    Case(
        "browser-unknown-concept",
        "/browser_show",
        as_role("researcher", "unicorn", "uw71-ratings", "natural", "recommended"),
        r"^unknown concept 'unicorn'; expected a key such as 'rotten apple'$",
    ),
    Case(
        "browser-script-concept",
        "/browser_show",
        as_role("researcher", SCRIPT, "uw71-ratings", "natural", "recommended"),
        "^unknown concept .{0,80}; expected a key",
    ),
    Case(
        "evaluate-unknown-concepts",
        "/evaluate_preview",
        as_role(
            "researcher", ["tiny-random"], ["apple", "unicorn", IMG], [], [], "", 0, 0, ["natural"], "7.5", 1
        ),
        r"^`Concepts` names unknown concepts \['unicorn', .{0,60}\]; keys are the concept text",
    ),
    Case(
        # A text where a list goes reached the planner as letters: "unknown concepts ['a', 'p', ...]".
        "evaluate-concepts-as-one-text",
        "/evaluate_preview",
        as_role("researcher", ["tiny-random"], "apple", [], [], "", 0, 0, ["natural"], "7.5", 1),
        r"^`Concepts \(empty: all, then the filters below\)` is not a value the Dropdown input takes; "
        r"nothing was changed\.$",
    ),
    Case(
        # 1.2 MB of names was read and cut into 200,000 keys (outsider 105)
        "pilot-names-beyond-the-text-limit",
        "/admin_set_pilot",
        as_role("admin", "apple," * 400),
        r"^`Pilot concepts \(names, one per line or separated by commas\)` may hold at most 2000 characters, "
        r"got 2400; shorten it$",
    ),
    Case(
        "pilot-names-as-a-list",
        "/admin_set_pilot",
        as_role("admin", ["apple", "banana"]),
        r"^`Pilot concepts \(names, one per line or separated by commas\)` is not a value the Textbox input takes",
    ),
    Case(
        # "yes" counted as unticked and an export was built (outsider 76)
        "export-option-as-text",
        "/admin_export_start",
        as_role("admin", "yes"),
        r"^`[^`]+` is not a value the Checkbox input takes; nothing was changed\.$",
    ),
    Case(
        # Nothing for a Checkbox was read as unticked too: a whole export was built (outsider 83).
        "export-option-as-nothing",
        "/admin_export_start",
        as_role("admin", None),
        r"^`[^`]+` is not a value the Checkbox input takes; nothing was changed\.$",
    ),
    Case(
        # Built item by item, this run would have held the server's memory until it was killed.
        "evaluate-seeds-huge",
        "/evaluate_preview",
        as_role("researcher", ["tiny-random"], ["apple"], [], [], "", 0, 0, ["natural"], "7.5", 10**12),
        r"^the run would make 1,000,000,000,000 images \(1 model\(s\) x 1 concept-style pairs .* one run "
        r"makes at most 1,000,000: lower the seeds",
    ),
    Case(
        "evaluate-cfg-infinite",
        "/evaluate_preview",
        as_role("researcher", ["tiny-random"], ["apple"], [], [], "", 0, 0, ["natural"], "1e309", 1),
        r"^`Guidance scales` must be numbers in \(0, 100\], got \[inf\]$",
    ),
    Case(
        # Refusals of the planning libraries take the labels the tab shows.
        "evaluate-cfg-text",
        "/evaluate_preview",
        as_role("researcher", ["tiny-random"], ["apple"], [], [], "", 0, 0, ["natural"], "abc", 1),
        r"^`Guidance scales` must be comma-separated numbers such as '3, 7.5', got 'abc'$",
    ),
    Case(
        "evaluate-explicit-no-tasks",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, [], ["css3"]),
        r"^`Tasks` must name at least one of color_name, color_object, multi_object, implicit, numeric; "
        r"none is chosen$",
    ),
    Case(
        "evaluate-explicit-long-subset",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, ["color_name"], ["css3"], "k" * 300),
        r"^`Subset` must be 'full', 'compact' or a positive integer, got 'k{80}'… \(300 characters\)$",
    ),
    Case(
        # Read as the number it is, as 0 was: "-1" was quoted as text and 0 not (outside probe 204).
        "evaluate-explicit-negative-subset",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, ["color_name"], ["css3"], " -1 "),
        r"^`Subset` must be 'full', 'compact' or a positive integer, got -1$",
    ),
    Case(
        # It named the concept mode's seeds and concepts, fields this form does not have (outsider 116).
        "evaluate-explicit-images-huge",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, ["color_name"], ["css3"], "compact", 10**12),
        r"^the run would make [\d,]+ images \(1 model\(s\) x [\d,]+ prompts x 1 guidance scale\(s\) x "
        r"1,000,000,000,000 image\(s\) per prompt\); one run makes at most 1,000,000: lower the images per "
        r"prompt, guidance scales, prompts",
    ),
    Case(
        # An emptied field said "got None" (outsider 116).
        "evaluate-explicit-presence-emptied",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, ["color_name"], ["css3"], "compact", 1, 0, "", "", [], None),
        # ... and one too large for the box (1e400) arrives as None too: said (outside probe 151)
        r"^`Presence: detection score at least` must be a number in \[0, 1\], got nothing \(an empty box, or a "
        r"number too large to hold\)$",
    ),
    Case(
        "evaluate-explicit-no-systems",
        "/evaluate_preview",
        as_role("researcher", *EXPLICIT_MODE, ["color_name"], []),
        r"^`Color systems` must name at least one of .*css3.*; none is chosen$",
    ),
    Case(
        "evaluate-nothing-matches",
        "/evaluate_preview",
        as_role("researcher", ["tiny-random"], [], ["fruit"], [], "z" * 100, 0, 0, ["natural"], "7.5", 1),
        r"^no concept matches the selection: categories \['fruit'\] and text containing 'z{80}'… "
        r"\(100 characters\)$",
    ),
    Case(
        "browser-huge-concept",
        "/browser_show",
        as_role("researcher", "u" * HUGE, "uw71-ratings", "natural", "recommended"),
        rf"^unknown concept 'u{{80}}'… \({HUGE} characters\); expected a key such as 'rotten apple'$",
    ),
    Case(
        "revoke-huge-annotator-id",
        "/admin_revoke",
        as_role("admin", "x" * HUGE, "left"),
        rf"^`Annotator id or pseudonym \(close, reopen or withdraw\)`: nobody is called 'x{{80}}'… \({HUGE} characters\)$",
    ),
    Case(
        "revoke-huge-digits-annotator-id",
        "/admin_revoke",
        as_role("admin", "1" * HUGE, "left"),
        rf"^`Annotator id or pseudonym \(close, reopen or withdraw\)` must be a whole number of at most 18 digits, got '1{{80}}'… \({HUGE} characters\)$",
    ),
    Case(
        "browser-cfg-not-a-number",
        "/browser_show",
        as_role("researcher", "apple", "uw71-ratings", "natural", "lots"),
        "`cfg` must be 'recommended' or a guidance scale, got 'lots'",
    ),
    Case(
        "leaderboard-nothing-stored",
        "/leaderboard_show",
        as_role("researcher", "uw71-ratings", "recommended", "ratio_of_means"),
        "no stored model distribution",
    ),
    Case(
        "designer-opens-leaderboard",
        "/leaderboard_show",
        as_role("designer", "uw71-ratings", "recommended", "ratio_of_means"),
        "needs the role researcher or admin",
    ),
    Case(
        "sketches-select-fractional",
        "/sketches_select",
        as_role("admin", "bear", 1.5, "why"),
        "`sketch id` must be a whole number, got '1.5'",
    ),
    # The Sketches tab's concept pickers fill at sign-in, so the server hands their value on
    # as it came (`app.common.checked_by_handler`) and the library checks it.
    Case(
        "sketches-list-unknown-concept",
        "/sketches_list",
        as_role("admin", "no such fruit"),
        "unknown concept 'no such fruit'",
    ),
    Case(
        "sketches-list-variant",
        "/sketches_list",
        as_role("admin", "rotten apple"),
        "`base` must be a base concept such as 'apple', got the variant 'rotten apple'",
    ),
    Case(
        "sketches-list-script",
        "/sketches_list",
        as_role("admin", SCRIPT),
        "unknown concept",
    ),
    Case(
        "sketches-list-not-text",
        "/sketches_list",
        as_role("admin", ["apple"]),
        r"`base` must name a base concept, got \['apple'\]",
    ),
    # A model whose weights are not here is named with how to get them, before it loads.
    Case(
        "sketches-generate-weights-missing",
        "/sketches_generate",
        as_role("admin", "sdxl", "apple"),
        r"model 'sdxl' \(stabilityai/stable-diffusion-xl-base-1\.0\) is not on this machine: download it",
    ),
    Case(
        "sketches-generate-unknown-concept",
        "/sketches_generate",
        as_role("admin", "tiny-random", "no such fruit"),
        "unknown concept 'no such fruit'",
    ),
    Case(
        "sketches-import-unknown-concept",
        "/sketches_import",
        lambda w: (w.tokens["admin"], [handle_file(w.files["sketch-photo"])], "no such fruit", True),
        "unknown concept 'no such fruit'",
    ),
    Case(
        "designer-redo-fractional",
        "/designer_redo",
        as_role("designer", "1.5"),
        "`Coloring id` must be a whole number, got '1.5'",
    ),
    # The designer's coloring: canvas values, task ids and the designer's other inputs.
    Case(
        "designer-blank-coloring",
        "/designer_submit",
        designer_submit(lambda d: canvas_value(d["key"], None, 5.0)),
        r"Nothing is colored yet: fill at least 0\.5% of the drawing",
    ),
    Case(
        "designer-below-minimum-area",
        "/designer_submit",
        designer_submit(lambda d: canvas_value(d["key"], painted_layer(d["sketch"], 40), 5.0)),
        r"Only 40 pixels \(0\.00% of the drawing\) are colored; at least 0\.5%",
    ),
    Case(
        "designer-value-not-json",
        "/designer_submit",
        designer_submit(lambda d: "{not json"),
        "the canvas value must be JSON with task_id, color_layer and elapsed_s",
    ),
    Case(
        # A JSON object reached the function, refused only there (outside probe 96).
        "designer-value-an-object",
        "/designer_submit",
        designer_submit(lambda d: {"task_id": d["key"], "color_layer": "", "elapsed_s": 5}),
        r"^`[^`]+` is not a value the HTML input takes; nothing was changed\.$",
    ),
    Case(
        "designer-value-empty",
        "/designer_submit",
        designer_submit(lambda d: ""),
        "the canvas value is empty: the coloring tool has not loaded a task",
    ),
    Case(
        "designer-layer-not-a-png",
        "/designer_submit",
        designer_submit(lambda d: value_with_png(d["key"], b"GIF89a" + bytes(64))),
        _any_size("data that is not a PNG"),
    ),
    *(
        Case(
            f"designer-layer-{name}",
            "/designer_submit",
            designer_submit(_wrong_canvas(name)),
            _any_size(arrived),
        )
        for name, (_, arrived) in WRONG_PNGS.items()
    ),
    Case(
        # A whole zlib stream of a third of the rows: PIL would decode the rest as unpainted.
        "designer-layer-short-rows",
        "/designer_submit",
        designer_submit(_short_canvas),
        r"^`png` is truncated or corrupt: its pixel data holds [\d,]+ of the [\d,]+ bytes its \d+x\d+ header implies; reload the page$",
    ),
    Case(
        "designer-layer-jpeg",
        "/designer_submit",
        designer_submit(
            lambda d: value_with_png(d["key"], b"\xff\xd8\xff", prefix="data:image/jpeg;base64,")
        ),
        "`color_layer` must start with 'data:image/png;base64,'",
    ),
    Case(
        "designer-layer-not-base64",
        "/designer_submit",
        designer_submit(
            lambda d: json.dumps(
                {"task_id": d["key"], "elapsed_s": 1, "color_layer": "data:image/png;base64,@@"}
            )
        ),
        "`color_layer` is not valid base64",
    ),
    Case(
        "designer-layer-wrong-size",
        "/designer_submit",
        designer_submit(
            lambda d: canvas_value(d["key"], painted_layer(np.full((64, 48), 255, np.uint8)), 5.0)
        ),
        _any_size("an 8-bit RGBA PNG of 48×64"),
    ),
    Case(
        # Outside probe 192: a half-transparent region was stored as its color at full weight.
        "designer-layer-half-transparent",
        "/designer_submit",
        designer_submit(lambda d: canvas_value(d["key"], _half_transparent(d["sketch"]), 5.0)),
        r"^`color_layer` has [\d,]+ half-transparent pixels \(alpha 1 to 254\); the coloring canvas paints a "
        r"pixel fully or not at all, so nothing was saved: reload the page$",
    ),
    Case(
        "designer-layer-decompression-bomb",
        "/designer_submit",
        designer_submit(lambda d: value_with_png(d["key"], bomb_png())),
        _any_size("a 1-bit grayscale PNG of 40000×40000"),
    ),
    Case(
        "designer-elapsed-html",
        "/designer_submit",
        designer_submit(lambda d: json.dumps({"task_id": d["key"], "color_layer": "", "elapsed_s": IMG})),
        "the canvas value must be JSON with task_id, color_layer and elapsed_s",
    ),
    Case(
        "designer-elapsed-negative",
        "/designer_submit",
        designer_submit(lambda d: json.dumps({"task_id": d["key"], "color_layer": "", "elapsed_s": -5})),
        r"`elapsed_s` must be from 0 to 604800 seconds \(7 days\), got -5",
    ),
    Case(
        "designer-unknown-task",
        "/designer_submit",
        designer_submit(
            lambda d: canvas_value(f"{d['instance']}:99999:{d['sketch_id']}", painted_layer(d["sketch"]), 5.0)
        ),
        "unknown task id 99999",
    ),
    Case(
        "designer-forged-task-key",
        "/designer_submit",
        designer_submit(lambda d: canvas_value("forged", painted_layer(d["sketch"]), 5.0)),
        "the canvas names task 'forged', which is not a task of this study",
    ),
    Case(
        "designer-task-key-script",
        "/designer_submit",
        designer_submit(lambda d: canvas_value(SCRIPT, None, 5.0)),
        "which is not a task of this study",
    ),
    Case(
        "designer-someone-elses-task",
        "/designer_submit",
        designer_submit(lambda d: canvas_value(d["theirs"], painted_layer(d["sketch"]), 5.0)),
        r"task \d+ was handed to someone else",
    ),
    Case(
        "designer-task-of-another-database",
        "/designer_submit",
        designer_submit(
            lambda d: canvas_value(
                f"0123456789:{d['task_id']}:{d['sketch_id']}", painted_layer(d["sketch"]), 5.0
            )
        ),
        "the canvas names task '0123456789:.*which is not a task of this study",
    ),
    Case(
        "designer-sketch-of-another-concept",
        "/designer_submit",
        designer_submit(
            lambda d: canvas_value(f"{d['instance']}:{d['task_id']}:{d['other_sketch']}", None, 5.0)
        ),
        r"sketch \d+ is a sketch of '\w+', not of '\w+'; reload the page",
    ),
    Case(
        "expert-submits-a-coloring",
        "/designer_submit",
        lambda w: (w.tokens["expert"], canvas_value(w.designer["key"], None, 1.0)),
        "needs the role designer",
    ),
    Case(
        "designer-consent-script",
        "/designer_consent",
        as_role("designer", SCRIPT),
        r"^`I have read this information, .*` is not a value the Checkbox input takes; nothing was changed\.$",
    ),
    Case(
        "designer-redo-unknown-coloring",
        "/designer_redo",
        as_role("designer", 99999),
        "^you have no coloring with the id 99999$",
    ),
    # Sketch imports: files that are not where an upload may come from.
    # A designer's sketch upload is refused at the upload route, before any handler
    # (tests/app/test_guard.py, test_uploads_are_for_signed_in_researchers_and_the_admin_only).
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    config = make_config(tmp_path_factory.mktemp("bad_input"))
    with running_app(config) as (client, _):
        yield build_world(config, client, tmp_path_factory.mktemp("uploads"))


def _endpoints(client) -> set[str]:
    return set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])


def test_the_table_covers_at_least_25_bad_inputs():
    assert len([case for case in CASES if not case.known_defect]) >= 25
    assert len({case.id for case in CASES}) == len(CASES)


def _params(cases: list[Case]) -> list:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.known_defect)] if case.known_defect else [],
        )
        for case in cases
    ]


@pytest.mark.parametrize("case", _params(CASES))
def test_bad_input_gets_a_clear_message_changes_nothing_and_the_app_keeps_serving(world, case):
    assert case.api_name in _endpoints(world.client), f"the app has no endpoint {case.api_name}"
    follow_up = world.client.predict(world.admin, api_name="/admin_coverage")
    _unthrottled(world.config)
    before = snapshot(world.config)
    with pytest.raises(AppError) as raised:
        world.client.predict(*case.args(world), api_name=case.api_name)
    message = str(raised.value)
    assert re.search(case.message, message), message[:MAX_MESSAGE_CHARS]
    assert len(message) <= MAX_MESSAGE_CHARS, f"{len(message)} characters: {message[:MAX_MESSAGE_CHARS]}"
    assert not re.search(r"<\s*(script|img)", message, re.IGNORECASE), message
    after = snapshot(world.config)
    assert after[1] == before[1]
    # A failed sign-in leaves its record for the throttle (tests/app/test_abuse.py), nothing else.
    assert [row for row in after[0] if "'sign_in_failed'" not in row] == before[0]
    assert world.client.predict(world.admin, api_name="/admin_coverage") == follow_up


def _unthrottled(config) -> None:
    """Each case starts with no failed sign-ins on record: the table has more bad sign-ins
    from one address than the throttle lets through (its own tests are in test_abuse)."""
    db = open_db(config.db_path)
    try:
        with transaction(db):
            db.execute("delete from audit where action = 'sign_in_failed'")
    finally:
        db.close()


SKETCH_CASES = [
    ("photo", r"not line art: .* (colored|mid-grey)"),
    ("truncated", "is a corrupt or truncated image"),
    ("corrupt", "is not an image file"),
    ("non-image", "is not an image file"),
    (
        "bomb",
        r"has [\d,]+ pixels; at most [\d,]+ are allowed \(decoding it could exhaust the server's memory\)",
    ),
    ("svg-image", "the SVG contains an <image> element"),
    ("svg-script", "the SVG contains a <script> element"),
    ("svg-external-use", "the SVG refers to something outside the file .*file:///etc/passwd"),
    ("svg-entity", "the SVG declares XML entities"),
    ("svg-malformed", "the SVG is not well-formed XML"),
]


@pytest.mark.parametrize("case, reason", SKETCH_CASES, ids=[c[0] for c in SKETCH_CASES])
def test_a_bad_sketch_file_is_refused_with_its_reason_and_nothing_is_stored(world, case, reason):
    assert "/sketches_import" in _endpoints(world.client), "the app has no endpoint /sketches_import"
    before = snapshot(world.config)
    table, _ = world.client.predict(
        world.admin, [handle_file(world.files[f"sketch-{case}"])], "apple", True, api_name="/sketches_import"
    )
    [[name, base, result]] = table["data"]
    assert (name.rsplit(".", 1)[0], base) == ("apple", "apple")
    assert result.startswith("refused: ") and re.search(reason, result), result
    assert snapshot(world.config) == before
    assert world.client.predict(world.admin, api_name="/sketches_missing")[0].startswith("**")


def _reference_csv(*rows: list[str], header: list[str] | None = None) -> str:
    head = header if header is not None else [str(i) for i in range(71)]
    return "\n".join(",".join(row) for row in [["", *head], *rows]) + "\n"


def _row(name: str, **cells: str) -> list[str]:
    """A reference row of 71 values, 0.5 but 0.7 for the last, except the `cells` given as
    ``c<index>=value``."""
    values = ["0.5"] * 70 + ["0.7"]
    for key, value in cells.items():
        values[int(key[1:])] = value
    return [name, *values]


# Reference data is imported with ``python -m evaluation score --reference-csv``.
REFERENCE_CASES = [
    ("nan", _reference_csv(_row("apple", c3="nan")), r"row 2 \('apple'\): color 3 is nan"),
    ("infinite", _reference_csv(_row("apple", c70="inf")), "color 70 is inf"),
    (
        "zero-mass",
        _reference_csv(["apple", *["0"] * 71]),
        "all 71 values are zero, so the row has no distribution",
    ),
    ("negative", _reference_csv(_row("apple", c0="-0.1")), r"color 0 is negative \(-0.1\)"),
    (
        "flat",
        _reference_csv(_row("apple", c70="0.5")),
        r"all 71 values are equal \(0.5\), so the row prefers no color",
    ),
    ("not-a-number", _reference_csv(_row("apple", c5="red")), "color 5 is not a number, got 'red'"),
    ("short-row", _reference_csv(_row("apple")[:-1]), "expected 71 values after the concept, got 70"),
    ("duplicate", _reference_csv(_row("apple"), _row("apple")), "concept 'apple' appears twice"),
    ("bad-header", _reference_csv(_row("apple"), header=["a", "b"]), "header must list color indices 0..70"),
    ("empty", "", "is empty; expected a header and one row per concept"),
    # It said "stored 0 reference distributions as 'mine'", then that 'mine' was unknown.
    (
        "header-only",
        _reference_csv(),
        r"^python -m evaluation score: error: ratings.csv has a header but no concept row",
    ),
]


@pytest.mark.parametrize(
    "text, message", [c[1:] for c in REFERENCE_CASES], ids=[c[0] for c in REFERENCE_CASES]
)
def test_bad_reference_data_is_refused_by_name_and_stores_nothing(tmp_path, capsys, text, message):
    from evaluation.__main__ import main

    storage = ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]
    bad, good = tmp_path / "ratings.csv", tmp_path / "good.csv"
    bad.write_text(text, encoding="utf-8")
    good.write_text(_reference_csv(_row("apple")), encoding="utf-8")
    config = make_config(tmp_path).replace(db_path=tmp_path / "db.sqlite")
    db = open_db(config.db_path)
    ensure_schema(db)
    db.close()
    before = snapshot(config)
    assert main(["score", "--reference", "mine", "--reference-csv", str(bad), *storage]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert snapshot(config) == before
    assert main(["score", "--reference", "mine", "--reference-csv", str(good), *storage]) == 2
    assert "stored 1 reference distributions as 'mine'" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name, reason",
    [("absent.csv", "no such file or directory"), ("folder", "is a directory")],
)
def test_a_reference_csv_that_is_no_file_is_refused_naming_the_option(tmp_path, capsys, name, reason):
    """It said "error: No such file or directory: PATH", naming neither the option nor what to give."""
    from evaluation.__main__ import main

    (tmp_path / "folder").mkdir()
    given = tmp_path / name
    db = open_db(tmp_path / "db.sqlite")
    ensure_schema(db)
    db.close()
    storage = ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]
    assert main(["score", "--reference", "mine", "--reference-csv", str(given), *storage]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"python -m evaluation score: error: --reference-csv {shown_path(given)}: {reason}"
    )
    assert "mine" not in _sources(tmp_path / "db.sqlite")


def _sources(path) -> list[str]:
    from storage import human

    db = open_db(path)
    try:
        return human.sources(db)
    finally:
        db.close()


def _copies(path) -> list:
    """Files in Gradio's upload folder with the name and bytes of `path`."""
    from pathlib import Path

    from gradio.utils import get_upload_folder

    data = Path(path).read_bytes()
    return [
        p for p in Path(get_upload_folder()).rglob(Path(path).name) if p.is_file() and p.read_bytes() == data
    ]


def test_an_upload_refused_for_what_it_holds_leaves_no_copy_in_gradios_upload_folder(world, tmp_path):
    """An outside check: a researcher's refused uploads (up to 1 GiB each) stayed in Gradio's
    upload folder, outside the data folder and never swept. An upload whose content was read
    (stored under the data folder, or refused for what it holds) goes; one refused for
    another field stays, for the next press. (Each file's bytes are this run's alone: the
    folder is shared by every Gradio process of the machine.)"""
    import secrets
    import zipfile

    def made(name: str, inner: str | None = None):
        path = tmp_path / name
        if inner is None:
            path.write_bytes(secrets.token_bytes(64))
        else:
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr(inner, secrets.token_hex(16))
        return path

    def imported(path, folder: str = ""):
        return world.client.predict(
            world.tokens["researcher"],
            "",
            handle_file(path),
            folder,
            "tiny-random",
            0.3,
            0.25,
            api_name="/evaluate_import",
        )

    for path, refused in ((made("corrupt.zip"), "zip"), (made("text.zip", "notes.txt"), "no usable image")):
        with pytest.raises(AppError, match=refused):
            imported(path)
        assert _copies(path) == [], path.name
    kept = made("kept.zip", "notes.txt")
    with pytest.raises(AppError, match="give either a zip upload or a folder, not both"):
        imported(kept, "also-a-folder")
    assert len(_copies(kept)) == 1
    sketch = made("apple.png")
    table, _ = world.client.predict(
        world.admin, [handle_file(sketch)], "apple", True, api_name="/sketches_import"
    )
    assert table["data"][0][2].startswith("refused: ")
    assert _copies(sketch) == []


def test_a_sketch_file_of_another_type_is_refused_naming_the_input_and_its_name_shows_inert(world, tmp_path):
    """Gradio's own refusal of a .gif named no input and logged a traceback per call; a file
    name holding U+202E (which shows what follows it reversed) came back in the result table
    as it was (outsider 76)."""
    gif = tmp_path / "mango.gif"
    gif.write_bytes(b"GIF89a" + bytes(32))
    before = snapshot(world.config)
    with pytest.raises(AppError) as raised:
        world.client.predict(world.admin, [handle_file(gif)], "apple", True, api_name="/sketches_import")
    assert str(raised.value) == (
        "`Sketch files` takes files of the types .png, .jpg, .jpeg, .webp, .svg, got 'mango.gif'; "
        "nothing was changed."
    )
    assert snapshot(world.config) == before
    reversed_name = tmp_path / "apple \u202egnp.exe.png"
    reversed_name.write_bytes(b"not an image")
    table, _ = world.client.predict(
        world.admin, [handle_file(reversed_name)], "", True, api_name="/sketches_import"
    )
    [[name, _, result]] = table["data"]
    assert name == "apple \\u202egnp.exe.png" and result.startswith("refused: ")
    assert snapshot(world.config) == before
