"""The UI-shape counter (`bench.ui_shape`) on a source written for it, with known counts."""

from bench.ui_shape import Shape, measure

SOURCE = """
def view(parts) -> tuple:
    return parts


def task_view(a, b, c):
    if a:
        return a, b, c
    return (a, *b, c)


def pair(a, b) -> tuple[int, int]:
    return a, b


def make_state(ctx):
    def state(db, actor):
        return db, actor, ctx

    return state


def make_other(config):
    def other():
        return 1

    return other


def decorate_only(ctx):
    def inner():
        return (1, 2, 3)

    return inner()


def build(ctx, parts):
    wire(parts.click, state, [], [], note=None, api_name="designer_state")
    for name in ("a", "b"):
        common.wire(parts.click, state, [], [], note=None, api_name=name)
    wire(parts.click, state, [], [], note=None, api_name=None)
    wire(parts.click, state, [], [], note=None)
    other(parts.click, api_name="x")
    EVENTS = (
        On("a.click", "state", (), (), "note", "designer_state"),
        On("b.click", "state", (), (), note="note", api_name="designer_b"),
        On("c.click", "state", (), (), "note"),
        On("d.click", "state", (), ()),
        On("e.click", "state", (), (), None, "private"),
        On("api", "state", (), (), api_name="designer_api"),
    )
    skip = lambda: (1, 2, 3)
    short = lambda: (1, 2)
"""


def test_counts_of_a_known_source():
    assert measure(SOURCE) == Shape(
        lines=len(SOURCE.splitlines()),
        # view (annotated), task_view (once for two returns), state, decorate_only.inner, skip
        tuple_returns=5,
        # make_state only: make_other takes no ctx, decorate_only returns a call's result
        closure_factories=1,
        # the first two wire calls (the loop counts once) and the two On rows with a note
        # and an api_name
        twin_sites=4,
    )


def test_an_empty_module_counts_nothing():
    assert measure("") == Shape()
    assert measure("x = (1, 2, 3)\n") == Shape(lines=1)
