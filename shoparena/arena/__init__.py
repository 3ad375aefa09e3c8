"""The subnet: miner and validator identities, the chain and weights, the submission gate, races, the arena
service and its API, and the simulation of whole days. Evaluation itself lives in :mod:`shoparena.validator`."""
