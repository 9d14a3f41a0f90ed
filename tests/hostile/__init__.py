"""Hostile input on the surfaces added last (issue 42): each test asserts the right answer,
not only that nothing crashes."""
