"""One module per exercise: its hidden checks (``make_checks(seed)``) and its ``EXERCISE`` entry."""
