from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "workbench.runs"
    label = "runs"
    verbose_name = "Training runs"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals, and the Slurm
        # follower's start at worker_ready (it starts only where WORKBENCH_SLURM=1).
        from workbench.runs import receivers  # noqa: F401
        from workbench.runs.executors.slurm import follow  # noqa: F401
