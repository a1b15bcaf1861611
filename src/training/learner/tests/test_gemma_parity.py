"""The PyTorch module computes llama.cpp's Gemma 3 logits for the real Gemma 3 270M GGUF (Q4_K_M).

Skipped unless the pulled model is at models/gemma-3-270m-q4_k_m.gguf
(`npx reex models pull gemma-3-270m`). About 2 minutes on one CPU thread.

Two references, both from llama.cpp with ``--exact`` (F32 KV cache, no flash attention):

* the Q4_K_M file itself. llama.cpp's quantised matmuls on CPU do not multiply by the dequantised
  weights in f32: ggml first rounds each matmul input to the weight type's ``vec_dot_type`` (Q8_0
  for this file's Q5_0/Q8_0 tensors and the tied Q8_0 output matrix, Q8_K for its Q4_K/Q6_K ones,
  i.e. 8 bits per value with one scale per 32 or 256 values), then takes integer dot products.
  The module keeps the exact maths, so this comparison has a loose bound (conftest's GEMMA_Q4_TOL_*);
* an F32 copy of the same file (the dequantised weights the module uses, written by write_gguf):
  llama.cpp then does f32 maths throughout except its CPU GeGLU, which reads gelu from an f16
  table (GGML_GELU_FP16); with that table swapped in (``ggml_gelu_f16_table``) the module must match
  to summation-order noise (TOL_F32). This is the check of the architecture.

Negative controls (all-global attention, the global RoPE base on local layers) must miss the F32
reference by far more than TOL_F32, and the Q4_K_M one by more than those.
"""

from __future__ import annotations

import time

import pytest
import torch
from conftest import (
    GEMMA,
    GEMMA_Q4_TOL_LOGIT,
    GEMMA_Q4_TOL_LOGP,
    ggml_gelu_f16_table,
    llama_cpp_available,
    llama_cpp_logit_rows,
    llama_cpp_tokenize,
    requires_gemma,
)

pytestmark = requires_gemma

# Logits of this model are O(10..40) in magnitude. Measured values are in docs/learner.md.
# F32 copy, gelu table emulated: what is left is f32 summation order (ggml vs torch) through 18
# layers whose residual stream is large (Gemma's BOS row); measured <= ~2e-2.
TOL_F32 = 0.1
WRONG_MIN = 8.0

SHORT_PROMPT = (
    "<start_of_turn>user\n"
    "You translate questions into SQLite. Schema: customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT); "
    "orders(id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), placed_at TEXT, total REAL).\n"
    "Question: which customers in Berlin placed more than three orders in 2023? Answer with one SQL query."
    "<end_of_turn>\n<start_of_turn>model\n"
)


def long_prompt() -> str:
    """A text-to-SQL prompt with a long, varied schema: ~850 tokens, well past the 512-token window."""
    tables = [
        ("customers", ["id INTEGER PRIMARY KEY", "name TEXT", "city TEXT", "country TEXT", "signup_date TEXT"]),
        ("orders", ["id INTEGER PRIMARY KEY", "customer_id INTEGER", "placed_at TEXT", "status TEXT", "total REAL"]),
        ("order_items", ["order_id INTEGER", "product_id INTEGER", "quantity INTEGER", "unit_price REAL"]),
        ("products", ["id INTEGER PRIMARY KEY", "name TEXT", "category_id INTEGER", "price REAL", "discontinued INTEGER"]),
        ("categories", ["id INTEGER PRIMARY KEY", "name TEXT", "parent_id INTEGER"]),
        ("suppliers", ["id INTEGER PRIMARY KEY", "company TEXT", "contact_name TEXT", "phone TEXT", "country TEXT"]),
        ("product_suppliers", ["product_id INTEGER", "supplier_id INTEGER", "lead_time_days INTEGER"]),
        ("warehouses", ["id INTEGER PRIMARY KEY", "city TEXT", "capacity INTEGER", "manager_id INTEGER"]),
        ("inventory", ["warehouse_id INTEGER", "product_id INTEGER", "on_hand INTEGER", "updated_at TEXT"]),
        ("employees", ["id INTEGER PRIMARY KEY", "first_name TEXT", "last_name TEXT", "hired_on TEXT", "salary REAL", "department_id INTEGER"]),
        ("departments", ["id INTEGER PRIMARY KEY", "name TEXT", "budget REAL"]),
        ("shipments", ["id INTEGER PRIMARY KEY", "order_id INTEGER", "warehouse_id INTEGER", "shipped_at TEXT", "carrier TEXT"]),
        ("returns", ["id INTEGER PRIMARY KEY", "order_item_order_id INTEGER", "reason TEXT", "refunded REAL"]),
        ("reviews", ["id INTEGER PRIMARY KEY", "product_id INTEGER", "customer_id INTEGER", "stars INTEGER", "body TEXT"]),
        ("coupons", ["code TEXT PRIMARY KEY", "percent_off REAL", "valid_until TEXT"]),
        ("coupon_uses", ["code TEXT", "order_id INTEGER", "used_at TEXT"]),
        ("payments", ["id INTEGER PRIMARY KEY", "order_id INTEGER", "method TEXT", "amount REAL", "paid_at TEXT"]),
        ("addresses", ["id INTEGER PRIMARY KEY", "customer_id INTEGER", "street TEXT", "zip TEXT", "city TEXT"]),
    ]
    schema = "\n".join(f"CREATE TABLE {t} ({', '.join(cols)});" for t, cols in tables)
    questions = "\n".join(
        [
            "Example: How many orders were shipped by each carrier in March 2024? -> SELECT carrier, COUNT(*) FROM shipments WHERE shipped_at LIKE '2024-03%' GROUP BY carrier;",
            "Example: Which products were never reviewed? -> SELECT name FROM products WHERE id NOT IN (SELECT product_id FROM reviews);",
            "Example: Average salary per department, highest first. -> SELECT d.name, AVG(e.salary) AS s FROM employees e JOIN departments d ON d.id = e.department_id GROUP BY d.name ORDER BY s DESC;",
            "Example: Customers who used a coupon worth at least 20 percent. -> SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.id JOIN coupon_uses u ON u.order_id = o.id JOIN coupons k ON k.code = u.code WHERE k.percent_off >= 20;",
            "Example: Total refunded per reason since 2022. -> SELECT reason, SUM(refunded) FROM returns r JOIN orders o ON o.id = r.order_item_order_id WHERE o.placed_at >= '2022-01-01' GROUP BY reason;",
            "Example: Warehouses above 90 percent of capacity. -> SELECT w.city FROM warehouses w JOIN inventory i ON i.warehouse_id = w.id GROUP BY w.id HAVING SUM(i.on_hand) > 0.9 * w.capacity;",
            "Example: The three best rated categories with at least ten reviews. -> SELECT cat.name, AVG(r.stars) AS a FROM reviews r JOIN products p ON p.id = r.product_id JOIN categories cat ON cat.id = p.category_id GROUP BY cat.id HAVING COUNT(*) >= 10 ORDER BY a DESC LIMIT 3;",
            "Example: Payments by card that exceed their order total. -> SELECT p.id, p.amount, o.total FROM payments p JOIN orders o ON o.id = p.order_id WHERE p.method = 'card' AND p.amount > o.total;",
        ]
    )
    return (
        "<start_of_turn>user\nYou translate questions into SQLite for this database.\n"
        f"{schema}\n{questions}\n"
        "Question: For every warehouse city, list the total value (on_hand times price) of products from suppliers "
        "in Germany whose lead time is under ten days, only for products that are not discontinued."
        "<end_of_turn>\n<start_of_turn>model\n"
    )


def _ours(model, tokens: list[int], positions: list[int], gelu_table: bool = False) -> torch.Tensor:
    acts = [layer.ffn_act for layer in model.layers]
    if gelu_table:
        for layer in model.layers:
            layer.ffn_act = ggml_gelu_f16_table
    try:
        with torch.no_grad():
            h = model.hidden(torch.tensor(tokens))[0]
            return model.logits(h[positions])
    finally:
        for layer, act in zip(model.layers, acts, strict=True):
            layer.ffn_act = act


def _diffs(ours: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    dl = (ours - ref).abs().max().item()
    dp = (torch.log_softmax(ours, -1) - torch.log_softmax(ref, -1)).abs().max().item()
    return dl, dp


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemma():
    why = llama_cpp_available()
    if why:
        pytest.skip(why)
    from reex_learner.model import load_model

    t = time.time()
    model, g = load_model(str(GEMMA))
    model.eval()
    print(f"\ngemma: loaded and dequantised in {time.time() - t:.1f}s")
    return model, g


@pytest.fixture(scope="module")
def gemma_f32(gemma, tmp_path_factory):
    """An F32 copy of the GGUF: the module's own (dequantised) weights, for llama.cpp."""
    from reex_learner.gguf_io import write_gguf

    out = tmp_path_factory.mktemp("gemma") / "gemma-3-270m-f32.gguf"
    write_gguf(out, gemma[1], out_type="f32")
    yield out
    out.unlink()


@pytest.fixture(scope="module")
def prompts(gemma):
    """{name: (tokens, rows compared)}: the short prompt, all rows; the long one (past the window),
    every 16th row, the rows around the window's edge and the last 24."""
    short = llama_cpp_tokenize(GEMMA, SHORT_PROMPT)
    long = llama_cpp_tokenize(GEMMA, long_prompt())
    n_swa = gemma[1].hparams.n_swa
    assert len(short) >= 40
    assert len(long) > n_swa + 200, f"long prompt has {len(long)} tokens, wanted > {n_swa + 200}"
    T = len(long)
    rows = sorted(set(range(0, T, 16)) | set(range(n_swa - 4, n_swa + 4)) | set(range(T - 24, T)))
    return {"short": (short, list(range(len(short)))), "long": (long, rows)}


@pytest.fixture(scope="module")
def refs(prompts, gemma_f32):
    """{(file, prompt): llama.cpp logits of the compared rows}, file in ("q4_k_m", "f32")."""
    out = {}
    for file, path in (("q4_k_m", GEMMA), ("f32", gemma_f32)):
        for name, (tokens, rows) in prompts.items():
            t = time.time()
            _, got, ref = llama_cpp_logit_rows(path, tokens, "--exact", positions=rows)
            assert got == rows
            out[(file, name)] = ref
            print(f"\ngemma: llama.cpp {file} {name} ({len(tokens)} tokens) in {time.time() - t:.1f}s")
    return out


# --- tests ---------------------------------------------------------------------------------------


def test_gemma3_hparams(gemma):
    """What llama.cpp reads from this file (llama_model_gemma3::load_arch_hparams)."""
    _, g = gemma
    hp = g.hparams
    assert (hp.arch, hp.rope_type, hp.n_layer, hp.head_dim, hp.n_head, hp.n_head_kv) == ("gemma3", "neox", 18, 256, 4, 1)
    assert hp.tied_output and hp.final_logit_softcap == 0.0
    assert hp.n_swa == 512 and hp.rope_base == 1e6 and hp.rope_base_swa == 10000.0
    assert [il for il in range(hp.n_layer) if not hp.is_swa(il)] == [5, 11, 17]
    assert hp.attn_scale == 1.0 / 16


@pytest.mark.parametrize("prompt", ["short", "long"])
def test_gemma_architecture_matches_llama_cpp_f32(gemma, prompts, refs, prompt):
    """Same weights in f32 on both sides: the graph (norms, GeGLU, sliding window, two RoPE bases,
    embedding scale, tied output) must be llama.cpp's."""
    model, _ = gemma
    tokens, rows = prompts[prompt]
    ref = refs[("f32", prompt)]
    dl, dp = _diffs(_ours(model, tokens, rows, gelu_table=True), ref)
    pl, pp = _diffs(_ours(model, tokens, rows), ref)
    print(
        f"\ngemma f32 copy, {prompt} ({len(tokens)} tokens, {len(rows)} rows): with ggml's f16 gelu table "
        f"max |d logit| {dl:.3e}, max |d log p| {dp:.3e}; exact gelu {pl:.3e} / {pp:.3e}"
    )
    assert dl < TOL_F32 and dp < TOL_F32


@pytest.mark.parametrize("prompt", ["short", "long"])
def test_gemma_q4_k_m_matches_llama_cpp(gemma, prompts, refs, prompt):
    """The real file: llama.cpp's quantised kernels against the module's exact maths."""
    model, _ = gemma
    tokens, rows = prompts[prompt]
    ref = refs[("q4_k_m", prompt)]
    ours = _ours(model, tokens, rows)
    dl, dp = _diffs(ours, ref)
    agree = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
    print(f"\ngemma q4_k_m, {prompt} ({len(tokens)} tokens, {len(rows)} rows): max |d logit| {dl:.3e}, max |d log p| {dp:.3e}, argmax agreement {agree:.3f}")
    assert dl < GEMMA_Q4_TOL_LOGIT and dp < GEMMA_Q4_TOL_LOGP
    assert agree >= 0.9


def _wrong(model, tokens, rows, no_window: bool = False, all_global: bool = False, **hp_changes) -> torch.Tensor:
    """The module's logits with a deliberate mistake: ``no_window`` drops the sliding window (local
    layers keep their RoPE base), ``all_global`` makes every layer global (no window, global RoPE),
    ``hp_changes`` overwrite hyperparameters."""
    hp = model.hp
    saved_hp = {k: getattr(hp, k) for k in hp_changes}
    saved = [(layer.n_swa, layer.local) for layer in model.layers]
    try:
        for layer in model.layers:
            if no_window or all_global:
                layer.n_swa = 0
            if all_global:
                layer.local = False
        for k, v in hp_changes.items():
            setattr(hp, k, v)
        return _ours(model, tokens, rows, gelu_table=True)
    finally:
        for k, v in saved_hp.items():
            setattr(hp, k, v)
        for layer, (n, local) in zip(model.layers, saved, strict=True):
            layer.n_swa, layer.local = n, local


def test_wrong_window_or_local_rope_would_be_caught(gemma, prompts, refs):
    """On the long prompt: without the sliding window the module still matches llama.cpp before the
    window's edge and misses it after; the global RoPE base (1e6) on the local layers, or all layers
    global, misses it everywhere but position 0 -- by far more than the tolerances."""
    model, _ = gemma
    tokens, rows = prompts["long"]
    n_swa = model.hp.n_swa
    before = [i for i, p in enumerate(rows) if p < n_swa]
    after = [i for i, p in enumerate(rows) if p >= n_swa + 16]
    past0 = list(range(1, len(rows)))
    f32, q = refs[("f32", "long")], refs[("q4_k_m", "long")]

    def worst(x, ref, idx):
        return (x[idx] - ref[idx]).abs().max().item()

    no_window = _wrong(model, tokens, rows, no_window=True)
    local_rope = _wrong(model, tokens, rows, rope_base_swa=model.hp.rope_base)
    all_global = _wrong(model, tokens, rows, all_global=True)
    res = {
        "no window, before the edge": worst(no_window, f32, before),
        "no window, after the edge": worst(no_window, f32, after),
        "local RoPE base 1e6": worst(local_rope, f32, past0),
        "all layers global": worst(all_global, f32, past0),
    }
    print("\ngemma negative controls, max |d logit| vs the f32 reference: " + "; ".join(f"{k} {v:.3g}" for k, v in res.items()))
    print(
        "gemma negative controls vs the q4_k_m reference: "
        f"no window after the edge {worst(no_window, q, after):.3g}; local RoPE base 1e6 {worst(local_rope, q, past0):.3g}; "
        f"all global {worst(all_global, q, past0):.3g}"
    )
    assert res["no window, before the edge"] < TOL_F32
    assert res["no window, after the edge"] > WRONG_MIN and worst(no_window, q, after) > WRONG_MIN
    assert res["local RoPE base 1e6"] > WRONG_MIN and worst(local_rope, q, past0) > WRONG_MIN
    assert res["all layers global"] > WRONG_MIN and worst(all_global, q, past0) > WRONG_MIN
