"""Where code comes from: local paths, git URLs, PyPI release histories."""
