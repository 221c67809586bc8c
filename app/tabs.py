"""A tab as an object (`Tab`): its events as one declarative table of `On` rows, registered
by `wire_events` with the tab's bound methods.

Every tab of `app.TAB_MODULES` is a `Tab` subclass (`app.designer.DesignerTab`,
`app.expert.ExpertTab`, ...) built with the app's `AppContext` (``self.ctx``) and its
laid-out components by name (``self.parts``, ``session_token`` included). Its handlers are
methods that say who may call them (`app.common.role`) and return ``{part: update}``; its
module's ``EVENTS`` table names, for each event, the trigger, the method and the parts it
reads and updates.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from app.common import OWN_SESSION, ROLE, UI, AppContext, own_session, wire

SESSION_CHANGE = "session_token.change"
"""The trigger of a tab's reaction to a sign-in, a restored session or a sign-out, which
`SessionReactions` gathers into one event."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class On:
    """One event of a tab: when `trigger` fires, the tab's method `method` runs on the parts
    `inputs` and updates `outputs`. The trigger is ``"<part>.<event>"``, a tuple of them
    (any one fires it), or ``"then"``: after the event above. With a `note`,
    `app.common.wire` registers it: refusals are shown in that part, which a success clears
    unless `clear_note` is False; `api_name` names it for API clients, `js` runs in the
    browser first, `limited` allows at most ``AppConfig.submit_concurrency`` calls at once
    (named after `api_name`). Without a `note` it is a private event that refuses nobody (it
    computes UI alone, or chooses by the caller's own session); its `api_name`, if any, only
    names its function (it stays private), and a `method` of None runs `js` alone, in the
    browser. The trigger ``"api"`` makes an endpoint for API clients alone, named
    `api_name`, whose parameters are the method's own (`gradio.api`: no `inputs`, `outputs`
    or `note`).
    """

    trigger: str | tuple[str, ...]
    method: str | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    note: str | None = None
    api_name: str | None = None
    clear_note: bool = True
    js: str | None = None
    limited: bool = False


class Tab:
    """A tab object: the app's context, the tab's parts by name, and the handlers `EVENTS`
    wires.

    A handler marked `app.common.role` is written ``(self, db, actor, *inputs)`` and called
    ``(session_token, *inputs)``; it returns ``{part: update}`` with every output of its
    event (API clients receive them in the order of the event's outputs; `named` builds
    one from names). A subclass sets `EVENTS` and may extend `wire` with what an `On` row
    cannot express.

    Parameters
    ----------
    ctx : AppContext
    parts : dict
        The tab's components by name (its module's ``_layout``) and ``session_token``.
    """

    EVENTS: tuple[On, ...] = ()

    def __init__(self, ctx: AppContext, parts: dict) -> None:
        self.ctx, self.parts = ctx, parts

    def wire(self) -> None:
        """Register `EVENTS` with Gradio (inside the Blocks that hold the parts)."""
        wire_events(self, self.EVENTS)

    def named(self, **updates) -> dict:
        """``{part: update}`` of the parts named in `updates`."""
        return {self.parts[name]: update for name, update in updates.items()}


def wire_events(tab, events: tuple[On, ...]) -> None:
    """Register `events` with Gradio for `tab` (inside the Blocks that hold its parts), in
    their order.

    Parameters
    ----------
    tab : object
        A tab object with ``ctx`` (`AppContext`), ``parts`` (components by name) and the
        methods `events` name.
    events : tuple of On
    """
    event = None
    for on in events:
        fn = None if on.method is None else getattr(tab, on.method)
        if on.trigger == "api":
            gr.api(fn, api_name=on.api_name)
            event = None
            continue
        if on.trigger == "then":
            listener = event.then
        elif isinstance(on.trigger, tuple):
            listener = functools.partial(gr.on, [_trigger(tab, name) for name in on.trigger])
        else:
            listener = _trigger(tab, on.trigger)
        inputs = [tab.parts[name] for name in on.inputs]
        outputs = [tab.parts[name] for name in on.outputs]
        if on.note is None:
            if getattr(getattr(fn, "cc_access", None), "kind", None) == ROLE:
                # It can refuse: raised, Gradio covers its outputs with an error sheet.
                raise ValueError(
                    f"{type(tab).__name__}.{on.method} checks roles and can refuse: its event needs a `note`"
                )
            named = {} if on.api_name is None else {"api_name": on.api_name}
            event = listener(fn, inputs, outputs, js=on.js, api_visibility="private", **named)
            continue
        limit = (on.api_name, tab.ctx.config.submit_concurrency) if on.limited else None
        event = wire(
            listener,
            fn,
            inputs,
            outputs,
            note=tab.parts[on.note],
            api_name=on.api_name,
            clear_note=on.clear_note,
            limit=limit,
            toast=on.trigger != "then",
            js=on.js,
        )


def _trigger(tab, name: str):
    """The event listener ``"<part>.<event>"`` names, e.g. ``tab.parts["list"].click``;
    `SESSION_CHANGE` adds to the app's `SessionReactions`."""
    if name == SESSION_CHANGE:
        return SessionReactions.of(tab.parts["session_token"]).change
    part, event_name = name.split(".")
    return getattr(tab.parts[part], event_name)


class SessionReactions:
    """What every tab does when the session changes (a sign-in, a restored session, a
    sign-out), registered as one Gradio event.

    A tab reacts by calling `change` (`wire_events` does for an `On` row whose trigger is
    `SESSION_CHANGE`) as it would ``session_token.change``; `wire`, once every tab is built,
    registers all of them as one ``session_token.change`` event whose outputs are all of
    theirs, and their ``.then`` steps chained after it. One event per tab made a sign-in
    eleven events, and an event costs the server and the page tens of milliseconds of CPU
    against the 2-7 ms of each of these handlers (BENCHMARKS.md, "One event for a sign-in").

    A reaction must refuse nobody (`app.common.own_session` or `app.common.ui_only`): the
    event computes every tab's view, for whoever signed in. One that fails is logged and
    leaves its outputs as they were; the other tabs' views still arrive.
    """

    def __init__(self, session_token: gr.Textbox) -> None:
        self.session_token = session_token
        self.reactions: list[_Deferred] = []
        self.wired = False
        session_token.colorconcept_reactions = self

    @staticmethod
    def of(session_token: gr.Textbox) -> SessionReactions:
        """The reactions of the app whose session box is `session_token`."""
        try:
            return session_token.colorconcept_reactions
        except AttributeError:
            raise RuntimeError(
                "build the tab inside app.build_app, which gathers what tabs do at a sign-in"
            ) from None

    def change(self, fn: Callable, inputs, outputs, *, api_visibility: str = "private", js=None, **named):
        """Add `fn` (called with `inputs`' values, updating `outputs`) to the sign-in event.

        Takes a Gradio listener's arguments; returns a step whose ``.then`` chains after
        the whole event.
        """
        access = getattr(getattr(fn, "cc_access", None), "kind", None)
        if self.wired or js is not None or api_visibility != "private" or access not in (OWN_SESSION, UI):
            raise ValueError(
                f"{getattr(fn, '__qualname__', fn)}: a reaction to the session is a private "
                "own_session or ui_only function without js, added before the app is wired"
            )
        reaction = _Deferred(fn, _listed(inputs), _listed(outputs), named)
        self.reactions.append(reaction)
        return reaction

    def wire(self) -> None:
        """Register the reactions as one event, and their follow-ups after it."""
        self.wired = True
        if not self.reactions:
            return
        inputs = list(dict.fromkeys([self.session_token, *(c for r in self.reactions for c in r.inputs)]))
        outputs = [c for r in self.reactions for c in r.outputs]
        shared = {c for c in outputs if outputs.count(c) > 1}
        if shared:
            raise ValueError(f"two reactions to the session update the same part: {sorted(map(str, shared))}")
        reactions = tuple(self.reactions)

        @own_session
        def on_session_change(*values) -> dict:
            given = dict(zip(inputs, values, strict=True))
            updates = {}
            for reaction in reactions:
                try:
                    result = reaction.fn(*(given[c] for c in reaction.inputs))
                except Exception:
                    log.exception("%s failed at a change of session", reaction.fn.__qualname__)
                    continue
                updates.update(_named(result, reaction.outputs))
            return updates

        event = self.session_token.change(on_session_change, inputs, outputs, api_visibility="private")
        for reaction in reactions:
            reaction.chain_after(event)


@dataclass
class _Deferred:
    """A step to register later: ``fn`` on ``inputs`` to ``outputs``, and the steps
    chained after it (`then`)."""

    fn: Callable
    inputs: list
    outputs: list
    named: dict
    follow_ups: list[_Deferred] = field(default_factory=list)

    def then(self, fn: Callable, inputs, outputs, **named) -> _Deferred:
        step = _Deferred(fn, _listed(inputs), _listed(outputs), named)
        self.follow_ups.append(step)
        return step

    def chain_after(self, event) -> None:
        for step in self.follow_ups:
            step.chain_after(event.then(step.fn, step.inputs, step.outputs, **step.named))


def _listed(components) -> list:
    if components is None:
        return []
    return list(components) if isinstance(components, (list, tuple, set)) else [components]


def _named(result, outputs: list) -> dict:
    """A handler's `result` as ``{component: update}``: it returned that, its outputs'
    values in order, or the bare value of a lone output."""
    if isinstance(result, dict) and set(result) <= set(outputs):
        return result
    if len(outputs) == 1:
        return {outputs[0]: result}
    return dict(zip(outputs, result, strict=True))
