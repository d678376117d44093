"""Credit fidelity: every method's turn credit measured against Monte Carlo ground truth (scripts/credit_fidelity.py).

`ground_truth` (continuations from restored states), `methods` (each method's credit through the training
path), `metrics` (pure figures and bootstrap), `summary` (the table), `run` (the measurement in order).
"""
