"""Everything that creates: sources, mining, environments, instructions, rollouts."""
