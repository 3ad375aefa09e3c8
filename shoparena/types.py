"""The shared words: literals several packages speak, defined once at the bottom of the import graph.

Everything here is a bare ``Literal`` plus the tuple of its values (for validation and CLI choices); this
module imports nothing from shoparena, so any package may use it (catalog → … → cli).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["AXES", "FLAVORS", "MODES", "SEARCH_AXES", "STATUSES", "Axis", "Flavor", "Mode", "SearchAxis",
           "Status"]

Status = Literal["SUCCESS", "FAILED", "TIMED_OUT"]
"""How one problem's run ended: the ORO envelope status (docs/shoppingbench.md §6.2), stored with every record."""
STATUSES: tuple[str, ...] = get_args(Status)

Mode = Literal["upstream", "strict"]
"""Search and scoring mode: ``upstream`` reproduces the reference behaviour, ``strict`` fixes its quirks."""
MODES: tuple[str, ...] = get_args(Mode)

Flavor = Literal["upstream", "oro"]
"""Which reference implementation to reproduce where the two differ: ShoppingBench's own code, or ORO's
(search fallbacks, the tag protocol's tool block)."""
FLAVORS: tuple[str, ...] = get_args(Flavor)

SearchAxis = Literal["A", "B"]
"""Who asked for one search call (gateway attribution): A, the LLM emitted it; B, Python issued it (e.g.
inside an ORO composite tool)."""
SEARCH_AXES: tuple[str, ...] = get_args(SearchAxis)

Axis = Literal["A", "B", "mixed", "none"]
"""A whole trajectory's axis: A, the LLM emitted every search call; B, Python did; ``mixed``: both;
``none``: no search call."""
AXES: tuple[str, ...] = get_args(Axis)
