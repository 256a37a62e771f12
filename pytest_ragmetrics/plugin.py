"""pytest hooks (placeholder until the gate lands)."""
