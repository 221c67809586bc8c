"""Color science on arrays: the UW-71 palette, color spaces, extraction of a distribution from pixels, the metrics, SCD plausibility."""
