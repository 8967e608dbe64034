from django.shortcuts import render

from datasets.models import Dataset


def dataset_list(request):
    datasets = Dataset.objects.select_related("owner")
    if not request.user.is_staff:
        datasets = datasets.filter(owner=request.user)
    return render(request, "datasets/dataset_list.html", {"datasets": datasets[:200]})
