"""The command line: `topofinder search | score | export | sweep | catalog | bench`."""
