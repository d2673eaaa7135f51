"""The stability study's config: its checks, its run naming and its sections' typed settings
(:mod:`shiftwork.settings`)."""

from __future__ import annotations
