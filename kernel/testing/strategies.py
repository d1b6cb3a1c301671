"""Composable Hypothesis strategies (one module, one section per topic)."""

from __future__ import annotations

__all__: list[str] = []

# --- text and votes (parsing, rewards) -----------------------------------------------------------

# --- grouped rewards (advantages) ----------------------------------------------------------------

# --- token trajectories (datums) -----------------------------------------------------------------
