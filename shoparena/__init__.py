"""shoparena: Bittensor-style agent arenas as a trajectory factory for agentic commerce.

The package is laid out like the data flow: ``catalog`` → ``tasks`` → ``env`` → ``scoring`` → … → ``cli``.
Imports only ever point downstream.
"""

__version__ = "0.1.0"
