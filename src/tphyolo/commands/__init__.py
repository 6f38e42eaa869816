"""One module per CLI command: parse its flags, call the library, print. The task commands (train, val,
predict, track, serve, ...) sit here; the tools around them (doctor, bench, profile, convert, report) in
`tools/`, and the flag groups several commands share in `options/`."""
