"""The scoring rule sets of the explicit-color mode: the paper's and the released code's.

GenColorBench's paper (§3.4) and its released code score differently in places. Both are
offered: ``"paper"`` is the default; ``"released"`` (and ``"released-closest"``, below) let users
compare with numbers produced by that code.

``"paper"`` reads the paper's dominant color as the color an observer attributes to the object
("human observers typically abstract these variations, attributing a single representative
color"): the surface's own color, not the average over its shading. Where that color sits among
the pixels depends on the exposure (the lit side when the camera is metered on the key light,
the mean when the object is exposed to average its color), so the rules take two readings of
the body reflection without highlights, the lit side (``lit_band``) and the whole body
(``body_band``), and keep the one nearer the target (see :mod:`evaluation.explicit.dominant`).
``"paper-mean"`` is the literal reading, the mean over every pixel; it recovers the albedo only
when the shading averages to 1 over the object, and on renders not exposed that way it calls
most objects too dark (BENCHMARKS.md, "Explicit-color scorer on validation renders"). Every threshold lives here, one line each, and is read by
:mod:`evaluation.explicit.dominant` (which pixels count, when an object is achromatic) and
:mod:`evaluation.explicit.scoring` (when a metric passes).

=========================  ===========  ===========  ==========================================
field                      paper        released     source
=========================  ===========  ===========  ==========================================
``jnd``                    5            5            paper: "JND threshold (typically 5)"
``hue_threshold``          5°           30°          paper: the same JND; released: 6 x JND
``hue_gate_chroma``        5            5            released code; the paper gives no value
``achromatic_chroma``      5            10           released code; paper: ours (= the gate)
``achromatic_keep_chroma`` None         15           released code
``axis_iqr``               None         1.5          released code (IQR on the 2nd axis)
``chroma_percentile``      None         50           released code
``projection``             centred      centred      ours (see :mod:`.dominant`)
``closest_fraction``       None         None         released extraction's default (0.05)
``lit_ratio_percentile``   30           None         ours: drop highlights (see :mod:`.dominant`)
``lit_band``               (75, 95)     None         ours: L* percentiles of the lit side
``body_band``              (0, 95)      None         ours: L* percentiles of the body reading
=========================  ===========  ===========  ==========================================

``"paper-mean"`` is ``"paper"`` without the ``lit_`` and ``body_`` fields.

The released code's extraction function can also keep only the pixels closest (CIEDE2000) to
the target before averaging, 5 % by its default: ``"released-closest"`` is ``"released"`` with
``closest_fraction = 0.05``.

Neither rule set is the released *evaluators'* scoring (``gencolorbench/evaluation/*.py`` of
moatifbutt/gen-color-bench, read 2026-12-02): those always keep the closest 10 % of the prompted
object's pixels (at least 5, when it has more than 10), take as candidates every color of the
target's ISCC-NBS neighbourhood from a file the repository does not publish (a CSS target
through its nearest L3 color), need the three thresholds passed against one candidate (here
each metric takes its own minimum), and score a second object without that step (in
color_object it must *not* match). The filters and thresholds above are the release's; the
candidates and the per-metric minimum are this project's. docs/explicit.md says the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from storage.shown import shown


@dataclass(frozen=True)
class Rules:
    """Thresholds of one scoring rule set (units: CIELAB units unless said otherwise).

    Attributes
    ----------
    name : str
        A key of :data:`RULES`.
    jnd : float
        ΔChroma and CIEDE2000 pass when strictly below this.
    hue_threshold : float
        The hue error (degrees) passes when strictly below this.
    hue_gate_chroma : float
        The hue error counts as 0 when the dominant color or the candidate has a chroma below
        this (hue is meaningless near the neutral axis).
    achromatic_chroma : float
        An object whose median pixel chroma is below this is achromatic: its dominant color is
        the plain mean, with no principal axis (see :mod:`evaluation.explicit.dominant`).
    achromatic_keep_chroma : float or None
        For an achromatic object, average only the pixels of chroma below this (None: all).
    axis_iqr : float or None
        Keep only pixels whose coordinate on the second principal axis lies within this many
        interquartile ranges of the quartiles (None: no such filter).
    chroma_percentile : float or None
        Then keep only pixels at or above this percentile (0-100) of chroma (None: all).
    projection : {"centred", "origin"}
        Through which point chromaticities are projected on the first principal axis
        (:mod:`evaluation.explicit.dominant` explains both; "centred" leaves the mean).
    closest_fraction : float in (0, 1] or None
        After the filters, average only this fraction of pixels closest (CIEDE2000) to the
        target (None: all).
    lit_ratio_percentile : float in [0, 100) or None
        Of a chromatic object keep only the pixels whose C* / (L* + 16) is at or above this
        percentile: shading leaves that ratio unchanged, a white highlight lowers it (None: all).
    lit_band : (float, float) or None
        Then keep only the pixels whose L* lies between these two percentiles (0-100) of the
        remaining pixels' L*: the side facing the light (None: all). Achromatic objects take the
        band over all their pixels.
    body_band : (float, float) or None
        A second reading of the same pixels (after the highlight filter): the mean of those
        whose L* lies between these two percentiles, the body reflection as a whole. When set,
        the dominant color is whichever of the two readings is nearer the target (CIEDE2000),
        the lit one when no target is given (None: one reading).

    Raises
    ------
    ValueError
        If ``projection``, ``closest_fraction``, ``lit_ratio_percentile``, ``lit_band`` or
        ``body_band`` is out of range.
    """

    name: str
    jnd: float
    hue_threshold: float
    hue_gate_chroma: float
    achromatic_chroma: float
    achromatic_keep_chroma: float | None
    axis_iqr: float | None
    chroma_percentile: float | None
    projection: str = "centred"
    closest_fraction: float | None = None
    lit_ratio_percentile: float | None = None
    lit_band: tuple[float, float] | None = None
    body_band: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.projection not in ("centred", "origin"):
            raise ValueError(f"`projection` must be 'centred' or 'origin', got {shown(self.projection)}")
        if self.closest_fraction is not None and not 0.0 < self.closest_fraction <= 1.0:
            raise ValueError(f"`closest_fraction` must lie in (0, 1], got {shown(self.closest_fraction)}")
        if self.lit_ratio_percentile is not None and not 0.0 <= self.lit_ratio_percentile < 100.0:
            raise ValueError(
                f"`lit_ratio_percentile` must lie in [0, 100), got {shown(self.lit_ratio_percentile)}"
            )
        for field in ("lit_band", "body_band"):
            band = getattr(self, field)
            if band is not None and not (len(band) == 2 and 0.0 <= band[0] < band[1] <= 100.0):
                raise ValueError(
                    f"`{field}` must be two percentiles 0 <= low < high <= 100, got {shown(band)}"
                )

    @property
    def uses_target(self) -> bool:
        """Whether the dominant color depends on the target (so it is computed per target)."""
        return self.closest_fraction is not None or self.body_band is not None


_RELEASED = Rules("released", 5.0, 30.0, 5.0, 10.0, 15.0, 1.5, 50.0)
_PAPER_MEAN = Rules("paper-mean", 5.0, 5.0, 5.0, 5.0, None, None, None)
RULES = {
    "paper": replace(
        _PAPER_MEAN, name="paper", lit_ratio_percentile=30.0, lit_band=(75.0, 95.0), body_band=(0.0, 95.0)
    ),
    "paper-mean": _PAPER_MEAN,
    "released": _RELEASED,
    "released-closest": replace(_RELEASED, name="released-closest", closest_fraction=0.05),
}
SCORINGS = tuple(RULES)
DEFAULT_SCORING = "paper"
#: What each rule set's verdicts mean, in words, for tables that show them.
DESCRIPTIONS = {
    "paper": "paper, two readings (default): the object's lit side or its mean color, highlights out, "
    "whichever is nearer the target (the exposure decides which one is the object's color), "
    "against the target and its 3 nearest colors of its kind (chromatic or neutral); ΔChroma, CIEDE2000 and hue each below 5",
    "paper-mean": "paper, plain mean: the mean of every pixel of the object (right only when the "
    "shading averages to 1); ΔChroma, CIEDE2000 and hue each below 5",
    "released": "GenColorBench's released pixel filters: the more chromatic half of the pixels; "
    "ΔChroma and CIEDE2000 below 5, hue below 30° (candidates ours, not the release's)",
    "released-closest": "released filters, then the 5 % of pixels closest to the target (the "
    "release's evaluators keep 10 %, always): more false passes; thresholds as released",
}


def get_rules(scoring: str | Rules) -> Rules:
    """The rule set named ``scoring`` (one of :data:`SCORINGS`), or ``scoring`` itself.

    Raises
    ------
    ValueError
        If ``scoring`` is neither a :class:`Rules` nor a known name.
    """
    if isinstance(scoring, Rules):
        return scoring
    if scoring not in RULES:
        raise ValueError(f"`scoring` must be one of {', '.join(SCORINGS)}; got {shown(scoring)}")
    return RULES[scoring]
