"""The crowd benchmark's store checks at a small size: every acknowledged vote stored once."""

from bench import bench_crowd


def test_a_small_crowd_through_the_open_link_loses_and_duplicates_no_vote(tmp_path):
    figures = bench_crowd.run(participants=4, join_s=2.0, vote_s=14.0, folder=tmp_path)
    assert (figures["joined"], figures["n_errors"], figures["errors"]) == (4, 0, [])
    assert figures["votes"] >= 4
    assert figures["problems"] == []
