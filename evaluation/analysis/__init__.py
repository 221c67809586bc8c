"""From stored distributions to results: scoring, Tables 1-2 and 6-8, figures, the concept comparison, reference sets, judgment analysis."""
