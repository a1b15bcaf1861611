"""reex learner: GRPO / SFT updates for the GGUF policy that reex serves through llama.cpp.

Modules: ``gguf_io`` (read/write GGUF via llama.cpp's gguf-py), ``model`` (PyTorch decoder matching
llama.cpp's maths), ``request`` (the step's request file), ``grpo`` (experience and batches), ``loss``,
``train`` (the one training loop), ``cli`` (``python3 -m reex_learner``). See docs/learner.md.
"""

__version__ = "0.1.0"
__all__ = ["gguf_io", "model", "request", "grpo", "loss", "train", "cli"]
