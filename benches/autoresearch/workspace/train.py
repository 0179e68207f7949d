"""A small GPT trained on bytes under a fixed time budget. THE FILE YOU EDIT.

Everything here is fair game: hyperparameters, architecture, optimizer, schedule. The data,
the tokenizer and the metric live in prepare.py (read-only). The run is scored by the
harness from the model this script saves with prepare.save_model: lower val_bpb is better.

Contract with the harness:
  * train for TIME_BUDGET seconds of training time (env RRMA_TIME_BUDGET), seed from RRMA_SEED;
    on the CPU training time is this process's CPU time (other load on a shared machine does
    not change how much compute a trial gets), on a GPU it is wall-clock time;
  * print progress lines `step N | loss L | lr X | elapsed Ts` while training;
  * on NaN or exploding loss print FAIL and exit 1;
  * save the model with prepare.save_model(model) and end with `---` and `key: value` lines.
"""

import math
import os
import sys
import time

import prepare
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- hyperparameters (edit these)
N_LAYER = 2  # transformer blocks
N_HEAD = 4  # attention heads per block
HEAD_DIM = 16  # channels per head (model width = N_HEAD * HEAD_DIM)
MLP_RATIO = 4  # hidden units of the MLP per model channel
BATCH_SIZE = 16  # sequences per optimizer step
TRAIN_SEQ_LEN = 128  # tokens per training sequence (at most prepare.SEQ_LEN)
LEARNING_RATE = 0.0003  # AdamW peak learning rate
WEIGHT_DECAY = 0.0  # AdamW decoupled weight decay (matrices only)
ADAM_BETA1 = 0.9  # AdamW first-moment decay
ADAM_BETA2 = 0.95  # AdamW second-moment decay
WARMUP_FRAC = 0.05  # fraction of the time budget spent ramping the learning rate up
FINAL_LR_FRAC = 0.1  # learning rate at the end of the budget, as a fraction of the peak
GRAD_CLIP = 1.0  # max global gradient norm (0 disables clipping)
DROPOUT = 0.0  # dropout probability in attention and MLP outputs
INIT_STD = 0.02  # standard deviation of the weight initialisation

# ---------------------------------------------------------------- fixed by the harness
TIME_BUDGET = float(os.environ.get("RRMA_TIME_BUDGET", "30"))  # seconds of training
SEED = int(os.environ.get("RRMA_SEED", "0"))
LOG_INTERVAL_S = 0.25  # seconds between progress lines
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    torch.set_num_threads(int(os.environ.get("RRMA_THREADS", "1")))
clock = time.perf_counter if DEVICE == "cuda" else time.process_time  # seconds of training


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then an MLP, both residual."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, MLP_RATIO * width, bias=False)
        self.fc_out = nn.Linear(MLP_RATIO * width, width, bias=False)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # batch, time, channels
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, HEAD_DIM).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=DROPOUT if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    """Token + position embeddings, N_LAYER blocks, a final norm and a tied output head."""

    def __init__(self) -> None:
        super().__init__()
        width = N_HEAD * HEAD_DIM
        self.wte = nn.Embedding(prepare.VOCAB_SIZE, width)
        self.wpe = nn.Embedding(prepare.SEQ_LEN, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(width)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # logits (B, T, VOCAB_SIZE)


def lr_at(progress: float) -> float:
    """Learning rate at a fraction of the time budget: linear warmup, then linear decay."""
    if progress < WARMUP_FRAC:
        return LEARNING_RATE * progress / WARMUP_FRAC
    frac = (progress - WARMUP_FRAC) / max(1e-9, 1.0 - WARMUP_FRAC)
    return LEARNING_RATE * (1.0 - (1.0 - FINAL_LR_FRAC) * min(1.0, frac))


def main() -> int:
    torch.manual_seed(SEED)
    train = prepare.load_split("train")
    gen = torch.Generator().manual_seed(SEED)
    model = GPT().to(DEVICE)
    num_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LEARNING_RATE,
        betas=(ADAM_BETA1, ADAM_BETA2),
    )
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if DEVICE == "cuda" else torch.autocast("cpu", enabled=False)
    seq = min(TRAIN_SEQ_LEN, prepare.SEQ_LEN)
    print(f"device: {DEVICE} | params: {num_params} | time budget: {TIME_BUDGET:g}s", flush=True)

    step = 0
    training_seconds = 0.0
    next_log = LOG_INTERVAL_S
    window_loss, window_steps = 0.0, 0
    while training_seconds < TIME_BUDGET:
        t0 = clock()
        starts = torch.randint(0, train.numel() - seq - 1, (BATCH_SIZE,), generator=gen)
        chunk = torch.stack([train[s : s + seq + 1] for s in starts.tolist()]).to(torch.long)
        x, y = chunk[:, :-1].to(DEVICE), chunk[:, 1:].to(DEVICE)
        lr = lr_at(training_seconds / TIME_BUDGET)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast:
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, prepare.VOCAB_SIZE), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if GRAD_CLIP > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        loss_value = loss.item()  # synchronises with the device, so the step time is real
        training_seconds += clock() - t0
        step += 1
        if not math.isfinite(loss_value) or loss_value > 100:
            print(f"step {step} | loss {loss_value} | elapsed {training_seconds:.2f}s", flush=True)
            print(f"FAIL: loss is {loss_value} at step {step} (diverged)", flush=True)
            return 1
        window_loss += loss_value
        window_steps += 1
        if training_seconds >= next_log:
            mean = window_loss / window_steps
            print(f"step {step} | loss {mean:.6f} | lr {lr:.3e} | elapsed {training_seconds:.2f}s", flush=True)
            window_loss, window_steps = 0.0, 0
            next_log = training_seconds + LOG_INTERVAL_S

    prepare.save_model(model)
    val_bpb = prepare.evaluate_bpb(model, device=DEVICE)
    peak_mb = torch.cuda.max_memory_allocated() / 2**20 if DEVICE == "cuda" else 0.0
    if DEVICE == "cpu":
        import resource

        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print("---")
    print(f"val_bpb: {val_bpb:.6f}")
    print(f"training_seconds: {training_seconds:.1f}")
    print(f"peak_memory_mb: {peak_mb:.1f}")
    print(f"num_steps: {step}")
    print(f"num_params: {num_params}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
