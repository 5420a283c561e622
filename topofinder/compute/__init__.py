"""Compute back-ends: parallel map (joblib/loky or Dask) and the on-disk result cache."""
