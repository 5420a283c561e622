"""The finder (paper 001 §5.4, App. A.3): bases per size, recipes, predicted Pareto growth through
the expansions, build-and-replay verification, the verified frontier, the catalog searches."""
