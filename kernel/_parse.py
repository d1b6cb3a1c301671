"""Placeholder: filled in by its topic work."""

__all__: list[str] = []
