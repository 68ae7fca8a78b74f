"""Where untrusted code runs: the Sandbox API, Docker and local backends, the agent workspace and
git trees."""
