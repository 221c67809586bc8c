"""What each stage of expert review waits for, in numbers read from the database.

The stages (paper Appendix B.4): (1) designers color; a concept can be ranked for the vote
once it has `min_colorings` counted colorings (`storage.human.COUNTING_RULE`), each from
another designer; (2) an expert ranks the concepts and opens the vote queue
(`annotation.qc.review.open_review_queue`): every coloring of the most disputed concepts
gets a review; (3) experts vote, and a review is decided once it has its ``votes_needed``
votes from different experts; (4) the agreement statistics (P̄, Fleiss' κ, Krippendorff's
α) show once a review is decided. `readiness` counts where each stage stands and
`Readiness.lines` says, in words, what opens the next one: "2 more colorings of 'warm
sunset' open its vote", "No review has all its votes yet: 3 votes on 2 colorings are
missing".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlite_utils

from annotation.pilot import read_pilot
from annotation.qc.review import MIN_COLORINGS, concepts_in_vote
from storage.human import counted_per_concept
from storage.shown import counted

#: Concepts named in "N more colorings of ... open its vote".
SHOWN = 3


@dataclass(frozen=True)
class Readiness:
    """Where expert review stands.

    Attributes
    ----------
    min_colorings : int
        Counted colorings a concept needs to be ranked for the vote, >= 2.
    concepts : tuple of (str, int)
        The concepts the numbers name, with their counted colorings: the pilot's concepts
        when a pilot is set (`annotation.pilot`), else those with at least one counted
        coloring; fewest missing first, then by key.
    pilot : bool
        Whether `concepts` are a pilot's.
    in_vote : frozenset of str
        Concepts with a coloring under the blind vote or decided by it: their vote opened,
        so no count of colorings is said to open it (a withdrawal may leave one below
        `min_colorings`; outside probe 170).
    voting : frozenset of str
        Those of `in_vote` with a review still open; the others were voted on (their vote
        is decided: "in the vote already" read as if it went on, outside probe 227).
    rankable_in_vote : int
        Those of `rankable` in `in_vote`: "Open the vote queue" opens none of them.
    rankable : int
        Concepts with `min_colorings` counted colorings or more.
    rankable_at_least : int
        Concepts not in `in_vote` with `MIN_COLORINGS` (2, the least a ranking takes) or more.
    fewest_rankable : int
        The fewest counted colorings among those concepts (0 when there are none): the most
        colorings per concept that still ranks all of them.
    reviews_open, reviews_decided : int
        Colorings waiting for votes, and those whose vote is decided.
    votes_missing : int
        Votes the open reviews still need, all together.
    votes_needed : int
        The most votes an open review needs (0 when none is open).
    experts : int
        Active experts (a coloring's votes come from different experts).
    """

    min_colorings: int
    concepts: tuple[tuple[str, int], ...]
    pilot: bool
    in_vote: frozenset[str]
    rankable: int
    rankable_at_least: int
    fewest_rankable: int
    reviews_open: int
    reviews_decided: int
    votes_missing: int
    votes_needed: int
    experts: int
    voting: frozenset[str] = frozenset()
    rankable_in_vote: int = 0

    def lines(self) -> list[str]:
        """What opens each stage next, one sentence per stage that is not open yet (plain
        text; concept names are quoted, escape before showing as Markdown)."""
        lines = [self._colorings_line()]
        if self.rankable and not self.reviews_open + self.reviews_decided:
            lines.append(
                "No coloring is open for a vote yet: an expert ranks the concepts and opens the "
                "vote queue (Expert review, section 2); the most disputed concepts go to the vote."
            )
        if self.reviews_open:
            missing = (
                f"{counted(self.votes_missing, 'vote')} on {counted(self.reviews_open, 'coloring')} "
                f"{'is' if self.votes_missing == 1 else 'are'} missing"
            )
            lines.append(
                f"No review has all its votes yet: {missing}."
                if not self.reviews_decided
                else f"{counted(self.reviews_decided, 'review')} decided; {missing}."
            )
            if self.experts < self.votes_needed:
                lines.append(
                    f"Only {counted(self.experts, 'expert')} can vote and each coloring needs "
                    f"{self.votes_needed} votes from different experts: invite "
                    f"{self.votes_needed - self.experts} more."
                )
        elif self.reviews_decided:
            lines.append(f"{counted(self.reviews_decided, 'review')} decided; no vote is missing.")
        return lines

    def _colorings_line(self) -> str:
        m = self.min_colorings
        waiting = [(key, m - n) for key, n in self.concepts if n < m and key not in self.in_vote]
        below = [key for key, n in self.concepts if n < m and key in self.in_vote]
        short = waiting[:SHOWN]
        steps = "; ".join(
            f"{counted(more, 'more coloring') if i == 0 else f'{more} more'} of '{key}' "
            f"{'opens' if more == 1 else 'open'} its vote"
            for i, (key, more) in enumerate(short)
        )
        if len(waiting) > SHOWN:  # a pilot's fourth concept was left out unsaid
            steps += f"; and {counted(len(waiting) - SHOWN, 'more concept')}"
        for keys, said in (
            ([k for k in below if k in self.voting], ("is in the vote", "are in the vote")),
            ([k for k in below if k not in self.voting], ("was voted on already", "were voted on already")),
        ):
            if keys:
                names = ", ".join(f"'{key}'" for key in keys[:SHOWN])
                more = f" and {counted(len(keys) - SHOWN, 'more concept')}" if len(keys) > SHOWN else ""
                line = f"{names}{more} {said[len(keys) > 1]}"
                steps = f"{steps}; {line}" if steps else line
        if self.rankable:
            head = f"{counted(self.rankable, 'concept')} {'has' if self.rankable == 1 else 'have'} the {m} colorings that “Colorings needed per concept” asks"
            voted = self.rankable_in_vote
            if voted:  # "Open the vote queue" opened none of them (outside probe 227)
                which = (
                    "it is"
                    if self.rankable == 1
                    else "all are"
                    if voted == self.rankable
                    else f"{voted} {'is' if voted == 1 else 'are'}"
                )
                head += f" ({which} in the vote or voted on already)"
            return f"{head}; {steps}." if steps and self.pilot else f"{head}."
        if not self.concepts:
            head = (
                f"No concept has a coloring yet: a concept's vote opens once {m} designers have colored it."
            )
        else:
            where = "No pilot concept" if self.pilot else "No concept"
            head = f"{where} has yet the {m} colorings from different designers that “Colorings needed per concept” asks: {steps}."
        if self.rankable_at_least and m > MIN_COLORINGS:
            head += (
                f" {counted(self.rankable_at_least, 'concept')} {'has' if self.rankable_at_least == 1 else 'have'} "
                f"{self.fewest_rankable} or more: set “Colorings needed per concept” to "
                f"{self.fewest_rankable} and press “Open the vote queue” to open their vote now."
            )
        return head


MISSING_VOTES = (
    "max(0, r.votes_needed - (select count(*) from qc_votes v where v.coloring_id = r.coloring_id))"
)
"""SQL on ``reviews r``: the votes the review still misses."""


def active_experts(db: sqlite_utils.Database) -> int:
    """Active annotators with the expert role (a coloring's votes come from different ones)."""
    return sum(
        "expert" in json.loads(row[0])
        for row in db.execute("select roles from annotators where status = 'active'")
    )


def readiness(db: sqlite_utils.Database, min_colorings: int = MIN_COLORINGS) -> Readiness:
    """Count where each stage of expert review stands (see `Readiness`).

    Parameters
    ----------
    min_colorings : int
        Counted colorings a concept needs to be ranked for the vote (the Expert tab's
        "Colorings needed per concept"), >= 2.
    """
    counts = counted_per_concept(db)
    pilot = read_pilot(db)
    named = [(key, counts.get(key, 0)) for key in pilot] if pilot else list(counts.items())
    named.sort(key=lambda item: (max(0, min_colorings - item[1]), item[0]))
    in_vote = frozenset(concepts_in_vote(db))
    voting = frozenset(concepts_in_vote(db, open_only=True))
    outside = [n for key, n in counts.items() if key not in in_vote]
    reviews = db.execute(
        "select coalesce(sum(status = 'open'), 0), coalesce(sum(status = 'decided'), 0), "
        f"coalesce(sum(case when status = 'open' then {MISSING_VOTES} end), 0), "
        "coalesce(max(case when status = 'open' then votes_needed end), 0) from reviews r"
    ).fetchone()
    experts = active_experts(db)
    return Readiness(
        min_colorings=min_colorings,
        concepts=tuple(named),
        pilot=bool(pilot),
        in_vote=in_vote,
        voting=voting,
        rankable=sum(n >= min_colorings for n in counts.values()),
        rankable_in_vote=sum(n >= min_colorings and key in in_vote for key, n in counts.items()),
        rankable_at_least=sum(n >= MIN_COLORINGS for n in outside),
        fewest_rankable=min((n for n in outside if n >= MIN_COLORINGS), default=0),
        reviews_open=int(reviews[0]),
        reviews_decided=int(reviews[1]),
        votes_missing=int(reviews[2]),
        votes_needed=int(reviews[3]),
        experts=int(experts),
    )
