"""How far an explicit-color run has got: its job's state and its images judged per model.

The tables of a run not complete cover its judged images alone; `RunStanding.note` says so in
plain words (`evaluation.explicit.views.explicit_report`, the tab, its export and the command
line), and `judged_coverage` lists every model of the run, with those images (outside probe
231: a cancelled run's tables read as finished, a model with nothing judged left out).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import sqlite_utils

from evaluation.explicit import tables
from evaluation.explicit.prompts import TASKS
from evaluation.pipeline import runs
from storage.shown import counted


def systems_in_order(systems) -> list[str]:
    """Color systems in the paper's order (ISCC-NBS L1, L2, L3, CSS), any other after them as given."""
    order = {key: i for i, key in enumerate(("iscc-nbs-l1", "iscc-nbs-l2", "iscc-nbs-l3", "css3"))}
    return sorted(systems, key=lambda key: order.get(key, len(order)))


@dataclass(frozen=True)
class RunStanding:
    """How far an explicit run has got, so that its tables say what they cover (`run_standing`).

    Attributes
    ----------
    run : str
    state : str
        ``"complete"`` when every image of the run is judged; else the state the Evaluate
        tab's runs table shows: its job's here (``"queued"``, ``"running"``, ``"cancelling"``,
        ``"cancelled"``, ``"failed"``, ``"finished"``), ``"running in another process
        (<host:pid>)"``, or ``"stopped"`` when no job of it has run since the server started.
    images, judged : dict of str to int
        Per model of the run, in name order: its images, and those judged (scored, or
        failing presence or masking).
    unjudged : dict of str to tuple of str
        ``"task"`` and ``"system"``: those of the run's prompts with no image judged yet.
    message : str
        A failed job's error, else ``""``.
    failed : int
        Images whose generation failed (`evaluation.pipeline.runs.RunProgress`), and
        ``failure`` the reason most of them gave.
    """

    run: str
    state: str
    images: dict[str, int]
    judged: dict[str, int]
    unjudged: dict[str, tuple[str, ...]]
    message: str = ""
    failed: int = 0
    failure: str = ""

    @property
    def complete(self) -> bool:
        """Every image of the run is judged: its tables are the whole run's."""
        return self.state == "complete"

    def note(self, *, resume: str = "on the Evaluate tab") -> str:
        """What the tables of an unfinished run cover, in plain words; ``""`` when complete.

        E.g. "Run 'xc' is not complete (cancelled): 24 of 116 images judged (tiny-random 24 of
        58, tiny-random-b 0 of 58); no image of task numeric is judged yet. The tables cover
        the judged images alone ...: resume the run on the Evaluate tab to judge the rest."
        `resume` says where a stopped run is resumed.
        """
        if self.complete:
            return ""
        state = self.state
        if state == "failed" and self.message:
            state = f"failed: {self.message}"
        elif state == "finished":
            state = "its job finished"
        per_model = ", ".join(f"{model} {self.judged[model]} of {n}" for model, n in self.images.items())
        text = (
            f"Run {self.run!r} is not complete ({state}): {sum(self.judged.values())} of "
            f"{counted(sum(self.images.values()), 'image')} judged ({per_model})"
        )
        if self.failed:
            text += f"; {counted(self.failed, 'image')} failed to generate ({self.failure})"
        missing = [
            f"{kind}{'s' * (len(names) > 1)} {', '.join(names)}"
            for kind, names in self.unjudged.items()
            if names
        ]
        if missing:
            text += f"; no image of {' or '.join(missing)} is judged yet"
        working = self.state in ("queued", "running") or self.state.startswith("running in another")
        rest = (
            "they fill as its job judges the rest"
            if working
            else f"resume the run {resume} to judge the rest"
        )
        return (
            f"{text}. The tables cover the judged images alone (the others are left out, not "
            f"counted as wrong): {rest}."
        )


def standing_of(db: sqlite_utils.Database, run: str, job=None, owner: str | None = None) -> RunStanding:
    """`RunStanding` of explicit run `run` (not checked: `evaluation.explicit.views.run_standing`
    checks it); `job` and `owner` as there."""
    from evaluation.pipeline.jobs import JobState, process_owner

    # An item whose prompt is not stored (a run made by hand) counts, in no task or system.
    prompts = {p["prompt_id"]: (p["task"], p["system"]) for p in runs.explicit_prompts(db, run)}
    items = pd.DataFrame(
        [
            (i["model"], i["status"] == "segmented", *prompts.get(i["concept"], ("", "")))
            for i in runs.items(db, run)
        ],
        columns=["model", "judged", "task", "system"],
    )
    counts = items.groupby("model")["judged"].agg(["size", "sum"]).astype(int)
    judged = items[items["judged"]]
    unjudged = {
        "task": tuple(t for t in TASKS if t in set(items["task"]) - set(judged["task"])),
        "system": tuple(systems_in_order(sorted(set(items["system"]) - set(judged["system"]) - {""}))),
    }
    complete = not items.empty and len(judged) == len(items)
    job = JobState("idle") if job is None else job
    elsewhere = runs.job_elsewhere(db, run, owner or process_owner())
    # Complete first: with every image judged the tables are the whole run's, whatever the job.
    state = "complete" if complete else job.run_state(False, elsewhere)
    done = runs.run_progress(db, run)
    return RunStanding(
        run,
        state,
        images=counts["size"].to_dict(),
        judged=counts["sum"].to_dict(),
        unjudged=unjudged,
        message=job.message if state == "failed" else "",
        failed=done.failed,
        failure=done.failure,
    )


def judged_coverage(images: pd.DataFrame, standing: RunStanding) -> pd.DataFrame:
    """`tables.coverage_table` of `images`; of an unfinished run (`standing`), with every
    model of the run (one with nothing judged counts 0) and a ``not_judged`` column: the
    run's images not judged yet, which no table counts."""
    table = tables.coverage_table(images)
    if standing.complete:
        return table
    table = table.reindex(pd.Index(list(standing.images), name="model"), fill_value=0).astype(int)
    return table.assign(not_judged=[n - standing.judged[m] for m, n in standing.images.items()])
