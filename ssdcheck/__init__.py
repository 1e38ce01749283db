"""ssdcheck: the verification suite for Mamba-2 SSD forward kernels, as one command.

    ssdcheck test --impl NAME|module:function|path/to/file.py:function [pytest options]
    ssdcheck fuzz | replay | gate | report | mutants      (ssdcheck --help, ssdcheck SUBCOMMAND --help)

Also `python -m ssdcheck`. The subcommands live in ssdcheck/cli.py.
"""
