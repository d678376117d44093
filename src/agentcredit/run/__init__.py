"""Running a job: the composition root (compose), training (train), evaluation (evaluate), sweeps and preemption."""
