"""Sketches: importing and rasterising line art, and the library of stored sketches."""
