"""The crowd benchmark's store checks at a small size: every acknowledged vote stored once."""

import argparse
import os

import pytest

from bench import bench_crowd


def test_a_small_crowd_through_the_open_link_loses_and_duplicates_no_vote(tmp_path):
    # Two client processes: the path the pinned runs in BENCHMARKS.md take (each process's
    # outcomes must come back to the right participant for the store checks to pass).
    figures = bench_crowd.run(participants=4, join_s=2.0, vote_s=14.0, folder=tmp_path, client_processes=2)
    assert (figures["joined"], figures["n_errors"], figures["errors"]) == (4, 0, [])
    assert figures["votes"] >= 4
    assert figures["problems"] == []
    assert figures["client_processes"] == 2


def test_server_cpus_must_leave_some_to_the_clients():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) > 1:
        assert bench_crowd._cpus(f"{allowed[0]}") == [allowed[0]]
    with pytest.raises(argparse.ArgumentTypeError, match="some, not all"):
        bench_crowd._cpus(",".join(map(str, allowed)))
    with pytest.raises(argparse.ArgumentTypeError, match="CPU numbers"):
        bench_crowd._cpus("0,x")
