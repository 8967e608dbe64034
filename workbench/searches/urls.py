from django.urls import path

from workbench.searches import views

urlpatterns = [
    path("", views.search_list, name="search-list"),
    path("new/", views.search_new, name="search-new"),
    path("<int:pk>/", views.search_detail, name="search-detail"),
    path("<int:pk>/plots/", views.search_plots, name="search-plots"),
]
