"""Pairwise human-judgment studies: design and freeze, trials and judgments."""
