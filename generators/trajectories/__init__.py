"""Trajectories in and out: other tools' formats, SFT and RL rendering, transitions."""
