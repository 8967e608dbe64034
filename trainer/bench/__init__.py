"""Benchmark mode: the configuration (config.py, standard library only: the workbench validates
requests with it in processes that never load torch), one cell in one process (trial.py), the whole
benchmark (run.py), the tables (table.py), and the bench/ scripts' loops (loops.py).

Empty on purpose: importing `trainer.bench.config` must not load torch."""
