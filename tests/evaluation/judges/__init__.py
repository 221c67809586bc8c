"""Tests of ``evaluation.judges``."""
