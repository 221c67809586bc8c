"""Crash-safe file writes: `storage.files.write_atomic` and `remove_temporaries`, named here
for the evaluation modules that import them from this place (runs, Ray storage, tables)."""

from __future__ import annotations

from storage.files import remove_temporaries, write_atomic

__all__ = ["remove_temporaries", "write_atomic"]
