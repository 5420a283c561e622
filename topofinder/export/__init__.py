"""Writers: schedules (JSON, MSCCL XML, .npz) and plots (docs/formats.md); the patch-panel side is :mod:`topofinder.cabling`."""
