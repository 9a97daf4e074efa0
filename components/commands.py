"""Commands beyond validate/schema/new register themselves with the CLI when imported here."""
