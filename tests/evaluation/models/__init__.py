"""Tests of ``evaluation.models``."""
