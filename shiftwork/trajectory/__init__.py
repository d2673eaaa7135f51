"""Trajectory study: agreement of OOD results along a fine-tuning run, net of ID progress."""
