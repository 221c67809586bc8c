"""The Study tab: set up and open a pairwise judgment study, follow it, analyse it (Table 3).

Set-up picks the ground truth, the style, the model outputs (model, run, CFG), the number
of concepts, votes per pair, the attention-check rate and a seed; it stores a draft.
Opening freezes the design. The analysis shows Table 3 with bootstrap intervals, the
vote shares per pair, Bradley–Terry strengths by background and the attention-check
flags, each also as a CSV file.

The tab is a `StudyTab`: its handlers are methods that name who may call them
(`app.common.role`) and return ``{part: update}``; `EVENTS` is its whole wiring. Its
open-link section is `app.crowd.CrowdLinks`.
"""

from __future__ import annotations

import datetime as dt

import gradio as gr

from annotation.errors import InvalidInput
from annotation.research.views import evaluated_concepts, pick_source
from annotation.study import design as study
from annotation.study import judging
from annotation.study.design import ModelSource
from app import crowd as crowd_links
from app.common import (
    AppContext,
    empty_note,
    escape,
    id_field,
    live,
    named_table,
    note_area,
    own_session,
    role,
    seed_number,
    visible_to,
    whole_number,
)
from app.guard import exports_folder
from app.landing import current_actor
from app.tabs import SESSION_CHANGE, On, Tab
from evaluation.analysis.figures import table3_figure
from evaluation.analysis.judgment_report import CI, method_note
from evaluation.analysis.judgments import MAX_BOOT
from evaluation.models.generation import STYLES
from storage import human as human_rows
from storage import shown_time
from storage.human import COUNTING_RULE
from storage.human import sources as human_sources
from storage.shown import counted, folded, shown

NAME = "study"
TITLE = "Study"
ROLES = ("researcher",)
ALLOWED = ("researcher", "admin")
STUDY_HEADERS = [
    "id",
    "name",
    "status",
    "pairs",
    "attention_checks",
    "votes",
    "votes_wanted",
    "complete_pairs",
    "participants",
    "created",
]


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Study tab inside the current `gr.Tab`, its open-link section last."""
    StudyTab(ctx, {"session_token": session_token, "tab": tab, **_layout()}).wire()
    crowd_links.build(ctx, session_token, tab)


_TOKEN = ("session_token",)
_CHOICES = (*_TOKEN, "style", "truth", "sources", "preselected")
OFFER = ("truth", "sources", "choices_note", "preselected")
"""What the set-up form offers (`StudyTab.choices`): ground truths, model outputs, a note, and
the outputs it preselected (a `gr.State`, which API clients neither send nor receive)."""
LISTED = ("studies", "design", "message")
"""A study stored or opened: the list of studies, its design and a message."""
ANALYSIS = ("table3", "figure", "bradley_terry", "participants", "pairs", "files", "analyse_note")
"""The analysis (`StudyTab.analyse`), in the order API clients receive it."""
FORM = ("name", "truth", "style", "sources", "n_concepts", "votes", "rate", "trials", "seed")
"""The set-up form, in the order ``study_create`` takes it."""

EVENTS = (
    On(SESSION_CHANGE, "list_on_sign_in", _TOKEN, ("studies",)),
    # The choices are cheap (counted in SQL), so they load when the tab opens and follow the
    # style; Load choices stays for runs that finish while the tab is open. Each keeps what the
    # person chose while it is still offered (outputs the tab preselected are no choice: they
    # follow newer runs); opening the tab also moves the style to one with outputs of two
    # models when the chosen one has none.
    On("load.click", "choices", _CHOICES, OFFER, "choices_note", "study_choices"),
    On("style.input", "choices", _CHOICES, OFFER, "choices_note"),
    On("tab.select", "choices_on_open", _CHOICES, ("style", *OFFER), "choices_note"),
    On("create.click", "create", (*_TOKEN, *FORM), LISTED, "message", "study_create"),
    On(("tab.select", "refresh.click"), "list_studies", _TOKEN, ("studies",), "message", "study_list"),
    On("show.click", "design", (*_TOKEN, "study_id"), ("design",), "message", "study_design"),
    On("open.click", "open_", (*_TOKEN, "study_id"), LISTED, "message", "study_open"),
    On(
        "analyse.click",
        "analyse",
        (*_TOKEN, "study_id", "exclude", "n_boot", "boot_seed"),
        ANALYSIS,
        "analyse_note",
        "study_analyse",
    ),
)
"""The tab's wiring, in the order Gradio registers it (`StudyTab.wire`)."""


class StudyTab(Tab):
    """The Study tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and ``tab`` (the
    `gr.Tab`, whose opening loads the choices and the list of studies).
    """

    EVENTS = EVENTS

    @role(*ALLOWED)
    def choices(
        self,
        db,
        actor,
        style: str,
        truth: str | None = None,
        sources: list[str] | None = None,
        preselected: list[str] | None = None,
    ) -> dict:
        """Ground truths and model outputs that a study in `style` can use, and a note saying
        what is missing; what the person chose stays chosen while it is still offered (outputs:
        while they are of two or more models and not just what the tab `preselected`, else one
        output per model is preselected, `annotation.study.design.default_sources`)."""
        return self.named(**_offer(db, style, truth, sources, preselected))

    @role(*ALLOWED)
    def choices_on_open(
        self,
        db,
        actor,
        style: str,
        truth: str | None,
        sources: list[str] | None,
        preselected: list[str] | None = None,
    ) -> dict:
        """`choices` when the tab opens, first moving the style to one where two models have
        outputs if `style` has fewer (the note says so)."""
        shown = study.style_with_outputs(db, style)
        offer = _offer(db, shown, truth, sources, preselected)
        if shown != style:
            note = offer["choices_note"]
            offer["choices_note"] = (
                f"Style: {STYLES[shown]}, where model outputs are (there are fewer in {STYLES[style]})."
                + (f"  \n{note}" if note else "")
            )
        return self.named(style=gr.Radio(value=shown), **offer)

    @role(*ALLOWED)
    def create(
        self,
        db,
        actor,
        name: str,
        truth: str,
        style: str,
        sources: list[str],
        n_concepts: float,
        votes: float,
        rate: float,
        trials: float,
        seed: float,
    ) -> dict:
        """Store a draft study; returns the study list, its design and a message."""
        study_id = study.create_study(
            db,
            name,
            _typed_sources(db, style, sources or []),
            study.ground_truth_source(db, truth),
            seed=seed_number(seed, "Seed"),
            n_concepts=whole_number(n_concepts, "Concepts", minimum=1),
            style=style,
            votes_per_pair=whole_number(votes, "Votes per pair", minimum=1, maximum=study.MAX_VOTES),
            attention_rate=float(rate),
            trials_per_participant=whole_number(trials, "Trials per participant", minimum=1),
            created_by=actor.pseudonym,
        )
        design = study.study_design(db, study_id)
        k = self.ctx.config.colorings_per_concept
        notes = "".join(
            f"  \n⚠️ {escape(note)}" for note in [*study.design_notes(design), *_thin(db, study_id, k)]
        )
        return self.named(
            studies=_study_rows(db),
            design=design,
            message=f"Draft study {study_id} stored: {counted(design['pairs'], 'pair')} and "
            f"{counted(design['attention_checks'], 'attention check')}. Open it to start the trials.{notes}",
        )

    @role(*ALLOWED)
    def list_studies(self, db, actor) -> dict:
        """Every study with its progress."""
        return self.named(studies=_study_rows(db))

    @own_session
    def list_on_sign_in(self, session_token: str) -> dict:
        """The study list for a researcher or admin who just signed in; empty for anyone else."""
        actor = current_actor(self.ctx, session_token)
        if not visible_to(actor, ROLES):
            return self.named(studies=[])
        with self.ctx.db() as db:
            return self.named(studies=_study_rows(db))

    @role(*ALLOWED)
    def design(self, db, actor, study_id: float) -> dict:
        """The recorded design of a study."""
        return self.named(design=study.study_design(db, whole_number(study_id, "Study id")))

    @role(*ALLOWED)
    def open_(self, db, actor, study_id: float) -> dict:
        """Freeze a draft study and start handing out its pairs."""
        design = study.open_study(db, whole_number(study_id, "Study id"), actor)
        return self.named(
            studies=_study_rows(db),
            design=design,
            message=f"Study {design['id']} is open; its design is frozen.",
        )

    @role(*ALLOWED)
    def analyse(self, db, actor, study_id: float, exclude_flagged: bool, n_boot: float, seed: float) -> dict:
        """Table 3, its figure, Bradley–Terry, flags, pair shares, and the CSV files."""
        study_id = whole_number(study_id, "Study id")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        folder = exports_folder(self.ctx.config.data_dir, f"study-{study_id}", stamp)
        settings = {
            "seed": seed_number(seed, "Bootstrap seed"),
            "n_boot": whole_number(n_boot, "Bootstrap resamples", minimum=1, maximum=MAX_BOOT),
            "exclude_flagged": bool(exclude_flagged),
        }
        tables, paths = judging.analyse_study(db, study_id, folder, **settings)
        return self.named(
            analyse_note=escape(method_note(tables, ci=CI, **settings)),
            table3=tables["table3"].round(4),
            figure=table3_figure(tables["validation"]),
            bradley_terry=tables["bradley_terry"].round(4),
            participants=tables["participants"],
            pairs=tables["pairs"].round(4),
            files=[str(p) for p in paths],
        )


def _thin(db, study_id: int, k: int) -> list[str]:
    """A note when some of the study's ground truths rest on fewer than the `k` colorings a
    concept gets, naming up to five of them."""
    thin = study.thin_ground_truths(db, study_id, k)
    if not thin:
        return []
    named = ", ".join(f"{key} ({counted(n, 'coloring')})" for key, n in thin[:5])
    more = f" and {len(thin) - 5} more" if len(thin) > 5 else ""
    return [
        f"The ground truth of {counted(len(thin), 'concept')} rests on fewer than the {k} colorings each "
        f"concept gets: {named}{more}. Colorings waiting for a recolor, or excluded, do not count, and a "
        "study keeps the ground truth it was made with: for one on more colorings, make the study "
        "again once they are in."
    ]


def _layout() -> dict:
    """The tab's components, by the names `EVENTS` and `StudyTab` use."""
    gr.Markdown(
        "## Set up a study\nThe choices load when the tab opens; press **Load choices** after "
        "runs or ground truths that finished since."
    )
    with gr.Row():
        name = gr.Textbox(label="Name", elem_id="study_name")
        # Labelled as on the Evaluate tab and the Concept browser.
        style = gr.Radio(
            [(STYLES[key], key) for key in study.STYLES],
            value=study.DEFAULT_STYLE,
            label="Style",
            elem_id="study_style",
        )
        truth = gr.Dropdown(
            [],
            label="Ground truth",
            allow_custom_value=True,
            elem_id="study_ground_truth",
        )
        load = gr.Button("Load choices", elem_id="study_load", scale=0)
    gr.Markdown(f"Ground truth *designers*: {COUNTING_RULE}", elem_id="study_counting_rule")
    sources = gr.Dropdown(
        [],
        multiselect=True,
        allow_custom_value=True,
        label=f"Model outputs (model · run · CFG; default {study.DEFAULT_MODELS})",
        elem_id="study_sources",
    )
    choices_note = note_area("study_choices_note")
    # The outputs the tab chose itself: while the person leaves them, newer runs replace them.
    preselected = gr.State([])
    with gr.Row():
        n_concepts = gr.Number(study.DEFAULT_CONCEPTS, label="Concepts", elem_id="study_n_concepts")
        votes = gr.Number(study.DEFAULT_VOTES, label="Votes per pair", elem_id="study_votes")
        rate = gr.Slider(
            0,
            study.MAX_ATTENTION_RATE,
            study.DEFAULT_ATTENTION_RATE,
            step=0.01,
            label="Attention-check share of trials",
            elem_id="study_attention",
        )
        trials = gr.Number(
            study.DEFAULT_TRIALS_PER_PARTICIPANT, label="Trials per participant", elem_id="study_trials"
        )
        seed = gr.Number(0, label="Seed", elem_id="study_seed")
    create = gr.Button("Create draft", variant="primary", elem_id="study_create")

    gr.Markdown("## Studies")
    with gr.Row():
        study_id = id_field("Study id", "study_id", placeholder="from the list of studies")
        refresh = gr.Button("Refresh", elem_id="study_refresh")
        show = gr.Button("Show design", elem_id="study_show")
        open_ = gr.Button("Open (freeze the design)", variant="stop", elem_id="study_open")
    message = live(gr.Markdown(elem_id="study_message"))
    with empty_note("No study yet: create a draft above.", "study_list_empty"):
        studies = named_table("Studies", "study_list", headers=STUDY_HEADERS)
    design = gr.JSON(label="Design", elem_id="study_design")

    gr.Markdown("## Analysis")
    with gr.Row():
        exclude = gr.Checkbox(
            False, label="Leave out participants who failed a check", elem_id="study_exclude_flagged"
        )
        n_boot = gr.Number(1000, label="Bootstrap resamples", elem_id="study_n_boot")
        boot_seed = gr.Number(0, label="Bootstrap seed", elem_id="study_boot_seed")
        analyse = gr.Button("Analyse", variant="primary", elem_id="study_analyse")
    analyse_note = note_area("study_analyse_note")
    with empty_note("**Table 3**: nothing yet: press *Analyse* on a study with votes.", "study_table3_empty"):
        table3 = gr.Dataframe(
            label="Table 3: metric alignment with human judgment", interactive=False, elem_id="study_table3"
        )
    figure = gr.Plot(label="Table 3 with bootstrap intervals", elem_id="study_figure")
    with empty_note("**Bradley–Terry strengths**: nothing yet.", "study_bradley_terry_empty"):
        bt = gr.Dataframe(
            label="Bradley–Terry strength per model (all, design, non-design)",
            interactive=False,
            elem_id="study_bradley_terry",
        )
    with empty_note("**Participants and attention checks**: nothing yet.", "study_participants_empty"):
        participants = gr.Dataframe(
            label="Participants and attention checks", interactive=False, elem_id="study_participants"
        )
    with empty_note("**Vote shares per pair**: nothing yet.", "study_pairs_empty"):
        pairs = gr.Dataframe(label="Vote shares per pair", interactive=False, elem_id="study_pairs")
    files = gr.File(label="CSV downloads", file_count="multiple", elem_id="study_files")

    return {
        "name": name,
        "style": style,
        "truth": truth,
        "load": load,
        "sources": sources,
        "choices_note": choices_note,
        "preselected": preselected,
        "n_concepts": n_concepts,
        "votes": votes,
        "rate": rate,
        "trials": trials,
        "seed": seed,
        "create": create,
        "study_id": study_id,
        "refresh": refresh,
        "show": show,
        "open": open_,
        "message": message,
        "studies": studies,
        "design": design,
        "exclude": exclude,
        "n_boot": n_boot,
        "boot_seed": boot_seed,
        "analyse": analyse,
        "analyse_note": analyse_note,
        "table3": table3,
        "figure": figure,
        "bradley_terry": bt,
        "participants": participants,
        "pairs": pairs,
        "files": files,
    }


def _source_label(source: ModelSource, n: int) -> str:
    """A model output as the *Model outputs* box lists it: model · run · CFG (concepts)."""
    return f"{source.model} · {source.run} · CFG {source.cfg:g} ({counted(n, 'concept')})"


def _typed_sources(db, style: str, entries: list[str]) -> list[ModelSource]:
    """The model outputs of the *Model outputs* box: each a choice's key, or text typed as the
    box lists an output of `style` (its concept count, case and spacing aside), which counted
    as nothing known (outside probe 189: a source typed exactly as listed was refused as "not a
    model source key"). The listed outputs are read only when something was typed."""
    chosen, labels = [], None
    for entry in entries:
        try:
            chosen.append(ModelSource.from_key(entry))
            continue
        except InvalidInput:
            pass
        if labels is None:
            labels = {}
            for source, n in study.available_sources(db, style):
                label = _source_label(source, n)
                for text in (label, label.rsplit(" (", 1)[0]):
                    labels.setdefault(folded(text), source)
        if (source := labels.get(folded(entry))) is None:
            raise InvalidInput(
                f"`sources`: {shown(entry)} is none of the model outputs of this style; pick them from "
                f"the list (model · run · CFG), or press *Load choices* for the newest"
            )
        chosen.append(source)
    return chosen


def _offer(
    db, style: str, truth: str | None, sources: list[str] | None, preselected: list[str] | None
) -> dict:
    """The updates of `OFFER`, by name, for a study in `style` (`StudyTab.choices`)."""
    truths = human_sources(db)
    notes = [study.source_advice(db, style)]
    if truth not in truths:
        choice = pick_source(db, human_rows.DESIGNERS, evaluated_concepts(db))
        truth = choice.source
        notes.append(choice.note)
    offered = study.available_sources(db, style)
    options = [(_source_label(s, n), s.key) for s, n in offered]
    keys = [key for _, key in options]
    chosen = [] if sorted(sources or []) == sorted(preselected or []) else sources
    kept = [key for key in chosen or [] if key in keys]
    if len({ModelSource.from_key(key).model for key in kept}) < 2:
        kept = []  # no study can use it: offer one output per model instead
    # Per model the output with the most concepts the ground truth covers: counting the others
    # too chose an older run over the one just made (outside probe 127).
    covered = study.available_sources(db, style, human_rows.concept_keys(db, truth)) if truth else []
    default = [] if kept else [s.key for s in study.default_sources(covered or offered)]
    return {
        "truth": gr.Dropdown(choices=truths, value=truth),
        "sources": gr.Dropdown(choices=options, value=kept or default, multiselect=True),
        "choices_note": "  \n".join(escape(n) for n in notes if n),
        "preselected": default,
    }


def _study_rows(db) -> list[list]:
    """Every study with its progress, as the list of studies shows it (`STUDY_HEADERS`)."""
    return [
        [
            s["id"],
            s["name"],
            "closed" if s["closed"] else "open" if s["frozen"] else "draft",
            s["pairs"],
            s["attention_checks"],
            s["votes"],
            s["votes_wanted"],
            s["complete_pairs"],
            s["participants"],
            shown_time(s["created"]),
        ]
        for s in study.list_studies(db)
    ]
