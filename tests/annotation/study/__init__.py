"""Tests of ``annotation.study``."""
