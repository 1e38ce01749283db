"""Alias of `ssdcheck fuzz` (ssdcheck/fuzz.py), kept so that older job scripts keep working:

    python -m ssdcheck_fuzz --impl NAME --minutes 10     ->  ssdcheck fuzz --impl NAME --minutes 10
    python -m ssdcheck_fuzz replay FILE                  ->  ssdcheck replay FILE
"""
