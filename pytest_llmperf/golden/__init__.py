"""Golden baselines: where they are stored, what a measurement is comparable with (the
fingerprint), and how a point is checked against its golden or recorded into it."""
