"""oma-actors (placeholder, filled in below)."""
