"""Audit of color judges: how far to trust a model that decides whether "the car is red".

``foils`` builds matching descriptions' foils by the Rainbow rules, ``wheel`` holds the
color-wheel relations, ``probes`` the probe items, ``judges`` the judges (contrastive,
yes/no, pixel checker, random) and ``audit`` runs them and scores pair-wise accuracy.
See ``docs/judges.md``.
"""
