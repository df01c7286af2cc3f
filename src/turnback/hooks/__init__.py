"""Adapters for agent harnesses that call hooks (Claude Code)."""
