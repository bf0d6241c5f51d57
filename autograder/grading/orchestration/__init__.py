"""orchestration (map written below)."""
