"""Real changes: commits whose diff touches both code and tests."""
