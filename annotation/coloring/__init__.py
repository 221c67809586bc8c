"""Designers' colorings: the fill algorithm (Python twin of the browser's), coloring tasks, storing colorings, the stored human distributions."""
