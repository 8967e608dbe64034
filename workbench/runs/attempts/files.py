"""The files one attempt leaves in its run folder; their names are the trainer's contract."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer import protocol


@dataclass(frozen=True)
class AttemptFiles:
    run_dir: Path
    attempt: int

    @property
    def launch(self) -> Path:
        """The trainer config this attempt was launched with."""
        return self.run_dir / protocol.launch_name(self.attempt)

    @property
    def events(self) -> Path:
        """The first node's events: the run's series and its final status."""
        return self.run_dir / protocol.events_name(self.attempt)

    @property
    def ledger(self) -> Path:
        """How far `events` is stored (ingest.IngestLedger)."""
        return self.run_dir / protocol.ledger_name(self.attempt)

    @property
    def batch_script(self) -> Path:
        return self.run_dir / protocol.batch_script_name(self.attempt)

    @property
    def system(self) -> Path:
        """The first node's `system` samples, written by the sampler beside its trainer."""
        return self.run_dir / protocol.system_events_name(self.attempt)

    def node_events(self) -> list[Path]:
        """The other nodes' outcome files, node 1 first."""
        return sorted(self.run_dir.glob(protocol.node_events_glob(self.attempt)))

    def system_events(self) -> list[Path]:
        """The system samples each node wrote beside its trainer, the first node's first."""
        first = self.system
        others = sorted(self.run_dir.glob(protocol.node_system_events_glob(self.attempt)))
        return [first, *others] if first.exists() else others
