"""Audit of color judges: how far to trust a model that decides whether "the car is red".

``foils`` builds matching descriptions' foils by the Rainbow rules, ``probes`` the probe
items, ``judges`` the judges (contrastive, yes/no, pixel checker, random) and ``accuracy`` runs
them and scores pair-wise accuracy, split by the color-wheel relations of
``evaluation.color.wheel``; ``report`` writes it up.
See ``docs/judges.md``.
"""
