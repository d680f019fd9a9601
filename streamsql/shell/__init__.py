"""The interactive shell's parts: completion, result display, client messages."""
