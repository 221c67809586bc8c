"""Tests of ``storage``."""
