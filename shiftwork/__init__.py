"""shiftwork: does a language model's generalization hold when its inputs or training shift?"""

__version__ = "0.1.0"
