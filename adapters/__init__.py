"""debate-kernel adapters: the I/O shell around :mod:`kernel` (CLI, transcripts, the Tinker SDK)."""

__all__: list[str] = []
