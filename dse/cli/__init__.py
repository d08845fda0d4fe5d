"""The `dse` command: argument parsing and printing only; the logic lives elsewhere.

Every user mistake ends as one clear message on stderr and exit code 2, a
storage that keeps failing (dse.errors.StorageError) as one with exit code 3;
an interrupt exits 130 after the work done so far is safe. Messages never
show a password (dse.storage.mask). README: "Errors and exit codes".
"""

from __future__ import annotations

import argparse
import logging
import sys

from dse.cli import validate as validation
from dse.errors import EXIT_INTERRUPTED, EXIT_STORAGE, EXIT_USER_ERROR, DseError, StorageError
from dse.report import catalog as catalog_table
from dse.storage import mask


def _cmd_catalog(args) -> int:
    df = catalog_table.catalog_frame()
    print(catalog_table.render(df, fmt=args.format))
    return 0


def _cmd_show(args) -> int:
    print(catalog_table.show(args.chip))
    return 0


def _cmd_validate(args) -> int:
    for path in args.files:
        kind = validation.validate_file(path)
        print(f"{path}: valid {kind}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from dse import __version__

    p = argparse.ArgumentParser(prog="dse", description="Design-space explorer for AI accelerators.")
    p.add_argument("--version", action="version", version=f"dse {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    c = sub.add_parser("catalog", help="table of the catalog chips (peaks, bandwidth, capacity, TDP)",
                       description="Print the chips of the catalog (dse/data/chips) with their peak FLOP/s per "
                                   "format, memory, bandwidth, capacity, TDP and machine balance (FLOP per byte). "
                                   "Example: dse catalog --format markdown")
    c.add_argument("--format", choices=["text", "markdown", "csv"], default="text",
                   help="output as an aligned table (default), a markdown table or CSV")
    c.set_defaults(func=_cmd_catalog)

    s = sub.add_parser("show", help="every derived figure of one chip",
                       description="Print every figure of one chip: what its file gives and what is derived from "
                                   "it (peaks, bandwidth, capacity, energies, power, modelled area and cost), each "
                                   "with what it is built from. Example: dse show h100-sxm")
    s.add_argument("chip", help="catalog name (see `dse catalog`) or a chip YAML file")
    s.set_defaults(func=_cmd_show)

    v = sub.add_parser("validate", help="check chip, workload, study, what-if, serving knob, measurements CSV and "
                                        "model config.json files and report every problem",
                       description="Recognise what each file is (a chip, workload, study, what-if or serving knob "
                                   "YAML, a measurements CSV, a Hugging Face config.json) and validate it with the "
                                   "code that runs it: every problem at once, located file:line:col (the keys: dse "
                                   "schema). Example: dse validate studies/qwen3-8b-decode-chip.yaml")
    v.add_argument("files", nargs="+", help="YAML, CSV or JSON files")
    v.set_defaults(func=_cmd_validate)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return p


# Other modules add their sub-commands here (kept as a list so cli.py holds no logic).
_EXTRA_COMMANDS: list = []


def _load_extra_commands() -> None:
    import importlib

    if _EXTRA_COMMANDS:
        return
    for mod in ("dse.cli.eval", "dse.cli.tiles", "dse.cli.study", "dse.cli.whatif", "dse.cli.calibrate",
                "dse.cli.serve", "dse.cli.schema"):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name == mod:
                continue
            raise
        _EXTRA_COMMANDS.append(m.register)


class _Notes(logging.Handler):
    """dse's log records as ``dse: <message>`` lines on the standard error of the moment: warnings always (a torn
    journal line cut), notes (INFO: the kernels' first compile, dse.model.jit.announce_compiling) on a terminal
    only, for the person waiting there, as the progress bar (outside one: plain progress lines, no notes)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and not sys.stderr.isatty():
            return
        print(f"dse: {record.getMessage()}", file=sys.stderr, flush=True)


def _show_notes() -> None:
    log = logging.getLogger("dse")
    if not any(isinstance(h, _Notes) for h in log.handlers):
        log.addHandler(_Notes(logging.INFO))
        log.setLevel(logging.INFO)
        log.propagate = False


def main(argv: list[str] | None = None) -> int:
    _show_notes()
    _load_extra_commands()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StorageError as e:
        print(f"dse: storage error: {mask(e)}", file=sys.stderr)
        return EXIT_STORAGE
    except DseError as e:
        print(f"dse: error: {mask(e)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("dse: interrupted; completed work is saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
