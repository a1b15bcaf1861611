"""Command line: ``python3 -m reex_learner step --request FILE | export | interpolate | merge | info`` (see docs/learner.md).
Every setting of a training step or run is in the request file; the other commands convert or describe files."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def torch_runtime(rt: dict[str, Any]):
    """torch, the device and the dtype (autocast, or the HF backend's base weights) of a request's ``runtime``; threads set."""
    import torch

    if rt["threads"]:
        torch.set_num_threads(rt["threads"])
    device = rt["device"]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"runtime.device {device}: PyTorch sees no CUDA device")
    dtype = getattr(torch, _DTYPES[rt["dtype"]])
    if dtype == torch.float16 and not str(device).startswith("cuda"):
        print("reex_learner: runtime.dtype f16 needs CUDA (PyTorch's CPU autocast is bf16-only); computing in f32", file=sys.stderr)
        dtype = torch.float32
    return torch, torch.device(device), dtype


def write_outputs(req: dict[str, Any], policy: Any, g: Any, lora: dict[str, Any] | None, checkpoint: str | None = None) -> str | None:
    """The request's files: the adapter (``lora.out``), the model (``paths.out``: with a LoRA, the base with
    the adapter merged in), the masters. A ``checkpoint`` stem writes only ``STEM.lora.gguf`` (a LoRA) or
    ``STEM.gguf`` in the model's own tensor types (``keep``), and returns its path."""
    from .gguf_io import quantized_matrices, write_gguf
    from .lora import write_lora_gguf
    from .model import save_master, state_for_gguf

    paths, out_type, lora_out = req["paths"], req["runtime"]["outType"], lora and req["lora"]["out"]
    if checkpoint is not None:
        paths, out_type, lora_out = {"out": None if lora else f"{checkpoint}.gguf", "master": None}, "keep", lora and f"{checkpoint}.lora.gguf"
    if lora_out:
        write_lora_gguf(lora_out, policy, out_type=req["lora"]["outType"], name=f"{g.field('general.name', 'reex')} LoRA")
    if paths["out"]:
        if out_type == "keep" and quantized_matrices(g):
            out_type = "f16"  # re-quantising would round away updates far smaller than a Q8_0 step
        write_gguf(paths["out"], g, state_for_gguf(policy), out_type=out_type)
    if paths["master"]:
        save_master(policy, paths["master"])
    return lora_out or paths["out"]


def load_policy(req: dict[str, Any], device: Any) -> tuple[Any, Any, Any, dict[str, Any] | None, bool]:
    """The GGUF policy (masters loaded, LoRA put on), its GGUF, the KL reference, the LoRA report, whether masters were loaded."""
    from .lora import BaseView, setup_lora
    from .model import load_master, load_model

    paths, lo, rt = req["paths"], req["lora"], req["runtime"]
    if not paths["out"] and lo is None:
        raise ValueError("paths.out is required (or train a LoRA: lora)")
    if paths["master"] and lo is not None:
        raise ValueError("paths.master keeps full f32 weights; with a LoRA the base is frozen and the adapter is stored in f32: no master")
    # weights stay float32 (master copies for AdamW); runtime.dtype is the autocast compute dtype
    policy, g = load_model(paths["model"], device=device)
    master_loaded = load_master(policy, g, paths["master"]) if paths["master"] else False
    lora = setup_lora(policy, lo, seed=req["train"]["seed"]) if lo is not None else None
    policy.grad_checkpoint = rt["gradCheckpoint"]
    policy.attn_impl = rt["attn"] if rt["attn"] != "auto" else ("sdpa" if device.type == "cuda" else "eager")
    ref = None
    if paths["ref"]:
        ref, _ = load_model(paths["ref"], device=device)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
    elif lora is not None and req["train"]["klBeta"]:
        ref = BaseView(policy)  # KL to the base: the same weights with the adapter switched off
    return policy, g, ref, lora, master_loaded


def cmd_step(args: argparse.Namespace) -> int:
    """One GRPO/SFT step (or with ``run`` a multi-step SFT run: sft_run.py) as the request file (``--request``)
    describes it; metrics JSON (a run: its progress lines, the last its summary) on stdout and in ``paths.metrics``."""
    from .request import read_request

    req = read_request(args.request)
    if req["backend"] == "hf":
        return _hf_step(req)
    paths = req["paths"]
    torch, device, dtype = torch_runtime(req["runtime"])
    if req["run"] is not None:
        from .sft_run import run_sft

        _print_metrics(run_sft(req, args.request, device, dtype), paths["metrics"], echo=False)
        return 0
    from .grpo import check_token_ids, read_experience
    from .request import step_config
    from .train import Backend, train

    t0 = time.time()
    policy, g, ref, lora, master_loaded = load_policy(req, device)
    rollouts = read_experience(paths["experience"])
    check_token_ids((r.prompt_tokens + r.tokens for r in rollouts), g.hparams.n_vocab, paths["experience"])
    cfg = step_config(req, dtype)
    load_s = time.time() - t0
    metrics: dict[str, Any] = train(Backend(policy, ref), rollouts, cfg)
    t1 = time.time()
    write_outputs(req, policy, g, lora)
    metrics.update(
        {
            "lora": lora,
            "master": paths["master"],
            "master_loaded": master_loaded,
            "model": paths["model"],
            "out": paths["out"],
            "experience": paths["experience"],
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
            "load_s": load_s,
            "write_s": time.time() - t1,
        }
    )
    _print_metrics(metrics, paths["metrics"])
    return 0


def _print_metrics(metrics: dict[str, Any], path: str | None, echo: bool = True) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    if echo:
        print(json.dumps(metrics, sort_keys=True))


def _write(args: argparse.Namespace, base: Any, tensors: dict[str, Any], **fields: Any) -> int:
    """Writes ``base`` with ``tensors`` replaced, its metadata kept, to ``--out`` in ``--out-type`` (atomically); prints what it wrote."""
    from .gguf_io import write_gguf

    write_gguf(args.out, base, tensors, out_type=args.out_type)
    print(json.dumps({"out": args.out, **fields, "out_type": args.out_type, "bytes": os.path.getsize(args.out)}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Rewrites a GGUF with its 2-D weights in another type."""
    from .gguf_io import read_gguf

    return _write(args, read_gguf(args.model), {})


def cmd_interpolate(args: argparse.Namespace) -> int:
    """Writes base + alpha * (tuned - base) over every tensor (weight-space interpolation towards the start, as WiSE-FT
    and WARP's LITI do)."""
    from .gguf_io import read_gguf

    if not 0.0 <= args.alpha <= 1.0:
        raise ValueError(f"--alpha must be in [0, 1], got {args.alpha}")
    base, tuned = read_gguf(args.base), read_gguf(args.tuned)
    if base.arch != tuned.arch or base.hparams != tuned.hparams:
        raise ValueError(f"{args.tuned} is not a fine-tune of {args.base}: architecture or hyperparameters differ")
    if list(base.tensors) != list(tuned.tensors):
        raise ValueError(f"{args.tuned} and {args.base} name different tensors")
    mixed = {}
    for name, a in base.tensors.items():
        b = tuned.tensors[name]
        if a.shape != b.shape:
            raise ValueError(f"tensor {name}: shape {b.shape} in {args.tuned}, {a.shape} in {args.base}")
        mixed[name] = a + args.alpha * (b - a)
    return _write(args, base, mixed, alpha=args.alpha)


def cmd_merge(args: argparse.Namespace) -> int:
    """Writes the base with a llama.cpp LoRA adapter folded into its weights: one GGUF that serves as base + adapter does."""
    from .gguf_io import read_gguf
    from .lora import merge_into, read_lora_gguf

    base = read_gguf(args.model)
    merged = merge_into(base, read_lora_gguf(args.lora), args.scale)
    return _write(args, base, merged, tensors_merged=len(merged), scale=args.scale)


def cmd_info(args: argparse.Namespace) -> int:
    from .gguf_io import read_gguf

    g = read_gguf(args.model)
    info = {
        "hparams": g.hparams.to_dict(),
        "tensors": {n: [list(a.shape), g.tensor_types[n].name] for n, a in g.tensors.items()},
        "parameters": int(sum(a.size for n, a in g.tensors.items() if n != "rope_freqs.weight")),
        "metadata_keys": [f.name for f in g.fields],
    }
    print(json.dumps(info, indent=2))
    return 0


def _hf_step(req: dict[str, Any]) -> int:
    """Path (b): the request's step on a Hugging Face checkpoint with a peft LoRA (hf_lora.py)."""
    from .hf_lora import MissingHFDependency, run_hf_step

    try:
        metrics = run_hf_step(req)
    except MissingHFDependency as err:
        print(f"reex_learner: error: {err}", file=sys.stderr)
        return 3
    if int(os.environ.get("RANK", "0") or 0) == 0:
        _print_metrics(metrics, req["paths"]["metrics"])
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m reex_learner", description="reex GRPO/SFT learner over GGUF models")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("step", help="one GRPO/SFT step, or a multi-step SFT run, as a request file describes it (src/training/learner-request.ts)")
    s.add_argument("--request", required=True, help="the step's request JSON (src/training/learner/learner-request.schema.json)")
    s.set_defaults(func=cmd_step)

    ex = sub.add_parser("export", help="rewrite a GGUF's 2-D weights as f32, f16 or q8_0 (1-D tensors stay f32; Q8_0 as llama-quantize writes it)")
    ex.add_argument("--model", required=True)
    ex.add_argument("--out", required=True)
    ex.add_argument("--out-type", required=True, choices=["f32", "f16", "q8_0"])
    ex.set_defaults(func=cmd_export)

    it = sub.add_parser("interpolate", help="write base + alpha * (tuned - base), a fine-tune moved part of the way back to its start")
    it.add_argument("--base", required=True, help="the start model (its metadata is kept)")
    it.add_argument("--tuned", required=True, help="a fine-tune of --base (same architecture and tensors)")
    it.add_argument("--alpha", type=float, required=True, help="share of the fine-tune's update kept: 0 gives --base, 1 --tuned")
    it.add_argument("--out", required=True)
    it.add_argument("--out-type", default="keep", choices=["keep", "f32", "f16", "q8_0"], help="as export's; keep: --base's types (default keep)")
    it.set_defaults(func=cmd_interpolate)

    mg = sub.add_parser("merge", help="write a base GGUF with a LoRA adapter folded in: W + scale * (alpha / r) B @ A")
    mg.add_argument("--model", required=True, help="the base the adapter was trained on (its metadata is kept)")
    mg.add_argument("--lora", required=True, help="a llama.cpp LoRA GGUF (ours or convert_lora_to_gguf.py's)")
    mg.add_argument("--scale", type=float, default=1.0, help="the adapter's weight, as llama.cpp's --lora-scaled (default 1)")
    mg.add_argument("--out", required=True)
    mg.add_argument("--out-type", default="keep", choices=["keep", "f32", "f16", "q8_0"], help="as export's; keep: --model's types (default keep)")
    mg.set_defaults(func=cmd_merge)

    inf = sub.add_parser("info", help="print hyperparameters and tensors of a GGUF")
    inf.add_argument("--model", required=True)
    inf.set_defaults(func=cmd_info)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .train import OldLogprobMismatch

    try:
        return int(args.func(args) or 0)
    except OldLogprobMismatch as err:
        print(f"reex_learner: error: old-logprob disagreement: {err}", file=sys.stderr)
        return 4
    except (ValueError, FileNotFoundError) as err:
        print(f"reex_learner: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
