"""Where the analytics read from: track streams (a detector, detection files, tracking files) and telemetry."""
