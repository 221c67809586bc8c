"""Evaluation runs: the run tables, planning, the three stages, executors, background jobs, imports of images made elsewhere."""
