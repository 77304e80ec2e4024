"""Running training: the roles (protocol), launchers, evaluation and the run record."""
