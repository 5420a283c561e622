"""Writers: schedules (JSON, MSCCL XML, .npz), patch-panel plans and plots (docs/formats.md)."""
