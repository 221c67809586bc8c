"""What the server keeps per visitor session: Gradio's session state without its deep-link copy.

Gradio 6 makes a `gradio.state_holder.SessionState` for every new session: each page that
opens, and each call through the HTTP API (``/gradio_api/call/...`` draws a session per
call). Besides the session's state values it keeps ``config_values``, a copy of every
component's configuration, which it builds in full when the session starts (one
``Block.get_config`` per block, each reading the component's signature) and updates with
every input and output of every event after that. Its only reader is the
``/gradio_api/deep_link`` route, which saves that copy as a file so that a link can restore
the page; the guard refuses that route (`app.guard`: not on its allow-list, and it writes
into Gradio's upload folder), and the app offers no deep-link button. For this app's ~720
blocks the copy cost ~110 ms of the server's CPU per new session, on the server's event
loop, before the session's first event could run (BENCHMARKS.md "A session's start").

`LeanSessionState` is Gradio's class without that copy; `install` makes Gradio's state
holder create it. Nor does it copy the app's blocks for a session until an event of the
session updates a component (Gradio copied the block dict, and the events', for every
session: 46,806 bytes each with 718 blocks, kept for up to 10,000 sessions; BENCHMARKS.md
"Where the soak's memory went"). Everything else (the state values, their time to live,
the updated components of each session) is Gradio's own code, which still computes the configuration
of a component an event updates (one block, not all) and keeps it unread.
"""

from __future__ import annotations

import copy
import datetime

from gradio import state_holder
from gradio.components import State
from gradio.state_holder import SessionState


class _Shared:
    """The app's configuration, handed to `SessionState.__init__` so that its copy is the
    configuration itself (shared until the session's first update of a component)."""

    def __init__(self, config) -> None:
        self.config = config

    def __copy__(self):
        return self.config


class _NoSnapshot:
    """What `SessionState.__init__` reads of the app's Blocks, with no block to copy the
    configuration of."""

    def __init__(self, blocks) -> None:
        self.default_config = _Shared(blocks.default_config)
        self.blocks: dict = {}


class LeanSessionState(SessionState):
    """Gradio's session state with no copy of the components' configuration.

    Parameters
    ----------
    blocks : gradio.Blocks
        The launched app.
    """

    def __init__(self, blocks) -> None:
        super().__init__(_NoSnapshot(blocks))
        self._shared = self.blocks_config

    def __setitem__(self, key: int, value) -> None:
        """Gradio's, less the configuration copy: a state value, or the session's own
        version of a component an event updated (the session's copy of the app's blocks is
        made at its first such update)."""
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
            return
        if self.blocks_config is self._shared:
            self.blocks_config = copy.copy(self._shared)
        self.blocks_config.blocks[key] = value

    def _update_config(self, key: int) -> None:
        """Nothing to update: no copy is kept."""

    def _update_value_in_config(self, key: int, value) -> None:
        """Nothing to update: no copy is kept."""

    @property
    def components(self):
        """No configuration copy: a deep link (refused by the guard) would restore nothing."""
        return iter(())


def install() -> None:
    """Make Gradio's state holder create `LeanSessionState` for every new session (the whole
    process: every app it launches). Idempotent."""
    state_holder.SessionState = LeanSessionState
