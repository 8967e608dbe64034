"""Helpers shared by the tests: waiting on real processes, test data builders."""
