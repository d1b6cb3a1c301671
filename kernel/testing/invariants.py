"""Ready-made invariant checks for grouped-advantage estimators."""

from __future__ import annotations

__all__: list[str] = []
