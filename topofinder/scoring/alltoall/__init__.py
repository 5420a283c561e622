"""All-to-all (paper 001 LP (3), App. A.5): the maximum concurrent flow (exact, orbit-reduced,
or a certified bracket by column generation) and all-to-all step schedules from a
time-expanded flow LP."""
