"""The trajectory study's config checks and run naming (composed by :mod:`shiftwork.config`)."""

from __future__ import annotations
