"""Errors that reach the user as one line on stderr (exit status 2), never as a traceback."""


class TopofinderError(ValueError):
    """Bad input: the message says what was wrong and what is accepted."""
