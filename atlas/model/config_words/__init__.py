"""config.json in words (being split by what each key explains)."""
