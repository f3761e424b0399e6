"""Named versions v0..vN of the ladder engine: one toggle changes per step (filled in by the ladder work)."""

VERSIONS: dict[str, dict] = {}
