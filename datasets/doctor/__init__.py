"""The data doctor: what is wrong with a dataset's data (docs/design.md, "The data doctor"). Built
so far: duplicates and leaks between splits (duplicates.py, report.py, checks.py); the services
that ask for a check are datasets.services', the doors datasets.api_duplicates and the pages'."""
