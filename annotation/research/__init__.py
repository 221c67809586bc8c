"""What the research tabs record (runs with audit rows) and assemble (concept and leaderboard views)."""
