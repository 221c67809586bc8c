"""The crowd hand-out's placement at the full study's size.

``python -m bench.bench_placement [--pairs 26838] [--people 10,50,100] [--trials 20]
[--repeats 3]``: `annotation.assignment.placement` (a maximum flow of each person's
model-pair trials onto the pairs they may take) as every hand-out of a crowd study's trials
and every join computes it, for that many people in (and one newcomer) on `pairs` pairs of
5 free votes each, nothing judged yet (every person may take every pair: the most edges).
Prints the median seconds per size.
"""

from __future__ import annotations

import argparse
import statistics
import time

from annotation.assignment import placement


def measure(pairs: int, people: int, trials: int, repeats: int) -> float:
    """Median seconds of `repeats` placements of ``people + 1`` demands of `trials`."""
    capacity = dict.fromkeys(range(pairs), 5)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        placement([trials] * (people + 1), capacity, set())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=26838, help="model pairs of the study")
    parser.add_argument("--people", default="10,50,100", help="comma-separated people in the study")
    parser.add_argument("--trials", type=int, default=20, help="model-pair trials each is owed")
    parser.add_argument("--repeats", type=int, default=3, help="placements per size (the median is kept)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.people.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--people must be comma-separated whole numbers, got {args.people!r}")
    for name, value in (("--pairs", args.pairs), ("--trials", args.trials), ("--repeats", args.repeats)):
        if value < 1:
            parser.error(f"{name} must be 1 or more, got {value}")
    if not sizes or min(sizes) < 0:
        parser.error(f"--people must be whole numbers of 0 or more, got {args.people!r}")
    print("| people in | pairs | seconds (median) |\n|---:|---:|---:|")
    for people in sizes:
        print(f"| {people} | {args.pairs:,} | {measure(args.pairs, people, args.trials, args.repeats):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
