"""Model organisms of generalization under distribution shift.

A language model is modelled as a mixture of conditional policies; each policy answers on some
distributions and refuses (or answers wrongly) on the others, and every response states the policy's
identity aloud so that the chosen policy can be read off the output.
"""
