"""End-to-end walks in a real Chromium (every test marked ``browser``)."""
