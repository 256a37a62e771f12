"""The offline toolkit as library functions (no argument parsing): compare, ablate, pool, agreement, leakage, export."""
