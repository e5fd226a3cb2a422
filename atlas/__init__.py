"""The architecture atlas: facts about transformer families, computed from the models themselves."""
