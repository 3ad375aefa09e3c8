"""Tests of the arena: sandbox, judge, validator loop."""
