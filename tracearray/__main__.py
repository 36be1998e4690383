"""``python -m tracearray``: the environment report and the disk cache.

    python -m tracearray info           the report of tracearray.show_config()
    python -m tracearray cache dir      the disk cache folder ("off" when disabled)
    python -m tracearray cache size     its entries and bytes per backend
    python -m tracearray cache clear    delete its entries
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracearray",
                                     description="tracearray's environment and disk cache")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="versions, CPU, threads, variables, cache, GPU")
    cache = commands.add_parser("cache", help="the disk cache of compiled kernels")
    cache.add_argument("action", choices=("dir", "size", "clear"))
    args = parser.parse_args(argv)

    from . import cachefiles, config, envreport
    if args.command == "info":
        print(envreport.format_report())
        return 0
    root = config.cache_dir()
    if args.action == "dir":
        print(root if root is not None else "off (TRACEARRAY_CACHE_DIR)")
    elif args.action == "size":
        print(envreport.cache_description()[1])
    else:
        if root is None:
            print("the disk cache is off (TRACEARRAY_CACHE_DIR): nothing to clear")
            return 0
        files, freed = cachefiles.clear(root)
        print(f"deleted {files} file(s), {cachefiles.human_bytes(freed)}, from {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
