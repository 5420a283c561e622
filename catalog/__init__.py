"""The base catalog (paper 001 Table 9 bases with stored schedules, the distance-regular
graphs), shipped as the package data `topofinder.catalog_data`; see docs/formats.md."""
