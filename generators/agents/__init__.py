"""The agent loop and one rollout of a task."""
