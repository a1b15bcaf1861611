"""reex learner: GRPO / SFT updates for the GGUF policy that reex serves through llama.cpp.

Modules: ``gguf_io`` (read/write GGUF via llama.cpp's gguf-py), ``model`` (PyTorch llama/qwen2
decoder matching llama.cpp's maths), ``grpo`` (experience format, losses, training step), ``cli``
(``python3 -m reex_learner``). See docs/learner.md.
"""

__version__ = "0.1.0"
__all__ = ["gguf_io", "model", "grpo", "cli"]
