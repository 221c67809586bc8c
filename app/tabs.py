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
from dataclasses import dataclass

import gradio as gr

from app.common import AppContext, wire


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
            js=on.js,
        )


def _trigger(tab, name: str):
    """The event listener ``"<part>.<event>"`` names, e.g. ``tab.parts["list"].click``."""
    part, event_name = name.split(".")
    return getattr(tab.parts[part], event_name)
