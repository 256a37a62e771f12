"""The gate: baseline and thresholds files in, a verdict out (pure; no pytest, no CLI)."""
