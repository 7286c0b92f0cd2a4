"""golden_flips.py: which ReLUs did a float32 run send the other way?

For PyTorch's float32 runs the golden tests see the ReLU inputs and read the
flips off directly (golden_torch.flips_between). Trainbench is a black box
behind `trainbench step`: only its output file is seen. Its flips are found
from that output, top-down, by their signature:

  A ReLU after BatchNorm `bn` (torchvision: relu(bn1(.)), relu(bn2(.)),
  relu(bn3(.) + identity)) passes g = dL/dy at element e of channel c, or
  blocks it. Flipping e changes bn's gradients at channel c, and only
  there among bn's parameters, by exactly
      d beta[c]  += s*g_e,      d gamma[c] += s*g_e*xhat_e
  (s = +1 when the float64 ReLU is off, -1 when on; xhat the normalised
  input), and changes everything below bn through dx. Nothing below a ReLU
  changes the gradients at or above it.

It also moves the gradient of the conv before bn, row c, through bn's
backward (dx = gamma*invstd*(g - mean g - xhat*mean(g*xhat)) over the
channel), which is where most flips show most.

So, from the last ReLU call to the first: in a channel whose beta, gamma or
conv-row gradient is off by more than a quarter of its bound, candidate ReLUs
of that channel -- inputs within `window` times PyTorch float32's own
largest error on that tensor of zero, nowhere else -- are tried: the set
whose signatures (beta, gamma and the conv row, each in units of its
tensor's bound) remove at least half of the miss (L2) is taken as
trainbench's flips there. Accepted flips are forced in the float64 step,
which is rerun so the ReLUs below see the gradient trainbench saw; passes
repeat until nothing new is found. The float64 step with all accepted flips
is the reference trainbench is then held to. A real bug does not look like
this: its error is not a sum of one-element signatures at near-zero ReLUs,
so it stays unexplained and the comparison fails.
"""
import numpy as np
import torch

from golden_torch import count_flips

MAX_EXACT = 12     # candidate sets up to this size are searched exhaustively
LOOK = 0.25        # examine channels off by more than this fraction of a bound
KEEP = 0.5         # accept a set that leaves at most this fraction of the miss (L2)
PASSES = 3
BN_EPS = 1e-5


def candidates(truth_pre, noise, window):
    """{k: flat indices} of ReLU inputs with |x64| <= window * noise[k]."""
    out = {}
    for k, x in enumerate(truth_pre):
        if noise[k] > 0:
            idx = np.flatnonzero(np.abs(x.reshape(-1)) <= window * noise[k])
            if idx.size:
                out[k] = idx
    return out


def _best_subset(r, V):
    """Rows of V (candidates' signatures) whose sum is nearest r (L2): bool
    mask and the remaining norm."""
    n = V.shape[0]
    if n <= MAX_EXACT:
        sel = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(np.float64)
        left = np.linalg.norm(r[None, :] - sel @ V, axis=1)
        i = int(np.argmin(left))
        return sel[i].astype(bool), float(left[i])
    chosen = np.zeros(n, bool)
    cur = r.copy()
    best = float(np.linalg.norm(cur))
    while True:   # greedy: add the candidate that helps most, while one helps
        trial = np.linalg.norm(cur[None, :] - V, axis=1)
        trial[chosen] = np.inf
        j = int(np.argmin(trial))
        if not trial[j] < best:
            return chosen, best
        chosen[j], best = True, float(trial[j])
        cur = cur - V[j]


def _conv_name(bn):
    head, _, last = bn.rpartition(".")
    return (head + "." if head else "") + "conv" + last[2:]


def _layer(out, res, tr_truth, k, idx, forced, bounds, gamma_all):
    """Flips found at ReLU call k (flat indices), with one log line per channel."""
    tr = res.tracker
    bn = tr.bn[k]
    conv = _conv_name(bn)
    kb, kg, kw = "grads/%s.bias" % bn, "grads/%s.weight" % bn, "grads/%s.weight" % conv
    if kw not in out or bn not in tr.conv:
        return [], []
    tb, tg, tw = (max(bounds[n], 1e-30) for n in (kb, kg, kw))
    res_b = (out[kb].astype(np.float64) - res.datasets[kb].astype(np.float64)) / tb
    res_g = (out[kg].astype(np.float64) - res.datasets[kg].astype(np.float64)) / tg
    res_w = (out[kw].astype(np.float64) - res.datasets[kw].astype(np.float64)).reshape(len(res_b), -1) / tw
    n, c, h, w = tr.pre[k].shape
    idx = np.setdiff1d(idx, forced)
    chan = (idx // (h * w)) % c
    score = np.maximum(np.maximum(np.abs(res_b), np.abs(res_g)), np.max(np.abs(res_w), axis=1))
    look = np.intersect1d(np.flatnonzero(score > LOOK), chan)
    if not look.size:
        return [], []
    g = tr.gout(k).reshape(-1)
    on = tr_truth.pre[k].reshape(-1) > 0
    xb = tr.bn_in[bn]
    mod = tr.conv[bn]
    xin = torch.from_numpy(tr.conv_in[bn])
    taken, lines = [], []
    for ch in look:
        e = idx[chan == ch]
        xc = xb[:, ch]
        m = xc.size
        invstd = 1.0 / np.sqrt(xc.var() + BN_EPS)
        xhat = (xc - xc.mean()) * invstd
        pos = np.unravel_index(e, (n, c, h, w))
        ge = np.where(on[e], -1.0, 1.0) * g[e]                 # change of g at each candidate
        xe = xhat[pos[0], pos[2], pos[3]]
        # d(dx) over the channel, one plane per candidate: gamma*invstd*(dg - mean dg - xhat*mean(dg*xhat))
        ddx = np.zeros((len(e), n, h, w))
        ddx[np.arange(len(e)), pos[0], pos[2], pos[3]] = ge
        ddx -= (ge / m)[:, None, None, None]
        ddx -= (ge * xe / m)[:, None, None, None] * xhat[None]
        ddx *= gamma_all[bn][ch] * invstd
        gout = torch.from_numpy(np.ascontiguousarray(ddx.transpose(1, 0, 2, 3)))   # [N, cands, H, W]
        dw = torch.nn.grad.conv2d_weight(xin, (len(e),) + tuple(mod.weight.shape[1:]), gout,
                                         stride=mod.stride, padding=mod.padding)
        V = np.concatenate([(ge / tb)[:, None], (ge * xe / tg)[:, None],
                            dw.reshape(len(e), -1).numpy() / tw], axis=1)
        r = np.concatenate([[res_b[ch]], [res_g[ch]], res_w[ch]])
        pick, left = _best_subset(r, V)
        miss = float(np.linalg.norm(r))
        if pick.any() and left <= KEEP * miss:
            taken.extend(int(i) for i in e[pick])
            lines.append("#   flip: ReLU after %s, channel %d: %d of %d candidate(s) explain its "
                         "beta/gamma/%s-row gradient miss (L2 %.3g -> %.3g bounds)"
                         % (bn, ch, int(pick.sum()), len(e), conv, miss, left))
    return taken, lines


def explain(out, base, cands, bounds, params_before, rerun, log=print):
    """Finds the flips that explain `out` (trainbench's datasets). base: the
    float64 StepResult with grads=True and no flips; cands: candidates();
    bounds: {dataset: max-abs bound}; params_before: {name: numpy} of the
    state the step started from; rerun(force) -> float64 StepResult with
    grads=True. Returns (flips, StepResult of the float64 step with them)."""
    gamma = {bn: params_before["params/%s.weight" % bn].astype(np.float64) for bn in set(base.tracker.bn)}
    force, res = {}, base
    for _ in range(PASSES):
        found = 0
        for k in range(len(base.tracker.bn) - 1, -1, -1):
            if k not in cands:
                continue
            taken, lines = _layer(out, res, base.tracker, k, cands[k], force.get(k, []), bounds, gamma)
            for line in lines:
                log(line)
            if taken:
                force[k] = np.union1d(force.get(k, np.zeros(0, np.int64)), np.array(taken, np.int64))
                found += len(taken)
                res = rerun(force)
        if not found:
            break
    if force and count_flips(force):
        return force, res
    return {}, base
