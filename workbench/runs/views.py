from django.shortcuts import render

from workbench.runs.models import Run


def run_list(request):
    runs = Run.objects.select_related("owner", "dataset")
    if not request.user.is_staff:
        runs = runs.filter(owner=request.user)
    return render(request, "runs/run_list.html", {"runs": runs[:200]})
