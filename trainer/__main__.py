"""Command line: python -m trainer {train, benchmark, export, lr-curve, find-batch-size, check} ...

Exit codes of `train` (trainer/protocol.py): 0 done, 1 failed, 2 bad config/dataset, 3 stopped by
SIGTERM/SIGINT with a checkpoint saved (resume with --resume), 4 out of memory, 5 loss became NaN/inf.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from trainer.config import ConfigError, load_config
from trainer.events import log_to_stderr
from trainer.protocol import EXIT_CONFIG, EXIT_FAILED, FAILED


def _cmd_train(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.cluster import placement_from_environment  # this command only: a fast --help
    from trainer.events import Events, JsonLinesReporter  # this command only: a fast --help
    from trainer.run import train  # this command only: a fast --help

    try:
        placement = placement_from_environment() if args.placement_from_environment else None
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    reporter = JsonLinesReporter(placement.events_path(args.events) if placement else args.events)
    try:
        try:
            cfg = load_config(args.config)
        except ConfigError as exc:
            Events(reporter).status(FAILED, str(exc), exit_code=EXIT_CONFIG)
            print(f"config error: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        return train(cfg, reporter=reporter, resume=args.resume, placement=placement)
    finally:
        reporter.close()


def _cmd_benchmark(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.bench.config import load_benchmark  # this command only: a fast --help
    from trainer.bench.run import run_benchmark  # this command only: a fast --help
    from trainer.engine import StopFlag  # this command only: a fast --help
    from trainer.events import EventLogHandler, Events, JsonLinesReporter  # this command only: a fast --help
    from trainer.protocol import STARTING, STATUS  # this command only: a fast --help

    reporter = JsonLinesReporter(args.events)
    events = Events(reporter)
    try:
        try:
            cfg = load_benchmark(args.config)
        except ConfigError as exc:
            events.status(FAILED, str(exc), exit_code=EXIT_CONFIG)
            print(f"config error: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        events.status(STARTING, f"benchmark of {', '.join(cfg.networks)} on devices {cfg.devices}")
        stop = StopFlag()
        stop.install()
        handler = EventLogHandler(events)
        logging.getLogger("trainer").addHandler(handler)
        try:
            outcome = run_benchmark(cfg, events=events, stop=stop)
        finally:
            logging.getLogger("trainer").removeHandler(handler)
            stop.restore()
        events.emit(STATUS, **outcome.status_fields())
        return outcome.code
    finally:
        reporter.close()


def _cmd_export(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.export import export_run, resolve_checkpoint  # this command only: a fast --help

    checkpoint = resolve_checkpoint(args.run_dir, args.checkpoint)
    result = export_run(checkpoint, args.out, tuple(args.formats.split(",")))
    print(json.dumps(result, indent=2))
    return 0


def _cmd_lr_curve(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.solver import lr_curve  # this command only: a fast --help

    cfg = load_config(args.config, check_paths=False)
    print(json.dumps([{"step": s, "lr": lr} for s, lr in lr_curve(cfg, args.total_steps, args.points)]))
    return 0


def _cmd_find_batch_size(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.batch_size import find_batch_size  # this command only: a fast --help

    cfg = load_config(args.config)
    print(json.dumps({"max_batch_size": find_batch_size(cfg, limit=args.limit)}))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    # each command imports only what it needs, so `--help` and the light commands start fast
    from trainer.engine import prepare  # this command only: a fast --help

    cfg = load_config(args.config)
    info, spec = prepare(cfg)
    out = {"ok": True, "num_classes": info.num_classes, "input_shape": [spec.channels, spec.height, spec.width]}
    if cfg.network == "custom":
        from trainer.custom_net import layer_shapes  # only a custom network needs it

        out["layers"] = layer_shapes(cfg.custom_layers, spec.channels, spec.height, spec.width, spec.num_classes)
    print(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train from a JSON config")
    p.add_argument("--config", required=True)
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--events", default="-", help="JSON-lines events file (default: stdout)")
    p.add_argument(
        "--placement-from-environment",
        action="store_true",
        help="one node of a multi-node run: SLURM_NODEID, SLURM_JOB_NUM_NODES, MASTER_ADDR, MASTER_PORT",
    )
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser("benchmark", help="measure images/s per GPU count and batch size (a JSON config)")
    p.add_argument("--config", required=True)
    p.add_argument("--events", default="-", help="JSON-lines events file (default: stdout)")
    p.set_defaults(func=_cmd_benchmark)
    p = sub.add_parser("export", help="export a checkpoint: bundle, TorchScript, ONNX")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--checkpoint", default="best", help="best | latest | a file path")
    p.add_argument("--out", required=True)
    p.add_argument("--formats", default="bundle,torchscript,onnx")
    p.set_defaults(func=_cmd_export)
    p = sub.add_parser("lr-curve", help="the learning rate per step, as JSON")
    p.add_argument("--config", required=True)
    p.add_argument("--total-steps", type=int, required=True)
    p.add_argument("--points", type=int, default=200)
    p.set_defaults(func=_cmd_lr_curve)
    p = sub.add_parser("find-batch-size", help="largest batch that fits on the first device")
    p.add_argument("--config", required=True)
    p.add_argument("--limit", type=int, default=4096)
    p.set_defaults(func=_cmd_find_batch_size)
    p = sub.add_parser("check", help="validate a config against its dataset and network")
    p.add_argument("--config", required=True)
    p.set_defaults(func=_cmd_check)
    args = parser.parse_args(argv)
    log_to_stderr()  # the server side keeps the whole log, tracebacks too (trainer.events)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
