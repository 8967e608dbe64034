"""REST routes of the datasets app, mounted at /api/datasets/."""

urlpatterns: list = []
