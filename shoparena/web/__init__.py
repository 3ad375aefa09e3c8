"""The arena on the web (docs/web.md): read-only, server-rendered pages and their JSON under ``/api/…``.

``site.py`` owns the read source (database, corpus and reports directories, clock); ``board.py`` the leaderboard;
``records.py`` record search and lookup; ``trace.py`` the trajectory viewer's data (steps, rule check, judge spans,
gateway calls); ``arena.py`` races, agents, submissions and weights; ``corpus.py`` the corpus funnel and reports;
``plots.py`` server-side SVG plots; ``app.py`` the thin FastAPI routes and Jinja2 templates. ``shoparena web``
serves a bare store; :func:`arena_app` mounts the same pages on the arena service.
"""

from __future__ import annotations

from shoparena.web.app import arena_app, create_app, mount
from shoparena.web.site import Site

__all__ = ["Site", "arena_app", "create_app", "mount"]
