"""Tests of ``evaluation.color``."""
