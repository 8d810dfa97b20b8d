#!/usr/bin/env python
"""Django's command-line utility; starts the embedded services when none are configured."""

import atexit
import os
import sys

# Commands that only report on services must not start them.
_NO_SERVICES = {"services", "check", "help", "--help", "version", "--version"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command not in _NO_SERVICES:
        from searchsite import embedded

        atexit.register(embedded.ensure_running().stop)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
