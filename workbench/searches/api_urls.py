from django.urls import path

from workbench.searches import api

urlpatterns = [
    path("searches/", api.search_list, name="api-searches"),
    path("searches/<int:pk>/", api.search_detail, name="api-search"),
    path("searches/<int:pk>/pause/", api.search_pause, name="api-search-pause"),
    path("searches/<int:pk>/resume/", api.search_resume, name="api-search-resume"),
    path("searches/<int:pk>/abort/", api.search_abort, name="api-search-abort"),
    path("searches/<int:pk>/train-best/", api.search_train_best, name="api-search-train-best"),
]
