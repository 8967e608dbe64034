"""Plumbing every app shares and nothing else: channel-group names and best-effort publishing,
the API's JSON parser and its OpenAPI error bodies. It imports no app (the lowest Django layer)."""
