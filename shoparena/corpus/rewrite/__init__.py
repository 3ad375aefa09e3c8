"""Axis-B → axis-A rewrite (``docs/paper.md`` §3/§6): a sub-task trace, where Python issued every search and
the LLM only classified, scored and narrated, becomes an agentic trace with reasoning before every call — keeping
the real tool calls, their real observations and the recommendation verbatim.

- :func:`plan_rewrite` (``trace``): what is kept, or a counted :class:`~shoparena.corpus.types.Rejection`;
- :func:`template_reasoning` / :func:`grounding_errors` (``reasoning``): the offline reasoning and the check that a
  reasoning text states only facts of the request, the observations and the calls;
- :class:`TemplateRewriter` (offline, deterministic) and :class:`LLMRewriter` (any ``shoparena.llm`` model URI,
  template fallback per unusable step) (``rewriters``);
- :func:`rewrite_all` / :func:`arewrite_all` (``run``): a batch, with its :class:`~shoparena.corpus.types.StageReport`.
"""

from shoparena.corpus.rewrite.reasoning import (
    grounding_errors,
    query_constraints,
    sources_for,
    template_reasoning,
)
from shoparena.corpus.rewrite.rewriters import (
    DEFAULT_MAX_LENGTH,
    LLMRewriter,
    TemplateRewriter,
    build_messages,
    estimate_tokens,
)
from shoparena.corpus.rewrite.run import Rewriter, arewrite_all, rewrite_all
from shoparena.corpus.rewrite.trace import (
    FINAL_TOOLS,
    SEARCH_TOOLS,
    Observer,
    RealCall,
    RewritePlan,
    catalog_observer,
    plan_rewrite,
    result_ids,
)

__all__ = [
    "DEFAULT_MAX_LENGTH", "FINAL_TOOLS", "SEARCH_TOOLS", "LLMRewriter", "Observer", "RealCall", "RewritePlan",
    "Rewriter", "TemplateRewriter", "arewrite_all", "build_messages", "catalog_observer", "estimate_tokens",
    "grounding_errors", "plan_rewrite", "query_constraints", "result_ids", "rewrite_all", "sources_for",
    "template_reasoning",
]
