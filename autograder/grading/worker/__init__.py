"""worker (map written below)."""
