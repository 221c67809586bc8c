"""Tests of ``annotation.sketches``."""
