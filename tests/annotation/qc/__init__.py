"""Tests of ``annotation.qc``."""
