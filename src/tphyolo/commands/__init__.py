"""Command implementations and operational tools: doctor, eval, data checks, conversion, benchmarks."""
