"""The finder (paper 001 §6): bases per size, recipes, predicted Pareto growth through the
expansions, build-and-replay verification, the verified frontier, the catalog searches."""
