"""Whole questions asked of a model or an ExecuTorch program - place it, run it beside eager, read a `.pte`, list
what the libs register, describe the backend - each one call from plain options to a plain, JSON-ready result. The
`devcopy` subcommands parse their flags, call one of these and format what it returns (docs/design.md §3)."""
