"""Command line: ``python3 -m reex_learner step|logprobs|export|interpolate|merge|info|hf-step ...`` (see docs/learner.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def _torch_setup(args: argparse.Namespace):
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, _DTYPES[args.dtype])
    if dtype == torch.float16 and not str(device).startswith("cuda"):
        print("reex_learner: --dtype f16 needs CUDA (PyTorch's CPU autocast is bf16-only); computing in f32", file=sys.stderr)
        dtype = torch.float32
    return torch, device, dtype


def _check_tokens(rollouts, n_vocab: int, path: str) -> None:
    for i, r in enumerate(rollouts):
        for t in r.prompt_tokens + r.tokens:
            if not 0 <= t < n_vocab:
                raise SystemExit(f"{path}: rollout {i}: token id {t} outside the model's vocabulary (0..{n_vocab - 1})")


def _write_step_outputs(args: argparse.Namespace, policy: Any, g: Any, lora: dict[str, Any] | None) -> None:
    """The step's files: the adapter (``--lora-out``), the model (``--out``: with a LoRA, the base with
    the adapter merged in), the masters."""
    from .gguf_io import quantized_matrices, write_gguf
    from .lora import merged_state, write_lora_gguf
    from .model import save_master, state_for_gguf

    if lora is not None:
        write_lora_gguf(args.lora_out, policy, out_type=args.lora_out_type, name=f"{g.field('general.name', 'reex')} LoRA")
    if args.out:
        out_type = args.out_type
        if out_type == "keep" and quantized_matrices(g):
            out_type = "f16"  # re-quantising would round away updates far smaller than a Q8_0 step
        write_gguf(args.out, g, merged_state(policy) if lora is not None else state_for_gguf(policy), out_type=out_type)
    if args.master:
        save_master(policy, args.master)


def cmd_step(args: argparse.Namespace) -> int:
    torch, device, dtype = _torch_setup(args)
    from .grpo import read_experience, step_config_from_args, train_step
    from .lora import BaseView, setup_lora
    from .lora_args import lora_requested
    from .model import load_master, load_model

    if not args.out and not lora_requested(args):
        raise ValueError("--out is required (or train a LoRA: --lora-rank/--lora-in with --lora-out)")
    if args.master and lora_requested(args):
        raise ValueError("--master keeps full f32 weights; with a LoRA the base is frozen and the adapter is stored in f32: drop --master")
    t0 = time.time()
    # weights stay float32 (master copies for AdamW); --dtype is the autocast compute dtype
    policy, g = load_model(args.model, device=device)
    master_loaded = load_master(policy, g, args.master) if args.master else False
    lora = setup_lora(policy, args, seed=args.seed)
    policy.grad_checkpoint = args.grad_checkpoint
    policy.attn_impl = args.attn
    ref = None
    if args.ref:
        ref, _ = load_model(args.ref, device=device)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
    elif lora is not None and args.kl_beta:
        ref = BaseView(policy)  # KL to the base: the same weights with the adapter switched off
    rollouts = read_experience(args.experience)
    _check_tokens(rollouts, g.hparams.n_vocab, args.experience)
    cfg = step_config_from_args(args, dtype, args.kl_beta, share_prefix=args.share_prefix, pack_tokens=args.pack_tokens)
    load_s = time.time() - t0
    metrics: dict[str, Any] = train_step(policy, rollouts, cfg, ref=ref)
    t1 = time.time()
    _write_step_outputs(args, policy, g, lora)
    metrics.update(
        {
            "lora": lora,
            "master": args.master,
            "master_loaded": master_loaded,
            "model": args.model,
            "out": args.out,
            "experience": args.experience,
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
            "load_s": load_s,
            "write_s": time.time() - t1,
        }
    )
    text = json.dumps(metrics, sort_keys=True)
    if args.metrics:
        with open(args.metrics, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    print(text)
    return 0


def cmd_logprobs(args: argparse.Namespace) -> int:
    """Per-token log-probs of each rollout's response tokens under the model (JSONL, one per
    rollout): the numbers the rollout side should have written as old_logprobs."""
    torch, device, dtype = _torch_setup(args)
    from .grpo import collate, read_experience, sequence_logprobs
    from .model import load_model

    model, g = load_model(args.model, device=device)
    if args.lora_in:
        from .lora import apply_lora, read_lora_gguf

        apply_lora(model, read_lora_gguf(args.lora_in))
    model.eval()
    rollouts = read_experience(args.experience)
    _check_tokens(rollouts, g.hparams.n_vocab, args.experience)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        with torch.no_grad():
            for i, r in enumerate(rollouts):
                b = collate([r], device=device)
                lp, _ = sequence_logprobs(model, b, args.temperature, compute_dtype=dtype)
                P = len(r.prompt_tokens)
                row = lp[0].tolist()
                lps = [row[P - 1 + j] if P - 1 + j >= 0 else None for j in range(len(r.tokens))]
                rec: dict[str, Any] = {"index": i, "question_id": r.question_id, "logprobs": lps}
                if r.old_logprobs is not None:
                    diffs = [abs(a - b) for a, b, m in zip(lps, r.old_logprobs, r.mask, strict=True) if m and a is not None]
                    rec["max_abs_diff_vs_old"] = max(diffs) if diffs else 0.0
                out.write(json.dumps(rec) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Rewrites a GGUF with its 2-D weights in another type (metadata unchanged, atomically)."""
    from .gguf_io import read_gguf, write_gguf

    g = read_gguf(args.model)
    write_gguf(args.out, g, {}, out_type=args.out_type)
    print(json.dumps({"out": args.out, "out_type": args.out_type, "bytes": os.path.getsize(args.out)}))
    return 0


def cmd_interpolate(args: argparse.Namespace) -> int:
    """Writes base + alpha * (tuned - base) over every tensor (weight-space interpolation towards the start, as WiSE-FT
    and WARP's LITI do), with base's metadata, atomically."""
    from .gguf_io import read_gguf, write_gguf

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
    write_gguf(args.out, base, mixed, out_type=args.out_type)
    print(json.dumps({"out": args.out, "alpha": args.alpha, "out_type": args.out_type, "bytes": os.path.getsize(args.out)}))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Writes the base with a llama.cpp LoRA adapter folded into its weights, base's metadata kept, atomically:
    one GGUF that serves as base + adapter does, with no adapter to load."""
    from .gguf_io import read_gguf, write_gguf
    from .lora import merge_into, read_lora_gguf

    base = read_gguf(args.model)
    merged = merge_into(base, read_lora_gguf(args.lora), args.scale)
    write_gguf(args.out, base, merged, out_type=args.out_type)
    print(json.dumps({"out": args.out, "tensors_merged": len(merged), "scale": args.scale, "out_type": args.out_type, "bytes": os.path.getsize(args.out)}))
    return 0


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


def cmd_hf_step(args: argparse.Namespace) -> int:
    """Path (b): one GRPO/SFT update of a LoRA adapter on a Hugging Face checkpoint (hf_lora.py)."""
    from .hf_lora import MissingHFDependency, run_hf_step

    try:
        metrics = run_hf_step(args)
    except MissingHFDependency as err:
        print(f"reex_learner: error: {err}", file=sys.stderr)
        return 3
    if int(os.environ.get("RANK", "0") or 0) == 0:
        if args.metrics:
            with open(args.metrics, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        print(json.dumps(metrics, sort_keys=True))
    return 0


def add_guard_args(p: argparse.ArgumentParser) -> None:
    """Warm-up, the old-log-prob guard and the split-half diagnostic: the same on `step` and `hf-step`."""
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=0,
        help="linear lr warm-up over this many optimizer steps, counted across processes through --optimizer-state (0 = off)",
    )
    p.add_argument(
        "--max-old-logprob-diff",
        type=float,
        default=0.0,
        help="fail (exit 4, no update) when the mean |logp - old_logp| of the first mini-batch exceeds this (0 = off)",
    )
    p.add_argument(
        "--split-half",
        type=int,
        default=0,
        help="report the agreement of the gradients of this many random half-splits of the groups (0 = off; costs 2 backward passes per split)",
    )


def add_hf_step_parser(sub: Any) -> argparse.ArgumentParser:
    h = sub.add_parser(
        "hf-step",
        help="path (b): one GRPO/SFT update of a LoRA adapter on a Hugging Face checkpoint (transformers + peft; torchrun-able)",
    )
    h.add_argument("--base", required=True, help="HF checkpoint folder or hub id (the one the rollouts' GGUF was converted from)")
    h.add_argument("--adapter-in", help="peft LoRA adapter folder to continue from (its r/alpha/targets win); default: a fresh adapter")
    h.add_argument("--experience", required=True, help="experience JSONL (one rollout per line), as for `step`")
    h.add_argument("--adapter-out", required=True, help="folder for the updated adapter (peft save_pretrained)")
    h.add_argument("--gguf-out", help="also write the adapter as a llama.cpp GGUF LoRA (runs llama.cpp's convert_lora_to_gguf.py)")
    h.add_argument("--gguf-outtype", default="f32", choices=["f32", "f16", "bf16", "q8_0"], help="tensor type of --gguf-out (default f32)")
    h.add_argument("--convert-script", help="path to convert_lora_to_gguf.py (or its llama.cpp folder); default: node-llama-cpp's copy")
    h.add_argument("--ref-free", action="store_true", help="no reference model: no KL term, no kl metric, no extra forward")
    h.add_argument("--mode", default="grpo", choices=["grpo", "sft"])
    h.add_argument("--lr", type=float, default=2e-6)
    h.add_argument("--clip", type=float, default=0.2, help="PPO clip epsilon (low side, and high side unless --clip-high)")
    h.add_argument("--clip-high", type=float, default=None, help="upper clip epsilon (DAPO clip-higher); default = --clip")
    h.add_argument("--kl-beta", type=float, default=None, help="weight of the k3 KL to the base (adapter disabled); default 0.001, 0 with --ref-free")
    h.add_argument("--loss-agg", default="token-mean", choices=["token-mean", "seq-mean-token-mean"])
    h.add_argument("--advantage", default="file", choices=["file", "group", "batch", "none"], help="use the file's advantages or recompute them from reward")
    h.add_argument("--mask-truncated", action="store_true", help="drop truncated rollouts from the loss (Think2SQL)")
    h.add_argument("--micro-batch", type=int, default=1, help="rollouts per forward/backward per rank (default 1)")
    h.add_argument("--mini-batch", type=int, default=0, help="rollouts per optimizer step, over all ranks (0 = all: one step per epoch)")
    h.add_argument("--epochs", type=int, default=1)
    h.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping (0 = off)")
    h.add_argument("--weight-decay", type=float, default=0.0)
    h.add_argument("--shuffle", action="store_true", help="shuffle rollouts between epochs")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--optimizer-state", help="AdamW state file for the LoRA parameters: loaded if present, saved after the step")
    add_guard_args(h)
    h.add_argument("--lora-r", type=int, default=16, help="rank of a fresh adapter")
    h.add_argument("--lora-alpha", type=float, default=32.0, help="alpha of a fresh adapter (llama.cpp scales by alpha/r too)")
    h.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj", help="comma-separated module names of a fresh adapter")
    h.add_argument("--lora-dropout", type=float, default=0.0, help="LoRA dropout (keep 0 for GRPO: dropout makes the ratio noisy)")
    h.add_argument(
        "--dtype",
        default="bf16",
        choices=sorted(_DTYPES),
        help="dtype of the frozen base weights and the autocast compute dtype (LoRA weights and AdamW stay f32); default bf16",
    )
    h.add_argument("--device", default="auto", help="cuda | cpu | auto (default); under torchrun each rank uses cuda:LOCAL_RANK")
    h.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    h.add_argument("--temperature", type=float, default=1.0, help="divide logits by this before log-softmax (must match how old_logprobs were computed)")
    h.add_argument(
        "--attn", default="auto", choices=["auto", "eager", "sdpa", "flash_attention_2"], help="transformers attn_implementation (auto = transformers' default)"
    )
    h.add_argument("--grad-checkpoint", action="store_true", help="gradient checkpointing (non-reentrant) in the base model")
    h.add_argument("--trust-remote-code", action="store_true")
    h.add_argument("--metrics", help="also write the metrics JSON here (rank 0)")
    h.set_defaults(func=cmd_hf_step)
    return h


def build_parser() -> argparse.ArgumentParser:
    from .lora_args import add_lora_args

    p = argparse.ArgumentParser(prog="python3 -m reex_learner", description="reex GRPO/SFT learner over GGUF models")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--model", required=True, help="input GGUF (llama or qwen2 architecture, f32/f16)")
        sp.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N | auto (default cpu)")
        sp.add_argument(
            "--dtype", default="f32", choices=sorted(_DTYPES), help="forward-pass compute dtype via autocast (weights and AdamW stay f32); default f32"
        )
        sp.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
        sp.add_argument("--temperature", type=float, default=1.0, help="divide logits by this before log-softmax (must match how old_logprobs were computed)")

    s = sub.add_parser("step", help="one GRPO/SFT update from one experience file; writes a new GGUF")
    common(s)
    s.add_argument("--experience", required=True, help="experience JSONL (one rollout per line)")
    s.add_argument("--out", help="output GGUF (metadata copied unchanged); required unless a LoRA is trained (then: the base with the adapter merged in)")
    s.add_argument("--ref", help="frozen reference GGUF for the KL term / kl metric (with a LoRA and --kl-beta > 0, default: the base, adapter switched off)")
    s.add_argument("--mode", default="grpo", choices=["grpo", "sft"])
    s.add_argument("--lr", type=float, default=2e-6)
    s.add_argument("--clip", type=float, default=0.2, help="PPO clip epsilon (low side, and high side unless --clip-high)")
    s.add_argument("--clip-high", type=float, default=None, help="upper clip epsilon (DAPO clip-higher); default = --clip")
    s.add_argument("--kl-beta", type=float, default=0.0, help="weight of the k3 KL to --ref (0 = off)")
    s.add_argument("--loss-agg", default="token-mean", choices=["token-mean", "seq-mean-token-mean"])
    s.add_argument("--advantage", default="file", choices=["file", "group", "batch", "none"], help="use the file's advantages or recompute them from reward")
    s.add_argument("--mask-truncated", action="store_true", help="drop truncated rollouts from the loss (Think2SQL)")
    s.add_argument("--micro-batch", type=int, default=4, help="rollouts per forward/backward (gradient accumulation unit)")
    s.add_argument("--mini-batch", type=int, default=0, help="rollouts per optimizer step (0 = all: one step per epoch)")
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping (0 = off)")
    s.add_argument("--weight-decay", type=float, default=0.0)
    s.add_argument("--shuffle", action="store_true", help="shuffle rollouts between epochs")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--optimizer-state", help="AdamW state file: loaded if present, saved after the step")
    s.add_argument(
        "--share-prefix",
        action="store_true",
        help="rollouts with the same prompt share one copy of it in a packed row (token-mean loss only; same gradients, fewer tokens)",
    )
    s.add_argument("--pack-tokens", type=int, default=2048, help="row length limit with --share-prefix (default 2048)")
    s.add_argument(
        "--out-type",
        default="keep",
        choices=["keep", "f32", "f16", "q8_0"],
        help="tensor type of the written GGUF (keep: the input's, except that quantised matrices are written as f16)",
    )
    s.add_argument("--grad-checkpoint", action="store_true", help="recompute block activations in backward (less memory)")
    s.add_argument("--attn", default="eager", choices=["eager", "sdpa"], help="attention kernel (sdpa needs torch >= 2.0)")
    s.add_argument(
        "--master",
        help="float32 master weights carried across steps: loaded instead of --model's (rounded) weights if the file exists and --model is their export, saved after the step",
    )
    add_guard_args(s)
    s.add_argument("--metrics", help="also write the metrics JSON here")
    add_lora_args(s)
    s.set_defaults(func=cmd_step)

    lp = sub.add_parser("logprobs", help="score an experience file's response tokens (check old_logprobs)")
    common(lp)
    lp.add_argument("--experience", required=True)
    lp.add_argument("--out", help="JSONL output (default stdout)")
    lp.add_argument("--lora-in", help="score with this llama.cpp LoRA GGUF on the model (rollouts sampled from base + adapter)")
    lp.set_defaults(func=cmd_logprobs)

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

    add_hf_step_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .grpo import OldLogprobMismatch

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
