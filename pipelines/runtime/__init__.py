"""How stages run: Beam options, the stage runner, sinks, progress, table specs and readers."""
