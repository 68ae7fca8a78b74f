"""Problem statements: back-translation by a model, or the template writer."""
