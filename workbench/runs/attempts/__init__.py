"""One attempt of a run, written once for every executor (local, Slurm) and for benchmarks.

- `files`: the attempt's files in the run folder (names from trainer/protocol.py);
- `config`: the trainer config and the one device rule (real GPUs, or the CPU for simulated ones);
- `gates`: what is checked before an attempt may start;
- `ingest`: the events file stored exactly once (the ledger), whoever follows it;
- `outcome`: the one table from how an attempt ended to the run's next state.
"""
