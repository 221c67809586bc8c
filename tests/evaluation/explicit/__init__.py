"""Tests of ``evaluation.explicit``."""
