"""The public APIs, each an adapter of its conventions over the ops' cores."""
