"""Tests of shoparena.sdk (the stdlib client a sandboxed agent imports)."""
