"""Comparisons of finished runs: reading and restoring them (comparison_runs), their statistics (comparison_stats), the report and verdicts (comparison)."""
