"""The corpus: normalise every trajectory source into one canonical row, filter it structurally, split it by leak
cluster into train / eval / never-touch, export SFT / KTO / GRPO sets, and rewrite axis-B traces into agentic form
(paper §5 and §9; ``paper.md`` §3; ``training.md`` §2)."""
