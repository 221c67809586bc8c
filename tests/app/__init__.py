"""Tests of ``app``."""
