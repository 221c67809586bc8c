"""Tests of ``annotation.people``."""
