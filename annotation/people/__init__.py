"""Accounts, roles, invites and sessions; the admin password; onboarding (consent, instructions, practice)."""
