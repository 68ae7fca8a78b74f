"""The trainer's side: evaluate predictions, rewards for RL, the reward service."""
