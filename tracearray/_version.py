"""tracearray's version: the one source (pyproject.toml reads it; so does the disk cache's key)."""
__version__ = "0.1.0"
