"""The new-benchmark form: text fields the validators read the same way as the CLI's options."""

from __future__ import annotations

from django import forms

from trainer.bench.config import BENCHMARK_NETWORKS, MODES
from trainer.config import PRECISIONS
from workbench.benchmarks.models import DEFAULT_TIME_BUDGET_MINUTES
from workbench.runs.validators import WholeTextField

NETWORK_CHOICES = [(name, name) for name in BENCHMARK_NETWORKS]


class BenchmarkForm(forms.Form):
    # Whole numbers as typed (not 1_000, which int() takes); the ranges are the validators', the
    # same for the API and the CLI.
    name = forms.CharField(required=False, max_length=200, help_text="blank: named after what it measures")
    networks = forms.MultipleChoiceField(
        choices=NETWORK_CHOICES, initial=["resnet50"], help_text="Ctrl-click (Cmd-click on a Mac) to choose several"
    )
    image_size = WholeTextField(initial=224, min_value=4, help_text="side of the square synthetic images, in pixels")
    gpus = forms.CharField(initial="1,2", label="GPUs", help_text="GPU counts, the table's columns: 1,2,4")
    batch_sizes = forms.CharField(initial="32,64,128", help_text="per GPU, the table's rows")
    precision = forms.ChoiceField(choices=[(p, p) for p in PRECISIONS], initial="fp32")
    data = forms.CharField(initial="synthetic", help_text="synthetic, or dataset:<id> (the real input pipeline)")
    layout = forms.CharField(initial="data", help_text="data (one process per GPU) or stages x groups: 2x1, 2x2")
    modes = forms.ChoiceField(
        choices=[("train", "forward + backward"), ("forward", "forward only"), ("both", "both")], initial="train"
    )
    steps = WholeTextField(initial=10, min_value=1, help_text="timed steps per cell")
    warmup_steps = WholeTextField(initial=3, min_value=0, help_text="untimed steps before them (cuDNN's autotuning)")
    find_largest = forms.BooleanField(required=False, label="Find the largest batch that fits")
    time_budget_minutes = WholeTextField(
        required=False,
        initial=DEFAULT_TIME_BUDGET_MINUTES,
        min_value=1,
        label="Time budget (minutes)",
        help_text="it holds its GPUs at most this long (runs wait behind it); stopped there, the cells measured kept",
    )

    def request(self) -> dict:
        data = dict(self.cleaned_data)
        data["modes"] = list(MODES) if data["modes"] == "both" else [data["modes"]]
        return data
