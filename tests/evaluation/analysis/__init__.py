"""Tests of ``evaluation.analysis``."""
