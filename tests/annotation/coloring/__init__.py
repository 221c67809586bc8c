"""Tests of ``annotation.coloring``."""
