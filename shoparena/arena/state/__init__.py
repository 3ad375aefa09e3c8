"""The arena's persistent state (docs/arena.md §2, §6, §8): tables and migrations (``schema``), the database handle
(``db``), submissions and cooldowns, the validator work queue, the race state machine's transitions and the
embargo-respecting views. :class:`shoparena.arena.service.Arena` is the facade over all of it."""
