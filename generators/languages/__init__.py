"""Languages trajforge builds tasks for (base.py: the interface; registry.py: the choice)."""
