"""This project's Hydra launchers, where Hydra accepts launchers (classes defined inside `hydra_plugins`):
`hydra/launcher=joblib_workers` (joblib_workers.py; what it adds: agentcredit/run/joblib_launcher.py)."""
