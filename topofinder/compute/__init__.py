"""Compute back-ends: parallel map (loky, or Dask through joblib), the allocator setting of
the processes topofinder owns, and the on-disk result cache."""
