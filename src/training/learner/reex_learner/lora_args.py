"""The ``--lora-*`` command-line options of ``sft_train`` (no torch import, so that the
CLI's other commands start fast); the adapters themselves are in lora.py."""

from __future__ import annotations

import argparse

#: The block matrices a LoRA may target, by llama.cpp tensor name.
LORA_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
DEFAULT_TARGETS = "attn_q,attn_k,attn_v,attn_output"


def add_lora_args(p: argparse.ArgumentParser) -> None:
    """The ``--lora-*`` options of ``sft_train``."""
    p.add_argument("--lora-rank", type=int, default=0, help="train a LoRA adapter of this rank on the frozen model instead of every weight (0 = off)")
    p.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha; the adapter is scaled by alpha/rank, as llama.cpp does (default 2 x rank)")
    p.add_argument("--lora-targets", default=DEFAULT_TARGETS, help=f"comma-separated llama.cpp matrices of a fresh adapter, of {','.join(LORA_TARGETS)} or all")
    p.add_argument("--lora-in", help="llama.cpp LoRA GGUF to continue from (its rank, alpha and targets win)")
    p.add_argument("--lora-out", help="write the adapter here as a llama.cpp LoRA GGUF (load it beside the unchanged base GGUF)")
    p.add_argument("--lora-out-type", default="f32", choices=["f32", "f16"], help="tensor type of --lora-out (default f32)")


def lora_spec(args: argparse.Namespace) -> dict | None:
    """The ``--lora-*`` options as a request's ``lora`` field (None: full-weight training)."""
    if not lora_requested(args):
        if getattr(args, "lora_out", None):
            raise ValueError("--lora-out needs --lora-rank or --lora-in")
        return None
    if not args.lora_out:
        raise ValueError("--lora-rank/--lora-in need --lora-out (where the trained adapter goes)")
    alpha = args.lora_alpha if args.lora_alpha is not None else 2.0 * args.lora_rank
    return {"in": args.lora_in, "out": args.lora_out, "rank": args.lora_rank, "alpha": alpha, "targets": args.lora_targets}


def lora_requested(args: argparse.Namespace) -> bool:
    """Whether the options ask for LoRA training (``--lora-in`` or ``--lora-rank`` > 0)."""
    return bool(getattr(args, "lora_in", None)) or int(getattr(args, "lora_rank", 0) or 0) > 0
