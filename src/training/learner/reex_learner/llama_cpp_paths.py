"""Where llama.cpp's Python pieces (gguf-py, convert_lora_to_gguf.py) are looked for."""

from __future__ import annotations

from pathlib import Path


def llama_cpp_candidates(name: str, first: Path | None = None) -> list[Path]:
    """Candidate paths of ``name`` inside a llama.cpp tree, most specific first: ``first`` (from an
    environment variable), then, for each folder above this package, the tree ``npm install``
    extracts into node_modules/.cache/reex-llama.cpp and node-llama-cpp's own llama.cpp clone,
    then those under the working directory and /tmp/llama.cpp."""
    out: list[Path] = [first] if first is not None else []
    here = Path(__file__).resolve()
    for parent in here.parents:
        out.append(parent / "node_modules" / ".cache" / "reex-llama.cpp" / name)
        out.append(parent / "node_modules" / "node-llama-cpp" / "llama" / "llama.cpp" / name)
    out.append(Path.cwd() / "node_modules" / "node-llama-cpp" / "llama" / "llama.cpp" / name)
    out.append(Path("/tmp/llama.cpp") / name)
    return out
