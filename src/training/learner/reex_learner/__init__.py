"""reex learner: GRPO / SFT updates for the GGUF policy that reex serves through llama.cpp (docs/learner.md)."""

__version__ = "0.1.0"
