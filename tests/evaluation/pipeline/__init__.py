"""Tests of ``evaluation.pipeline``."""
