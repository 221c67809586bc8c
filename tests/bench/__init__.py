"""Tests of ``bench``."""
