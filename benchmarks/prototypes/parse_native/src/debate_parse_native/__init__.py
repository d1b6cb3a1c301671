"""Prototype: the robust parser's usual output read in compiled code (see the README beside pyproject.toml).

``read_usual(text, author_id)`` gives what ``kernel._parse_robust._parse_robust`` gives for the outputs it
reads, and None for every other output, which the pure-Python parser then reads.
"""

from debate_parse_native._usual import read_usual

__all__ = ["read_usual"]
