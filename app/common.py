"""What every tab shares: the per-request database, the role check, error display.

A tab handler is a method of a tab object (`app.tabs.Tab`) written
``fn(self, db, actor, *inputs)`` and marked `role(*roles)`: the page calls it with the
session token as its first input; the wrapper opens a database connection for this
request (connections are not shared between threads), checks the role with
`annotation.people.accounts.require`, calls ``fn`` and turns any `AnnotationError` or
`ValueError` into a `gr.Error` whose message is shown, HTML-escaped.
Any other exception is a bug: its traceback goes to the log and the person sees a short
message naming only the exception's class (`UNEXPECTED`), never its text or a path.
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import json
import logging
import math
import re
import secrets
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import numpy as np
import sqlite_utils
from gradio.utils import get_upload_folder

from annotation import backup
from annotation.coloring import ground_truth
from annotation.coloring.pool import ColoringPool
from annotation.concepts import sync_concepts
from annotation.errors import AnnotationError, shown
from annotation.export import remove_gone_staging
from annotation.integrity import sweep_orphans
from annotation.people.accounts import LINK_DAYS_RANGE, MAX_LINK_DAYS, MIN_LINK_DAYS, Actor, require
from annotation.people.passwords import ensure_admin_password
from annotation.research.views import LeaderboardCache, keep_leaderboards_fresh, warm_first_leaderboard
from annotation.sketches.library import sync_shipped_sketches
from annotation.study.crowd import forget_addresses
from app.config import AppConfig
from evaluation.analysis.reference import ensure_shipped_reference
from evaluation.concepts import load_concepts
from evaluation.explicit.jobs import ExplicitJobManager
from evaluation.pipeline import planning, ray_executor
from evaluation.pipeline.planning import DeviceInfo
from storage import (
    OPERATOR_WORDS,
    ensure_schema,
    open_db,
    ownership,
    schema_version,
    serving,
    storage_condition,
)
from storage.data_folder import QUARANTINE
from storage.schema import MIGRATIONS, copy_before_upgrade
from storage.settings import setting_once
from storage.shown import counted

NOTE_TABLES = ":is(#designer_table, #expert_grid_table)"
"""The tables whose last column is an expert's recolor note (the designer's submissions, the
expert's grid)."""
NOTE_CELLS = f"{NOTE_TABLES} [role=gridcell]:last-child span.text"
"""An expert's recolor note in a table of `NOTE_TABLES`: `CSS` shows about six lines of it, and
`JS` lets the keyboard scroll the rest."""

ORPHAN_MIN_AGE_S = 300.0
UNEXPECTED = (
    "Something went wrong on the server ({kind}); it has been logged. Please try "
    "again, or tell the study organisers if it happens again."
)
DISK_FULL = (
    "The server's disk is full, so this could not be done (nothing of it was stored; what is on "
    "this page stays). Please tell the study organisers, and try again once they have made room."
)
DISK_ERROR = (
    "The server could not write to its disk (it may be full), so this could not be done "
    "(nothing of it was stored; what is on this page stays). Please tell the study organisers, "
    "and try again later."
)
DATABASE_BUSY = (
    "The database is busy (a backup, a restore or another long write holds it), so this could "
    "not be done (nothing of it was stored; what is on this page stays). Please try again in a minute."
)
_LOG = logging.getLogger(__name__)
MAX_WHOLE = 10**18 - 1  # within SQLite's 64-bit integers, so an id never overflows a query
# A field that carries the page's state (a task's id or JSON, the session token) takes the
# class `PLUMBING`: Gradio 6 shows a ``visible="hidden"`` component that sits in a tab.
PLUMBING = "plumbing"
# Primary buttons and the selected tab in a darker orange (Tailwind's orange-700): Gradio's
# orange-500 under white text is 2.8:1, below WCAG AA's 4.5:1; this is 5.2:1. The red ones
# (*Inconsistent*, *Close account*) in red-700, 6.5:1 (red-500 was 3.8:1: outsider 95).
# A table inside `empty_note` shows its note, not bare headers, while it has no rows
# (Gradio marks an empty table's container ``no-rows``). Keyboard focus shows as a 3 px
# blue ring on whatever holds it (a heading or a message the page moved it to, the picker):
# Gradio's 1 px grey outline was hardly visible on the orange buttons.
CSS = (
    """
:root, .gradio-container {
  --button-primary-background-fill: #c2410c; --button-primary-background-fill-hover: #9a3412;
  --button-primary-border-color: #c2410c; --button-primary-border-color-hover: #9a3412;
  --color-accent: #c2410c;
  --button-cancel-background-fill: #b91c1c; --button-cancel-background-fill-hover: #991b1b;
  --button-cancel-border-color: #b91c1c; --button-cancel-border-color-hover: #991b1b;
}
.plumbing { display: none !important; }
.visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
*:focus-visible { outline: 3px solid #0969da !important; outline-offset: 2px; }
.empty-aware:has(.table-container:not(.no-rows)) > .empty-note { display: none !important; }
.empty-aware .table-container.no-rows .table-wrap { display: none; }
.empty-aware > .empty-note { color: var(--body-text-color-subdued); font-style: italic; }
button[aria-disabled=true] { opacity: .5; }
/* A read-only table measures its columns on a hidden row of each column's longest text: a text asks
   for at most 14em, so the ten columns of the Study tab's list fit 1400 px beside a long name (a table
   with room to spare still widens it) and wraps, anywhere: whole, never cut; a number is measured whole.
   Table 3's notes (its last column) take 60em: at 14em each row was ~200 px tall (outside probe 132). */
[aria-readonly=true] .sizing-body .cell-wrap { max-width: 14em; }
#study_table3 .sizing-body td:last-child .cell-wrap { max-width: 60em; }
[aria-readonly=true] .body-cell span.text { white-space: normal; overflow-wrap: anywhere; }
/* An expert's recolor note (up to 2,000 characters, the last column of the designer's submissions and
   of the expert's grid) takes 40em and shows about six lines, scrolling the rest: one of 1,990 made its
   row 1,843 px tall, the row's other cells out of the table's view (outside probe 207). Names stay
   whole (a name is at most 160 characters). */
"""
    + f"""{NOTE_TABLES} .sizing-body td:last-child .cell-wrap {{ max-width: 40em; }}
{NOTE_CELLS} {{
  display: block; max-height: 8em; overflow-y: auto;
}}
"""
    + """/* A search that matches nothing says so in its open list (it showed an empty list, then put the last
   choice back without a word: outside probe 212). */
.choice-search ul.option-list:not(:has(li))::after {
  content: "Nothing matches what is typed: type fewer letters, or check the spelling.";
  display: block; padding: var(--size-2) var(--size-3); color: var(--body-text-color-subdued); font-style: italic;
}
/* A table in Markdown or HTML (the Runs table, the leaderboards) scrolls sideways within its column:
   on a phone its last columns ran off a page that does not scroll sideways (outside probe 142). */
.prose table { display: block; max-width: 100%; overflow-x: auto; }
"""
)
LIVE = "cc-live"
"""The class of a Markdown whose changes screen readers read out (`live`)."""
# Run once on page load (`launch(js=...)`): clicking into a `ChoiceSearch` selects its text,
# so what is typed replaces the choice and searches, rather than being appended to it. And
# each Markdown marked `live` becomes a polite live region as it appears (tabs render theirs
# when they are shown), and the charts' tool buttons (zoom, pan, download: 40 of a Judge
# trial's 58 tab stops) leave the Tab order, checked at most every 200 ms however much the
# page changes. The tools stay usable by pointer. Each chart becomes an image whose text
# alternative (`_DESCRIBE_JS`) says what it shows: its title, its axes, and for each trace
# what a reader needs first (a bar chart's five highest bars, named; a line's values; a
# scatter's range).
_DESCRIBE_JS = """
  // A title is text or {text, font...}; an object without text says nothing.
  const plain = (t) => String((t && typeof t === 'object' ? t.text : t) ?? '')
    .replace(/<[^>]*>/g, ' ').replace(/\\s+/g, ' ').trim();
  const num = (v) => Number(v).toLocaleString('en', { maximumSignificantDigits: 3 });
  const show = (v) => (typeof v === 'number' ? num(v) : plain(v));
  const describe = (gd) => {
    const layout = gd.layout || {};  // the one the figure gave (the full one has placeholders)
    const label = gd.closest('.block')?.querySelector('[data-testid="block-label"]')?.textContent;
    const parts = [plain(layout.title) || plain(label) || 'Chart'];
    const axis = (id, side) => plain(layout[`${side}axis${(id || side).slice(1)}`]?.title);
    const axes = [axis('y', 'y'), axis('x', 'x')].filter(Boolean);
    if (axes.length) parts.push(axes.join(' by '));
    // A reference line (y = x) draws no data: its hover is off.
    const traces = (gd._fullData || []).filter((t) => t.visible === true && t.hoverinfo !== 'skip');
    let points = 0;
    for (const t of traces.slice(0, 8)) {
      const across = t.orientation === 'h';
      const values = Array.from((across ? t.x : t.y) || [], Number);
      const labels = Array.from((across ? t.y : t.x) || []);
      points += values.length;
      let said;
      if (typeof t.meta?.alt === 'string') {  // the figure's own words (a strip of named swatches)
        said = t.meta.alt;
      } else if (t.type === 'bar') {
        const named = (i) => {
          const extra = t.customdata?.[i];  // a UW-71 bar's name (evaluation.analysis.figures)
          if (Array.isArray(extra) && typeof extra[4] === 'string') return `${labels[i]} ${extra[4]}`;
          const text = Array.isArray(t.text) ? t.text[i] : '';  // a bar's own words (a color's name)
          return text ? `${show(labels[i])} ${plain(text)}` : show(labels[i]);
        };
        // Of a distribution's many bars the empty ones say nothing; of a few, a 0 is a result.
        const top = values.map((v, i) => [v, i]).filter(([v]) => Number.isFinite(v) && (v !== 0 || values.length <= 12))
          .sort((a, b) => b[0] - a[0]).slice(0, 5);
        said = `${values.length} bars` + (top.length ? `, highest: ${top.map(([v, i]) => `${named(i)} ${num(v)}`).join(', ')}` : '');
      } else if (t.type === 'heatmap') {
        const cells = (t.z || []).flatMap((row, r) => Array.from(row || [], (v, c) => [Number(v), r, c]))
          .filter(([v]) => v > 0).sort((a, b) => b[0] - a[0]).slice(0, 5);  // its largest cells, named
        said = `a grid of ${t.z?.length ?? 0} rows` + (cells.length ? `, largest: ${cells.map(([v, r, c]) => `${show(t.y?.[r] ?? r)} by ${show(t.x?.[c] ?? c)} ${num(v)}`).join(', ')}` : '');
      } else if (t.type === 'histogram') {
        said = `${(t.x || t.y || []).length} values`;
      } else if (values.length && values.length <= 8) {
        said = values.map((v, i) => `${show(labels[i])} ${num(v)}`).join(', ');
      } else {
        const finite = values.filter(Number.isFinite);
        said = `${values.length} points` + (finite.length ? `, from ${num(finite.reduce((a, b) => Math.min(a, b)))} to ${num(finite.reduce((a, b) => Math.max(a, b)))}` : '');
      }
      const other = t.yaxis && t.yaxis !== 'y' && axis(t.yaxis, 'y') !== axes[0] ? axis(t.yaxis, 'y') : '';  // a second panel's own axis
      const name = [/^trace \\d+$/.test(t.name) ? '' : plain(t.name), other && `(${other})`].filter(Boolean).join(' ');
      parts.push(name ? `${name}: ${said}` : said);
    }
    if (!points) {  // an empty chart says why in its note
      const notes = (layout.annotations || []).map((n) => plain(n.text)).filter(Boolean);
      parts.push(notes.length ? notes.join(' ') : 'no data');
    }
    return parts.join('; ');
  };
"""


def compact_js(js: str) -> str:
    """`js` without its indentation, blank lines and comments (two spaces, then ``//``): it
    goes into every page, which issue 28 keeps under 300 kB."""
    lines = (line.split("  // ", 1)[0].strip() for line in js.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


def compact_css(css: str) -> str:
    """`css` without its comments and the spaces around braces and semicolons (kept between
    words, where a space is a descendant selector); for the page, as `compact_js`."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)
    css = re.sub(r"\s*([{};])\s*", r"\1", re.sub(r"\s+", " ", css)).strip()
    css = re.sub(r"([{;][-\w]+): ", r"\1:", css)  # a declaration's "name: value"
    return css.replace("}}", "} }")  # never a Handlebars close in gr.HTML's css_template


def compact_markup(html: str) -> str:
    """`html` without its indentation and blank lines (a newline stays where they were: what
    separates inline elements is unchanged); for the page, as `compact_js`."""
    return "\n".join(line.strip() for line in html.splitlines() if line.strip())


ONE_CLICK = "cc-one-click"
"""The class of a button whose double click counts once (`JS` drops the second click, the
browser's `detail` 2 or more): a submission, a vote. The first click answers and shows the
next sketch or coloring; a second would answer that one, unseen."""

ANSWERS = "cc-answers"
"""The class prefix of a button that answers what the page shows (a vote on the coloring
shown): with the class ``cc-answers--<elem_id>`` (`answers`), `JS` keeps, at the moment of
the click, the value that element's rendered text marks (`shown_mark`), and `answers_js`
sends it; a click in the first `ANSWER_DWELL_MS` after the mark appeared is dropped. Gradio
holds a click that comes while the previous answer's events still run and sends the values
of the page's state when it runs it, and that state changes before the text shows it: a
vote clicked on one coloring went to the next, which the expert never saw."""


def answers(shown_elem_id: str) -> list[str]:
    """The class of a button whose click answers what element `shown_elem_id` shows (a
    Markdown whose text holds a `shown_mark`)."""
    return [f"{ANSWERS}--{shown_elem_id}"]


SHOWN_PREFIX = "cc-shown-"
ANSWER_DWELL_MS = 600
"""An answer click (or key) within this long after what it answers appeared is dropped: a
participant's second press 0.3-0.6 s after the first was stored as an answer to the next
trial, its text just shown, its charts still drawing. Until this time has passed the
answer buttons are dimmed and ``aria-disabled`` (an outside tester's press then looked
taken); then the page marks what it shows ``data-cc-ready`` (what browser tests wait for)."""


CHART_WAIT = "cc-wait"
"""The class of a chart an answer rests on. Plotly loads with the first chart (2.7 s after
the trial's text on an outside tester's busy machine): until every such chart shown has drawn
once, or `CHART_WAIT_MS` have passed, `JS` keeps the answer buttons dimmed and drops their
presses, as in their first `ANSWER_DWELL_MS`, and marks the text ``data-cc-dwelt`` once those
are over. A trial once answerable stays so: a chart's later redraw does not take it back (that
dropped a press the page had shown as taken)."""

CHART_WAIT_MS = 15_000
"""How long at most a chart that does not draw holds a trial's answer (a broken chart must not
leave a person with buttons that never take one)."""


NUMBER_COMMA = (
    "A number takes a point for decimals (0.5), no thousands separator: press Backspace, type it again"
)
"""What a number field says when a comma is typed or pasted into it, or it is left holding a
thousands point (``1.000``): `JS` empties it."""


def shown_mark(value: int) -> str:
    """An invisible mark of `value` (a whole number) in a Markdown text: what the click of
    an `answers` button answers, read from the text as rendered (Gradio's sanitiser keeps
    an ``id``, not a ``data-`` attribute)."""
    return f'<span hidden id="{SHOWN_PREFIX}{int(value)}"></span>'


def answers_js(button_elem_id: str, position: int = 1) -> str:
    """Browser code (an `app.tabs.On` row's ``js``) that puts into the event's input at
    `position` (its value answered, e.g. a task id) the value the page showed when button
    `button_elem_id` was clicked (`ANSWERS`; ``ccAnswer`` is `JS`'s), not the one its state
    holds when Gradio runs the event; the other inputs pass unchanged."""
    return f"(...v) => ccAnswer(v, {json.dumps(button_elem_id)}, {int(position)})"


JS = compact_js(
    """
() => {"""
    + _DESCRIBE_JS
    + f"""
  const mark = () => {{
    marking = false;
    document.querySelectorAll('.{LIVE} [data-testid="markdown"]:not([aria-live])').forEach((text) => {{
      text.setAttribute('role', 'status');
      text.setAttribute('aria-live', 'polite');
    }});
    document.querySelectorAll('.modebar-btn:not([tabindex])').forEach((tool) => tool.setAttribute('tabindex', '-1'));
    // A note longer than its cell shows (`CSS`: six lines) takes the keyboard's focus, so
    // that the arrow and page keys scroll it (outside probe 209: only a mouse could).
    document.querySelectorAll('{NOTE_CELLS}').forEach((text) => {{
      if (text.tabIndex !== 0 && text.scrollHeight > text.clientHeight + 1) {{
        text.tabIndex = 0;
        text.title = 'The whole note: scroll it with the arrow keys';
      }}
    }});
    // A radio group is read out with its question (Gradio's label is a plain span beside it),
    // and a chosen item's remove button with its item ("Remove apple", not "Remove 573").
    document.querySelectorAll('.block .wrap:has(> label > input[type="radio"]):not([role])').forEach((group) => {{
      const label = group.closest('.block').querySelector('[data-testid="block-info"]');
      group.setAttribute('role', 'radiogroup');
      if (label) group.setAttribute('aria-labelledby', label.id ||= `cc-label-${{++labelled}}`);
    }});
    // One name per group (Gradio names each radio alone): one Tab stop, arrow keys choose.
    // Gradio names them again when the choice changes (an attribute change: watched below).
    document.querySelectorAll('[role="radiogroup"]').forEach((group) => {{
      const name = (group.dataset.ccName ||= `cc-radio-${{++labelled}}`);
      group.querySelectorAll('input[type="radio"]').forEach((radio) => {{ if (radio.name !== name) radio.name = name; }});
    }});
    // A block label's icon and a dropdown's arrow are decoration (read as unnamed images), and a gallery's thumbnails
    // say whose they are: "Left images: image 1 of 2", not "Thumbnail 1 of 2" in both (probe 211).
    document.querySelectorAll('[data-testid="block-label"] svg:not([aria-hidden]), svg.dropdown-arrow:not([aria-hidden])').forEach((icon) => icon.setAttribute('aria-hidden', 'true'));
    document.querySelectorAll('button.thumbnail-item[aria-label^="Thumbnail"]').forEach((thumb) => {{
      const label = thumb.closest('.block')?.querySelector('[data-testid="block-label"]')?.textContent.trim();
      if (label) thumb.ariaLabel = `${{label}}: ${{thumb.ariaLabel.replace('Thumbnail', 'image')}}`;
    }});
    document.querySelectorAll('.token [role="button"][title^="Remove"]').forEach((remove) => {{
      const name = remove.closest('.token').querySelector('span')?.textContent.trim();
      if (name && remove.title !== `Remove ${{name}}`) remove.title = remove.ariaLabel = `Remove ${{name}}`;
    }});
    document.querySelectorAll('.js-plotly-plot').forEach((chart) => {{
      let said;
      try {{ said = describe(chart); }} catch (error) {{ said = 'Chart'; }}  // never stops the marking
      if (chart.getAttribute('aria-label') !== said) {{
        chart.setAttribute('role', 'img');
        chart.setAttribute('aria-label', said);
      }}
      // The image's label says it all: its drawing and tools are not read out one by one.
      chart.querySelectorAll('.svg-container, .modebar-container').forEach((inner) => inner.setAttribute('aria-hidden', 'true'));
    }});
    // Focus on a control the action hid, disabled or drew anew (a last vote, a sign-in)
    // falls to the page's top, where a screen reader starts over: it goes to the nearest
    // text shown, in the nearest box of the control that is still there.
    const h = held?.[0];
    if (document.activeElement === document.body && h && (h.disabled || !h.offsetParent)) {{
      const shown = (s, box) => [...box.querySelectorAll(s)].find((e) => e.offsetParent && e.textContent.trim());
      for (const box of held) {{
        const to = box.isConnected && (shown('[role="status"]', box) || shown('.prose', box));
        if (to) {{ to.tabIndex = -1; to.focus(); held = null; break; }}
      }}
    }}
  }};
  let marking = false, labelled = 0, held = null;
  document.addEventListener('focusin', (e) => {{ held = e.composedPath().slice(0, -1); }});
  // A control disabled last (the vote buttons after the last vote) changes no node the
  // observer below sees: its focus falling to the page's top asks for the marking too.
  document.addEventListener('focusout', (e) => {{ if (!e.relatedTarget && !marking) {{ marking = true; setTimeout(mark, 200); }} }});
  const markOf = (b) => document.querySelector(`#${{b.className.match(/{ANSWERS}--(\\S+)/)?.[1]}} [id^="{SHOWN_PREFIX}"]`);
  const seen = {{}}, ready = {{}}, bound = {{}};
  const drawn = () => [...document.querySelectorAll(".{CHART_WAIT}")].every((c) => !c.offsetParent || c.querySelector(".main-svg"));
  const stamp = () => document.querySelectorAll('[class*="{ANSWERS}--"]').forEach((b) => {{
    const m = markOf(b), left = m ? (seen[m.id] ??= Date.now()) + {ANSWER_DWELL_MS} - Date.now() : 0;
    if (m && left <= 0) {{
      m.setAttribute("data-cc-dwelt", "");
      ready[m.id] ||= drawn() || left <= -{CHART_WAIT_MS};
      bound[m.id] ??= setTimeout(stamp, left + {CHART_WAIT_MS} + 5);
    }}
    const wait = left > 0 || !!m && !ready[m.id];
    b.ariaDisabled = wait || null;  // shown dimmed, and read out so, while it takes no answer
    if (left > 0) setTimeout(stamp, left + 5);
    else if (!wait) m?.setAttribute("data-cc-ready", "");
  }});
  window.ccAnswer = (values, id, at) => {{
    const kept = document.getElementById(id)?.dataset.answers;
    if (kept) values[at] = +kept;
    return values;
  }};
  window.ccFocusNext = (selector) => requestAnimationFrame(() => {{
    const held = document.activeElement;
    if (held && held !== document.body && held.offsetParent && held.tabIndex >= 0) return;
    [...document.querySelectorAll(selector)].find((e) => e.offsetParent)?.focus();
  }});
  new MutationObserver((changes) => {{
    // A group's name put back at once: before the next key press, which it would miss.
    changes.forEach(({{ type, target }}) => {{
      const name = type === 'attributes' && target.closest('[role="radiogroup"][data-cc-name]')?.dataset.ccName;
      if (name && target.name !== name) target.name = name;
    }});
    stamp();
    if (!marking) {{ marking = true; setTimeout(mark, 200); }}
  }}).observe(document.body, {{ childList: true, subtree: true, attributes: true, attributeFilter: ['name'] }});
  mark();
  // A comma typed or pasted into a number field was dropped ("0,15" read 15), and a
  // thousands point read as a decimal one ("1.000" read 1): the field is emptied, says why
  // and takes no more characters until Backspace or Delete.
  for (const kind of ["keydown", "paste", "focusout"]) document.addEventListener(kind, (event) => {{
    const t = event.target, typed = event.key ?? event.clipboardData?.getData("text") ?? "";
    if (t.type != "number") return;
    const thousands = (kind == "focusout" || typed == "Enter") && /^-?[1-9]\\d{{0,2}}(\\.\\d{{3}})+$/.test(t.value);
    if (typed.includes(",") || thousands) {{
      t.dataset.comma = 1;
      t.value = "";
      t.dispatchEvent(new Event("input", {{ bubbles: true }}));
    }} else if (/^(Backspace|Delete)$/.test(typed)) delete t.dataset.comma;
    t.setCustomValidity(t.dataset.comma ? "{NUMBER_COMMA}" : "");
    if (t.dataset.comma && (typed.length == 1 || typed == "Enter" || kind == "paste" || thousands)) {{
      event.preventDefault();
      t.reportValidity();
    }}
  }}, true);
  // The table's own keys (move between cells) would take those that scroll a note (`mark`).
  document.addEventListener("keydown", (event) => {{
    if (event.target.matches?.('{NOTE_CELLS}') && /^(Arrow(Up|Down)|Page(Up|Down)|Home|End| )$/.test(event.key)) event.stopPropagation();
  }}, true);
  document.addEventListener("focusin", (event) => {{
    const input = event.target;
    if (input.matches?.(".choice-search input")) setTimeout(() => input.select(), 0);
  }});
  document.addEventListener("click", (event) => {{
    const b = event.target.closest?.('[class*="{ANSWERS}--"]'), m = b && markOf(b);  // m: just shown?
    if (event.detail > 1 && event.target.closest?.(".{ONE_CLICK}") || m && !m.hasAttribute("data-cc-ready")) {{
      event.stopPropagation();
      event.preventDefault();
    }} else if (b) b.dataset.answers = m ? m.id.slice({len(SHOWN_PREFIX)}) : "";
  }}, true);
}}
"""
)


ROLE, OWN_SESSION, PUBLIC, UI = "role", "own session", "public", "ui"
BROWSER_STATE_KEY = "colorconcept-browser-state"
"""What `gr.BrowserState` encrypts the page's local storage with. Gradio sends this key to
every visitor in the page's configuration, so it is public by design, not a secret: what
keeps the session token in local storage from others is the browser's same-origin rule,
as for the session cookie (docs/security.md)."""


@dataclass(frozen=True)
class Access:
    """Who may run a function wired to the page, recorded on the function (``cc_access``).

    Gradio runs any function of the page for whoever names its index, hidden ("private")
    ones too, so `audit_functions` refuses to build a page with a function that has none.

    Attributes
    ----------
    kind : str
        `ROLE`: checks the caller's session and role before anything else (`role`);
        `OWN_SESSION`: reads only the caller's own session to choose what to show, and
        writes nothing; `PUBLIC`: signing in or out (throttled, `app.landing`); `UI`:
        computes UI updates from its inputs alone, touching no data.
    roles : tuple of str
        For `ROLE`, the roles allowed (the admin always is).
    """

    kind: str
    roles: tuple[str, ...] = ()


def _marked(kind: str):
    def mark(fn: Callable) -> Callable:
        fn.cc_access = Access(kind)
        return fn

    return mark


ui_only = _marked(UI)
"""Mark a function that computes UI updates from its inputs alone (no data read or written)."""
own_session = _marked(OWN_SESSION)
"""Mark a function that reads only the caller's own session to choose what to show."""
public = _marked(PUBLIC)
"""Mark a sign-in or sign-out function: anyone may call it (`app.landing` throttles)."""


def same_access(fn: Callable, like: Callable) -> Callable:
    """`fn`, a thin wrapper around `like`, marked with `like`'s `Access`."""
    fn.cc_access = like.cc_access
    return fn


def audit_functions(demo: gr.Blocks) -> None:
    """Refuse a page with a function that does not say who may run it (`Access`).

    Raises
    ------
    UnguardedFunction
        Naming every such function, at build time, before anything is served.
    """
    missing = sorted(
        {
            getattr(block_fn.fn, "__qualname__", repr(block_fn.fn))
            for block_fn in demo.fns.values()
            if block_fn.fn is not None and not isinstance(getattr(block_fn.fn, "cc_access", None), Access)
        }
    )
    if missing:
        raise UnguardedFunction(
            "these page functions say nothing of who may run them (wrap each with "
            f"app.common.role, or mark it ui_only, own_session or public): {', '.join(missing)}"
        )


class UnguardedFunction(RuntimeError):
    """A function is wired to the page without an `Access`."""


#: Seconds `AppContext.close` waits for each service thread to end.
CLOSE_TIMEOUT_S = 30.0


class _Running:
    """The services an `AppContext` starts (`AppContext.start`) and stops (`AppContext.close`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.device_lock = threading.Lock()  # held while torch is imported (`AppContext.device`)
        self.started = self.closed = False
        self.stop = threading.Event()  # ends the leaderboard refresher
        self.device: DeviceInfo | None = None
        self.jobs: ExplicitJobManager | None = None
        self.threads: list[threading.Thread] = []
        self.ray_before = False  # a Ray connection the process held before `start`: not ours to end


@dataclass(frozen=True)
class AppContext:
    """What `build_app` hands to every tab, and the services of one app.

    The config, this database's instance secret (never sent to the page; `instance_name`
    is its public digest), the coloring pool (None when ``config.workers`` is 0) and the
    leaderboard cache are made by `prepare`; `start` (called by `build_app`) makes the
    evaluation job manager (`jobs`) and starts the threads (the pool's warm-up, the
    leaderboard refresher); `close` (run when the app's Blocks are closed) stops them
    all. Tabs take these services from here and never make their own, so two apps in one
    process share none.

    `rng` is the app's one random generator, made from ``config.seed`` (unseeded when it
    is None): every handler that draws (assignments, vote queues, trial orders, sketch
    candidates) draws from it, so a seeded app replays the same calls the same way.
    """

    config: AppConfig
    instance_secret: str
    pool: ColoringPool | None = None
    leaderboards: LeaderboardCache = field(default_factory=LeaderboardCache)
    # Shared by the request threads: a Generator's draws hold its bit generator's lock.
    rng: np.random.Generator | None = field(default=None, repr=False, compare=False)
    _running: _Running = field(default_factory=_Running, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rng is None:
            object.__setattr__(self, "rng", np.random.default_rng(self.config.seed))

    @property
    def instance_name(self) -> str:
        """A short public name of this database (e.g. part of every canvas key)."""
        return ownership.instance_name(self.instance_secret)

    @classmethod
    def prepare(cls, config: AppConfig) -> AppContext:
        """Create or migrate the database, load concepts, make sure an admin password exists.

        Raises
        ------
        StartRefused
            If a condition of the machine (a full disk, a failed write, a database locked by
            another process or gone from its path) stops the work once the database is open;
            the message (`start_refusal`) says what stays and what to do.
        """
        # Before anything is written: another database's data folder would be swept empty.
        if str(config.db_path) != ":memory:" and (
            refusal := ownership.foreign_refusal(config.db_path, config.data_dir)
        ):
            raise StartRefused(refusal)
        # For the life of the process: `restore` refuses while it is held (storage.serving).
        serving.hold_shared(config.db_path)
        if str(config.db_path) != ":memory:":
            for line in backup.leftovers(config.db_path):
                _LOG.warning(line)
        # A database that cannot be opened at all is said by app.py (`storage.unwritable`).
        with cls._open(config, create=True) as db:
            upgraded_from = None
            try:
                found = schema_version(db)
                ensure_schema(db)
                upgraded_from = found if 0 < found < len(MIGRATIONS) else None
                secret = _prepare_rows_and_files(db, config)
            except (OSError, sqlite3.Error) as error:
                refusal = start_refusal(config, error, upgraded_from=upgraded_from)
                if refusal is None:
                    raise
                raise StartRefused(refusal) from None
        from app.guard import DOWNLOAD_KINDS, DOWNLOADS, prune_downloads  # the guard imports this module

        prune_downloads(config.data_dir)  # invite lists and backups left by earlier days
        for kind in DOWNLOAD_KINDS:
            # Half-written exports and backups of a killed app of this machine go at once.
            for stale in remove_gone_staging(Path(config.data_dir) / DOWNLOADS / kind, depth=2):
                _LOG.warning(
                    "removed %s, left by a process of this machine that was killed while writing it", stale
                )
        pool = ColoringPool(config.workers) if config.workers else None
        return cls(config, secret, pool)

    def start(self) -> None:
        """Make the job manager and start the service threads (once; `build_app` calls it).

        Raises
        ------
        RuntimeError
            If this context was closed.
        """
        running = self._running
        with running.lock:
            if running.closed:
                raise RuntimeError("this AppContext was closed; prepare a new one")
            if running.started:
                return
            running.started = True
            running.ray_before = ray_executor.connected()
            if self.pool is not None:
                # The workers start (and import the submit path) beside the server's own
                # start; a submission that comes first waits for them. A start refused later
                # (a secret in a served folder) is not held up by them.
                running.threads.append(_thread(self._warm, "warm-coloring-pool"))
            # The leaderboard the tab opens on is computed once the data is quiet, and tables
            # someone has opened are recomputed in the background once a change has settled.
            concepts = load_concepts()
            running.threads.append(
                keep_leaderboards_fresh(
                    self.config.db_path,
                    self.db,
                    concepts,
                    stop=running.stop,
                    cache=self.leaderboards,
                    first=functools.partial(
                        warm_first_leaderboard, concepts=concepts, cache=self.leaderboards
                    ),
                )
            )

    def _warm(self) -> None:
        try:
            self.pool.warm()
        except Exception:
            if not self._running.closed:  # `close` shut the pool down under it: expected
                _LOG.exception("warming the coloring pool failed")

    @property
    def device(self) -> DeviceInfo:
        """Where evaluation jobs run, found when first asked for after `start`.

        Finding it imports torch (1.5 CPU-s of a 5 CPU-s start here), which only researchers
        need: the app starts without it (issue 28: a start on a busy machine).
        """
        running = self._started()
        with running.device_lock:
            if running.device is None:
                running.device = planning.detect_device()
            return running.device

    @property
    def jobs(self) -> ExplicitJobManager:
        """The evaluation job manager of this app: implicit and explicit runs, one queue
        (made when first asked for after `start`, on `device`)."""
        running = self._started()
        device = self.device.device
        with running.lock:
            if running.jobs is None:
                # One queue for both modes: explicit runs go through generate -> score.
                running.jobs = ExplicitJobManager(
                    functools.partial(self._open, self.config), self.config.data_dir, device=device
                )
                if running.closed:  # asked for after `close`: it refuses work, as if `close` had stopped it
                    running.jobs.close(0)
            return running.jobs

    @property
    def threads(self) -> list[threading.Thread]:
        """The service threads `start` started (ended ones too)."""
        return list(self._running.threads)

    def _started(self) -> _Running:
        if not self._running.started:
            raise RuntimeError("the app's services are not started (AppContext.start)")
        return self._running

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stop every service: no new evaluation job, running ones asked to stop after their
        batch, the refresher and warm-up ended, the coloring workers shut down. Waits at most
        `timeout_s` for each thread; closing twice does nothing more.
        """
        running = self._running
        with running.lock:
            if running.closed:
                return
            running.closed = True
        running.stop.set()
        if running.jobs is not None and not running.jobs.close(timeout_s):
            _LOG.warning("an evaluation job was still in its batch after %.0f s", timeout_s)
        if self.pool is not None:
            self.pool.close()  # a warm-up under way fails at once (`_warm` stays silent)
        if not running.ray_before and ray_executor.connected():
            # The local cluster a job or *Check cluster* started goes with the app: left to
            # Ray's exit handler, a SIGTERM left its agents running and the app exited on
            # SIGABRT (an outside check).
            ray_executor.shutdown()
        for thread in running.threads:
            thread.join(timeout_s)
            if thread.is_alive():
                _LOG.warning("service thread %s did not end within %.0f s", thread.name, timeout_s)

    @contextlib.contextmanager
    def db(self) -> Iterator[sqlite_utils.Database]:
        """A connection for the current request; closed when the block ends."""
        with self._open(self.config) as db:
            yield db

    @staticmethod
    @contextlib.contextmanager
    def _open(config: AppConfig, *, create: bool = False) -> Iterator[sqlite_utils.Database]:
        # Only the start makes the database: a request finding it gone must not start an
        # empty one in its place (every session then read as revoked).
        db = open_db(config.db_path, create=create)
        try:
            yield db
        finally:
            db.close()


class StartRefused(RuntimeError):
    """A condition of the machine stopped the app's start while it prepared; the message
    (`start_refusal`) says what stays and what to do."""


def _prepare_rows_and_files(db: sqlite_utils.Database, config: AppConfig) -> str:
    """The start's work on the database `db` at the current schema and on the data folder
    (`AppContext.prepare`); the instance secret."""
    secret = _instance_secret(db)
    if str(config.db_path) != ":memory:":
        ownership.claim(config.data_dir, config.db_path, ownership.instance_name(secret))
    # Files a killed writer left without a row; the age margin spares files that a
    # concurrent process (an evaluation run from the CLI) is about to commit.
    swept = sweep_orphans(db, config.data_dir, min_age_s=ORPHAN_MIN_AGE_S)
    # What a run killed mid-write, or a restore, left: said, or the log showed no sign of it.
    if swept:
        _LOG.warning(
            "moved %s no row names into %s/ (files over %d min old; a younger one waits for "
            "a later start, so they may date from before the last run): a write stopped "
            "part-way (a run was killed or the machine went down: nothing acknowledged is "
            "lost), the database was restored from a backup older than them (the work "
            "they hold is not in it), or they are a deleted run's that a database kept beside "
            "this one named until it was moved away",
            counted(len(swept), "file"),
            QUARANTINE,
            ORPHAN_MIN_AGE_S // 60,
        )
    sync_concepts(db)
    sync_shipped_sketches(db, config.data_dir)
    # Human distributions: the shipped reference set, and designers' P_H for
    # colorings stored by code older than the stored P_H (a no-op once current).
    ensure_shipped_reference(db)
    ground_truth.backfill(db, config.data_dir)
    ensure_admin_password(db, password_file=config.admin_password_file)
    forget_addresses(db)  # kept an hour for the join limit (the consent says so)
    return secret


def start_refusal(config: AppConfig, error: BaseException, *, upgraded_from: int | None = None) -> str | None:
    """What a start that `error` stopped while it prepared the database and the data folder
    (`AppContext.prepare`) tells the operator, in one line; None when `error` is not a
    condition of the machine (`storage.storage_condition`).

    The line names the condition and where it struck (the file, else the database for
    SQLite's errors and the data folder for the others), says that what was stored stays
    (the migration from schema `upgraded_from` this start made included, and where the copy
    from before it is kept), and what to do before starting again: the next start carries on
    where this one stopped (a start on a nearly full disk ended in a traceback, its database
    migrated without a word).
    """
    condition = storage_condition(error)
    if condition is None:
        return None
    what, then = OPERATOR_WORDS[condition]
    if isinstance(error, OSError) and error.filename:
        where = f"{error.strerror or error}: {str(error.filename)!r}"
    elif isinstance(error, OSError):  # a write's own error names no file: the files are the data folder's
        where = f"{error.strerror or error}, writing in the data folder {str(config.data_dir)!r}"
    else:
        where = f"{error}, in the database {str(config.db_path)!r}"
    stays = "what was stored stays"
    if upgraded_from is not None:
        stays += f", the database's migration from schema {upgraded_from} to {len(MIGRATIONS)} included"
        if copy := copy_before_upgrade(config.db_path, len(MIGRATIONS)):
            stays += f" (the database as it was before is kept in {str(copy)!r})"
    again = "" if condition == "missing" else ", then start again"
    return f"{what} ({where}); {stays}: {then}{again}; the next start carries on where this one stopped"


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def _instance_secret(db: sqlite_utils.Database) -> str:
    # Stable across restarts, so the canvas keys (`AppContext.instance_name`) stay the same.
    return setting_once(db, ownership.INSTANCE_SECRET, lambda: secrets.token_urlsafe(24))


MAX_MESSAGE_CHARS = 900


def as_gr_error(error: Exception) -> gr.Error:
    """The `gr.Error` that shows `error`'s message (inert: Gradio renders it as HTML), cut
    at `MAX_MESSAGE_CHARS` so that no refusal sends a long input back."""
    text = str(error)
    if len(text) > MAX_MESSAGE_CHARS:
        text = f"{text[:MAX_MESSAGE_CHARS]}… (message cut: {len(text):,} characters)"
    # `<` and `&` are all that could start markup; a `>` stays as typed, so that an API
    # client, which gets the text raw, reads "must be >= 0", not "&gt;= 0".
    return gr.Error(text.replace("&", "&amp;").replace("<", "&lt;"), print_exception=False)


def refused_with(error: Exception, updates: dict) -> gr.Error:
    """`as_gr_error` of `error` that on the page also sets `updates` (outputs of the event,
    such as a table of every file refused and why, which the message can only begin); an
    API client gets the refusal alone."""
    refusal = as_gr_error(error)
    refusal.updates = updates
    return refusal


@contextlib.contextmanager
def shown_errors(action: str) -> Iterator[None]:
    """Turn what `action` raises into a `gr.Error` a person may see.

    `AnnotationError` and `ValueError` (bad input, wrong role) show their message, escaped;
    a `gr.Error` passes through; a full disk or a locked database shows what it is
    (`server_condition`); anything else is logged with its traceback and shows
    `UNEXPECTED`, which names only the exception's class.
    """
    try:
        yield
    except gr.Error:
        raise
    except (AnnotationError, ValueError) as error:
        raise as_gr_error(error) from error
    except Exception as error:
        condition = server_condition(error)
        if condition:
            _LOG.error("%s refused: %s (%s)", action, condition, error)
            raise gr.Error(condition, print_exception=False) from error
        _LOG.exception("unexpected error in %s", action)
        raise gr.Error(UNEXPECTED.format(kind=type(error).__name__), print_exception=False) from error


DATABASE_MISSING = (
    "The server's database is not where it was (moved or deleted while the app runs), so this "
    "could not be done (nothing of it was stored; what is on this page stays). Please tell the "
    "study organisers."
)
_CONDITIONS = {"full": DISK_FULL, "io": DISK_ERROR, "locked": DATABASE_BUSY, "missing": DATABASE_MISSING}
"""What a person is told of each `storage.storage_condition`."""


def server_condition(error: BaseException) -> str | None:
    """`DISK_FULL`, `DISK_ERROR`, `DATABASE_BUSY` or `DATABASE_MISSING` when `error` is a full
    disk, a failed write, a database locked past the busy timeout or one gone from its path
    (`storage.storage_condition`); else None. What a person is told of a server condition that is not their doing, and that
    passes."""
    return _CONDITIONS.get(storage_condition(error))


def role(*roles: str) -> Callable[[Callable], Callable]:
    """Decorate a tab's method ``fn(self, db, actor, *inputs)`` into a Gradio handler
    ``(self, session_token, *inputs)`` that only `roles` may call (the admin only where
    ``"admin"`` is one of them: `annotation.people.accounts.require` implies no role).

    The check is made with the tab's ``self.ctx``: no session, a revoked or forged one, or
    a role not in `roles` is refused before ``fn`` runs (nothing read or written), and what
    ``fn`` raises is shown as `shown_errors` shows it. So the method itself says who may
    call it, and the bound method (``tab.fn``) is what the page wires.

    Parameters
    ----------
    *roles : str
        Roles allowed to call it (see `annotation.people.accounts.require`).
    """

    def decorate(fn: Callable) -> Callable:
        def method(self, session_token, *inputs):
            return _as_role(self.ctx, roles, fn, session_token, (self,), inputs)

        return _guarded(method, fn, roles, kept=1)

    return decorate


def role_refusal(ctx: AppContext, fn, inputs) -> gr.Error | None:
    """The refusal the caller of Gradio function `fn` with `inputs` gets from its role check
    (`role`: the session token is its first input), or None: it has none, or lets them in.

    Run where an input of the call is refused before the function runs, so that a caller the
    function would refuse learns only that (an API client sending a participant's token
    with a role the invite form does not offer was told the form's choices)."""
    access = getattr(getattr(fn, "fn", None), "cc_access", None)
    if access is None or access.kind != ROLE:
        return None
    token = inputs[0] if inputs and isinstance(inputs[0], str) else None
    try:
        with shown_errors(getattr(fn, "name", "a call")), ctx.db() as db:
            require(db, token, *access.roles)
    except gr.Error as refused:
        return refused
    return None


def _as_role(
    ctx: AppContext, roles: tuple[str, ...], fn: Callable, session_token, first: tuple, inputs: tuple
):
    """``fn(*first, db, actor, *inputs)`` once `require` let the session's holder through."""
    with shown_errors(fn.__name__), ctx.db() as db:
        actor = require(db, session_token, *roles)
        return fn(*first, db, actor, *inputs)


def _guarded(wrapper: Callable, fn: Callable, roles: tuple[str, ...], *, kept: int) -> Callable:
    """`wrapper` with `fn`'s signature (its first `kept` parameters, the session token in place
    of ``db, actor``, then its inputs), name and docstring, marked `ROLE` for `roles`."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    token = inspect.Parameter("session_token", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    wrapper.__signature__ = signature.replace(parameters=[*params[:kept], token, *params[kept + 2 :]])
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    wrapper.cc_access = Access(ROLE, roles)
    return wrapper


def refusal_text(message: str) -> str:
    """The Markdown a `note` shows for a refusal: `message` is already escaped, and the
    link and image marks of a value it quotes are written as character references, which
    start neither: ``![p](http://host/p.png)`` in a study's name loaded that image in the
    browser of another researcher refused over the study. So are the starts of a bare
    address (``://``, ``www.``, an e-mail's ``@``), which Markdown would make a link. Within
    a value it quotes (`storage.shown.shown`'s repr), the marks of emphasis and code are
    references too: ``'**apple**'`` read as a bold 'apple', a concept that exists (outside
    probe 190); the message's own *emphasis* stays."""
    message = message.replace("![", "&#33;[").replace("](", "]&#40;").replace("://", "&#58;//")
    message = _QUOTED.sub(lambda quoted: quoted[0].translate(_EMPHASIS_MARKS), message)
    return f"⚠️ {_bare_link_marks(message.replace('@', '&#64;'))}"


#: A value quoted as its repr (its quotes HTML-escaped or not): between quotes that no letter
#: touches on the outside (an apostrophe, "designer's", starts none), an escaped quote inside kept.
_QUOTED = re.compile(
    "|".join(rf"(?<!\w){q}(?:\\{q}|(?!{q})[^\n])*?{q}(?!\w)" for q in ("'", '"', "&#x27;", "&quot;"))
)
_EMPHASIS_MARKS = str.maketrans({c: f"&#{ord(c)};" for c in "*_~`"})


def _bare_link_marks(text: str) -> str:
    """`text` with the dot of each ``www.`` written as a reference, which Markdown's
    extended autolinks (case-blind) would otherwise start a link with."""
    return _WWW.sub(r"\1&#46;", text)


_WWW = re.compile(r"(?i)(www)\.")


def toast_text(message: str) -> str:
    """A refusal as its pop-up shows it: Gradio's toast renders HTML, not Markdown, so the
    code ticks and bold marks that the note beside the action renders are left out."""
    return message.replace("`", "").replace("**", "")


def wire(
    listener: Callable,
    fn: Callable,
    inputs,
    outputs,
    *,
    note: gr.Markdown,
    api_name: str | None = None,
    clear_note: bool = True,
    limit: tuple[str, int] | None = None,
    toast: bool = True,
    **page_kwargs,
):
    """Wire ``fn`` (a `role` method) to ``listener`` (e.g. ``button.click``) for the page, and
    as the API endpoint ``api_name``.

    An event that raises makes Gradio cover each of its outputs with an error sheet that only
    a reload clears. So on the page a refusal (the `gr.Error` that `role` raises) changes
    none of ``outputs``: its message goes to ``note``, a Markdown beside the action, and to a
    warning toast; every control stays visible and usable. A success clears ``note`` unless
    ``note`` is one of ``outputs`` (then ``fn`` sets it) or ``clear_note`` is False (a
    follow-up step keeps the message of the step before). API clients call a twin of the
    event on a hidden trigger, which raises as before: their contract is unchanged.
    ``limit=(name, n)`` lets at most ``n`` calls of the page event and its twin together run
    at once (a Gradio ``concurrency_id``), instead of the queue's default per event.
    ``toast=False`` puts a refusal in ``note`` alone: a step chained after an action (``.then``)
    is refused when the action was, for the same reason (an ended session), and a second
    toast said it again.

    ``fn`` returns its outputs' values either in the order of ``outputs`` (a tuple, or the
    bare value of a lone output) or as named updates, ``{component: update}`` (a component
    it leaves out is not changed; every key must be one of ``outputs``). A refusal answers
    ``{note: message}`` either way; the twin hands API clients the values in the order of
    ``outputs``, whichever way ``fn`` returned them.

    Returns the page event, for ``.then`` chains (which also run after a refusal).
    """
    outputs = [] if outputs is None else list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    note_is_output = any(o is note for o in outputs)
    page_outputs = outputs if note_is_output else [*outputs, note]
    labels = parameter_labels(fn, inputs)

    def on_page(*args):
        try:
            result = fn(*args)
        except gr.Error as error:
            message = relabelled(error.message, labels)
            if toast:
                gr.Warning(toast_text(message))
            # Gradio skips every other output, but those a refusal fills (`refused_with`).
            return {note: refusal_text(message), **getattr(error, "updates", {})}
        if note_is_output:
            return result
        if _named_updates(result):
            return {**result, note: ""} if clear_note else result
        values = (result,) if len(outputs) == 1 else tuple(result or ())
        return (*values, "" if clear_note else gr.skip())

    # Gradio names an event after its function; the page's must not take ``api_name``.
    # Gradio fills gr.Request by annotation and counts the other parameters against
    # ``inputs``: both read ``fn``'s signature and type hints through ``__wrapped__``.
    functools.update_wrapper(on_page, fn, assigned=("__module__", "__doc__", "__annotations__"), updated=())
    on_page.__name__ = f"page_{api_name or getattr(fn, '__name__', 'event')}"
    if hasattr(fn, "cc_access"):
        on_page.cc_access = fn.cc_access
    shared = {} if limit is None else {"concurrency_id": limit[0], "concurrency_limit": limit[1]}
    event = listener(on_page, inputs, page_outputs, api_visibility="private", **shared, **page_kwargs)
    if api_name is not None:
        api_button(api_name).click(fn, inputs, outputs or None, api_name=api_name, **shared)
    return event


def parameter_labels(fn: Callable, inputs) -> dict[str, str]:
    """``{parameter: label}`` for each parameter of ``fn`` whose input component shows a label
    other than its name (``why`` of *Close account* is the field "Why").

    A library refuses a value by its parameter (`why` is empty), as an API client names it;
    on the page the same refusal names the field by the label beside it (`relabelled`).
    """
    inputs = [] if inputs is None else list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}
    labels = {}
    for name, component in zip(params, inputs):
        label = getattr(component, "label", None)
        if isinstance(label, str) and label.strip() and label != name:
            labels[name] = label
    return labels


def relabelled(message: str, labels: dict[str, str]) -> str:
    """`message` with each parameter in code ticks (`` `why` ``) named by its label in
    `labels` (`` `Why` ``). A library that names the field in words before its parameter
    (``Model outputs (`sources`)``) is named by the label alone: the page read "Model outputs
    (`Model outputs (model · run · CFG; default 3)`)" (outside probe 181)."""
    for name, label in labels.items():
        message = message.replace(f"{label.split(' (')[0]} (`{name}`)", f"`{label}`")
        message = message.replace(f"`{name}`", f"`{label}`")
    return message


#: The start of the ``elem_id`` of every button that exists only for an API endpoint.
API_BUTTON = "api_"


def api_button(api_name: str) -> gr.Button:
    """The hidden button an endpoint for API clients alone hangs on (a `wire` twin, or an
    endpoint of its own): never shown, never clicked on the page, so the page's
    configuration leaves it and its event out (`app.weight`)."""
    return gr.Button(visible=False, elem_id=f"{API_BUTTON}{api_name}")


def _named_updates(result: object) -> bool:
    """Whether a handler's `result` is ``{component: update}`` (not the value of a lone output,
    e.g. a `gr.JSON`'s dict)."""
    return isinstance(result, dict) and bool(result) and all(isinstance(k, gr.blocks.Block) for k in result)


def live(markdown: gr.Markdown) -> gr.Markdown:
    """Mark `markdown` so that screen readers read out its changes (the result of an action
    the page shows nowhere else: a saved coloring, the next trial); returns it."""
    markdown.elem_classes = [*(markdown.elem_classes or []), LIVE]
    return markdown


def focus_next(selector: str) -> str:
    """Browser code (an `app.tabs.On` row's ``js``, after an action) that puts the keyboard
    focus on the first shown element matching `selector` (a selector list: the first of its
    matches the page shows) once the page has shown the action's result, unless the focus is
    still on a control shown (a message the focus was put on, ``tabIndex`` -1, is no control):
    a button that hides itself (*I agree*) otherwise leaves it on the page's top, where a
    screen reader starts over. (``ccFocusNext`` is `JS`'s: written
    once, not in each event.)"""
    return f"() => ccFocusNext({json.dumps(selector)})"


def note_area(elem_id: str) -> gr.Markdown:
    """The Markdown beside an action where `wire` shows its refusals."""
    return gr.Markdown(elem_id=elem_id, elem_classes=["action-note"])


def named_table(name: str, elem_id: str, **options) -> gr.Dataframe:
    """A read-only `gr.Dataframe` that a screen reader calls `name` (Gradio says "Dataframe"
    of one without a label); the name is not shown: a heading, a note or the column headers
    say on the page what the table is, unless ``show_label=True`` shows it. `options` go to
    `gr.Dataframe` (``headers``, ``wrap``)."""
    shown_label = options.pop("show_label", False)
    return gr.Dataframe(label=name, show_label=shown_label, interactive=False, elem_id=elem_id, **options)


@contextlib.contextmanager
def empty_note(text: str, elem_id: str) -> Iterator[None]:
    """Lay out a `gr.Dataframe` in the block; while it has no rows, ``text`` (Markdown, a
    "nothing yet" note that says what fills it) shows under its label instead of bare
    headers. The note's element is ``elem_id``; which one shows is decided by `CSS`, so
    every way the table changes (load, refresh, a tab opened) keeps them in step.
    """
    with gr.Column(elem_classes=["empty-aware"]):
        yield
        gr.Markdown(text, elem_id=elem_id, elem_classes=["empty-note"])


def on_open(tab: gr.Tab, *triggers) -> Callable:
    """A listener (for `wire`) that fires when ``tab`` is opened and on each of ``triggers``
    (e.g. a Refresh button's ``click``), so a tab shows its lists without a click."""
    return functools.partial(gr.on, [tab.select, *triggers])


def choice_search(choices, **kwargs) -> gr.Dropdown:
    """A `gr.Dropdown` to search a long list: it starts empty, typing replaces the choice and
    filters the choices (`JS`), and the page keeps it to its choices. ``kwargs`` go to
    `gr.Dropdown`.

    The server leaves checking a value to the handler's library function, which answers an
    unknown one briefly (the API describes the value as any text, whatever the choices): Gradio's own check would answer an API client with the value
    echoed and every choice listed (1,278 for the concepts).
    """
    classes = kwargs.pop("elem_classes", None) or []
    dropdown = gr.Dropdown(
        choices,
        value=None,
        filterable=True,
        allow_custom_value=False,
        elem_classes=["choice-search", *classes],
        **kwargs,
    )
    return checked_by_handler(dropdown)


def checked_by_handler(dropdown: gr.Dropdown) -> gr.Dropdown:
    """`dropdown`, whose value the server hands on as it came, for the handler's library
    function to check (Gradio would check it against the choices the component was built
    with, which are not those a picker filled at sign-in gets); the API describes it as any
    text. Returns `dropdown`."""
    # On this one component, not a subclass: Gradio writes a .pyi file beside any module
    # that subclasses a component.
    dropdown.preprocess = lambda payload: payload
    # A handler that shows a concept in it (Sketches' Generate) would make Gradio warn that
    # the value is not among those built-with choices.
    dropdown.postprocess = lambda value: value
    dropdown.api_info = lambda: {"type": "string"}
    return dropdown


NO_ROW = object()
"""`id_in_row`'s answer when the table has no row for the picture clicked."""


def id_in_row(table, index) -> int | None | object:
    """The whole positive number in the first column of `table`'s row `index`: the id of
    a picture clicked in a gallery that lists one table's rows in its order (a
    ``gr.SelectData`` index). None when that cell holds no id (a coloring under the blind
    vote); `NO_ROW` when the table has no such row (a gallery it no longer matches)."""
    try:
        cell = table.iloc[index, 0]
    except (AttributeError, IndexError, TypeError):
        return NO_ROW
    try:  # a column with an empty cell comes as floats: 7.0
        number = float(cell)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number.is_integer() and number > 0 else None


def whole_number(
    value: object,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    what: str = "",
    empty: str = "",
) -> int:
    """`value` as an int if it is a whole number (`minimum` or more and `maximum` or less, if
    given), else a ValueError naming the field `name` (and, below `minimum`, `what` it is, if
    given; when nothing was given, `empty` says where to find a value, if given).

    Number fields are declared without ``precision=0``, which would make Gradio round 1.5
    to 2 before any handler sees it; so every whole-number input is checked here. Text
    (an `id_field`) counts when it is digits alone, e.g. ``" 12 "``.
    """
    number = value.strip() if isinstance(value, str) else value
    if isinstance(number, str) and re.fullmatch(r"[+-]?\d+", number, re.ASCII):
        if len(number.lstrip("+-")) > 18:
            raise ValueError(f"`{name}` must be a whole number of at most 18 digits, got {shown(value)}")
        number = int(number)
    if (
        isinstance(number, bool)
        or not isinstance(number, (int, float))
        or not math.isfinite(number)
        or number != int(number)
    ):
        if (number is None or number == "") and empty:
            raise ValueError(f"`{name}` is empty: {empty}")
        raise ValueError(f"`{name}` must be a whole number, got {given('' if number == '' else value)}")
    if not -MAX_WHOLE <= number <= MAX_WHOLE:
        raise ValueError(f"`{name}` must be a whole number of at most 18 digits, got {shown(value)}")
    if maximum is not None and not (minimum or 0) <= number <= maximum:
        raise ValueError(
            f"`{name}` must be a whole number from {minimum or 0} to {maximum:,}, got {int(number):,}"
        )
    if minimum is not None and number < minimum:
        meaning = f" ({what})" if what else ""
        raise ValueError(f"`{name}` must be a whole number, {minimum} or more{meaning}, got {int(number)}")
    return int(number)


def seed_number(value: object, name: str) -> int:
    """`value` as a random seed: a whole number, 0 or more (`whole_number`), else a ValueError
    naming the field `name` (NumPy's own message, "expected non-negative integer", names none)."""
    return whole_number(value, name, minimum=0, what="a random seed")


def given(value: object) -> str:
    """What a refusal says a field held: `shown` of it, or "nothing". A number box sends
    None both when it is empty and for a number it cannot hold (``1e400`` in the browser is
    ``Infinity``, which JSON carries as null), so None says both (outside probe 151 read "got
    nothing" after typing ``1e400``)."""
    if value is None:
        return "nothing (an empty box, or a number too large to hold)"
    return "nothing" if value == "" else shown(value)


def link_days(value: object, name: str) -> float:
    """`value` as how long a link stays valid, in days: a number in
    `annotation.people.accounts.LINK_DAYS_RANGE`, else a ValueError naming the field `name`.

    An empty field is refused, not read as a default: Gradio sends a number it cannot
    hold (``1e400``) as nothing too (`given`).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a number of days, got {given(value)}")
    if not MIN_LINK_DAYS <= value <= MAX_LINK_DAYS:
        raise ValueError(f"`{name}` must be in {LINK_DAYS_RANGE}, got {shown(value)}")
    return float(value)


def id_field(
    label: str, elem_id: str, *, placeholder: str = "from the table above", scale: int | None = None
) -> gr.Textbox:
    """An input for a row id: empty until typed in, checked by `whole_number`.

    A textbox, because Gradio 6 draws an empty `gr.Number` as 0 whatever its placeholder.
    """
    return gr.Textbox(label=label, placeholder=placeholder, max_lines=1, scale=scale, elem_id=elem_id)


def uploaded(path: str, name: str) -> str:
    """`path` if it names a file uploaded to the app, else a ValueError naming field `name`.

    Gradio accepts, as a file argument, a path on the server inside its static folders
    (the served data folders); an upload handler takes only what was uploaded.
    """
    folder = Path(get_upload_folder()).resolve()
    if not Path(path).resolve().is_relative_to(folder):
        raise ValueError(f"`{name}` must be files uploaded to the app, not paths on the server")
    return path


def discard_uploads(paths) -> None:
    """Remove uploaded files (`uploaded` paths) the app has read: stored under the data
    folder or refused for what they hold. Gradio keeps every upload in its shared folder
    outside the data folder until it is removed, so a researcher's refused 1 GiB zips
    stayed there (an outside check); each file's folder goes too once empty."""
    folder = Path(get_upload_folder()).resolve()
    for path in map(Path, paths):
        if path.resolve().is_relative_to(folder):
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # not empty: another upload lies there
                path.parent.rmdir()


def escape(text: object) -> str:
    """`text` made inert for HTML output (a ``gr.HTML`` block), and for Markdown where it
    names our own words (a concept, a run): its markup characters still format there. A
    person's free text shown in Markdown takes `inert_markdown`."""
    return html.escape(str(text))


_MARKDOWN_MARKS = str.maketrans({c: f"&#{ord(c)};" for c in "&<>\"'\\`*_[]()!#|~{}:@"})


def inert_markdown(text: object) -> str:
    """A person's free text made inert in a ``gr.Markdown``: HTML escaped, and each Markdown
    mark (brackets, emphasis, code, a URL's colon, an e-mail's ``@``, the dot of ``www.``)
    written as a character reference, which shows the character and starts no markup:
    ``![p](http://…)`` in an admin's reason loaded an image from that host in the designer's
    browser (outside probe 120). Not for a code span, which shows references as typed.

    Examples
    --------
    >>> inert_markdown("![p](http://x/p.png) <b>")
    '&#33;&#91;p&#93;&#40;http&#58;//x/p.png&#41; &#60;b&#62;'
    >>> inert_markdown("WWW.x.org a@b.org")
    'WWW&#46;x.org a&#64;b.org'
    """
    return _bare_link_marks(str(text).translate(_MARKDOWN_MARKS))


_URL_MARKS = "-._~:/?#@$&+,;=%"
"""What `markdown_link` keeps of a URL besides letters and digits: RFC 3986's marks, less
those that end or start Markdown (``( ) [ ] ! * '``) and the braces."""


def markdown_link(text: str, url: str) -> str:
    """A Markdown link to `url` showing `text` (our own words), that no character of the URL
    can end early: every character but letters, digits and `_URL_MARKS` is percent-encoded
    (a return URL's ``)![t](http://other.host/t.png)`` closed the link and loaded that image
    in a crowd participant's browser: outside probe 206), then HTML-escaped.

    Examples
    --------
    >>> markdown_link("back", "https://x.example/?cc=A1)![t](http://h/t.png)")
    '[back](https://x.example/?cc=A1%29%21%5Bt%5D%28http://h/t.png%29)'
    >>> markdown_link("back", "https://x.example/?a=1&b=2")
    '[back](https://x.example/?a=1&amp;b=2)'
    """
    return f"[{text}]({escape(urllib.parse.quote(url, safe=_URL_MARKS))})"


def visible_to(actor: Actor | None, roles: tuple[str, ...]) -> bool:
    """Whether a tab for `roles` is shown to `actor` (the admin sees every tab)."""
    return actor is not None and (actor.is_admin or bool(actor.roles & set(roles)))
