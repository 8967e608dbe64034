#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    # Django's own door, with a one-line answer for a database that is not migrated.
    from workbench.cli import execute

    execute(sys.argv)


if __name__ == "__main__":
    main()
