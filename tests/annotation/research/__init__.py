"""Tests of ``annotation.research``."""
