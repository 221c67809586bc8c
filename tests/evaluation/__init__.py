"""Tests of ``evaluation``."""
