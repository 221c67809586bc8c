"""Tests of ``annotation``."""
