"""The cross-study: prompt stability of the trajectory and organisms studies' checkpoints."""
