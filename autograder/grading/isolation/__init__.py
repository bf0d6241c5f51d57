"""isolation (map written below)."""
