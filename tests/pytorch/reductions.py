# tests/pytorch/reductions.py: kiln's reductions, alone and inside elementwise expressions, against
# PyTorch's, over views of rank 2 to 4 with random strides (padded, permuted, 0 to repeat an
# element), extents from 0 to 40, one or two axes (negative ones too), keepdim or not, and
# destinations laid out in another order.
#   python3 reductions.py DRIVER DTYPE [SEED [CASES]]
# DRIVER: the built reductions.cpp; DTYPE: d or f. Prints, per expression, how many cases agreed,
# and each kind of mismatch with its shortest case.
#
# Not compared: the standard deviation of a constant (a row of one value repeated). kiln's mean
# of n copies of v, a sum divided by n, can differ from v in the last bit, and so can PyTorch's
# (torch.full((17,), 0.1).mean() is not 0.1); where PyTorch's variance is exactly 0 there (its
# Welford update), kiln's is that bit squared, and x / std is huge rather than inf.
import math, random, subprocess, sys, warnings
import torch

warnings.filterwarnings("ignore")  # (PyTorch warns of a variance with no degrees of freedom: its NaN is compared)

driver, dtype = sys.argv[1], sys.argv[2]
random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
cases = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
tdtype = torch.float64 if dtype == 'd' else torch.float32
inf, nan = float('inf'), float('nan')
EXPRESSIONS = 16
ONE_AXIS = (5, 8, 15)  # softmax, argmax, log_softmax: one dimension

def strides_for(shape):
    """A padded layout in a random order of the dimensions, some strides then 0."""
    rank = len(shape)
    order = random.sample(range(rank), rank)
    pads = [random.choice([0, 0, 1, 3]) for _ in range(rank)]
    strides, step = [0] * rank, 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d] + pads[d]
    return [0 if random.random() < 0.1 else s for s in strides]

def span(shape, strides):
    return sum((e - 1) * s for e, s in zip(shape, strides)) + 1 if all(e > 0 for e in shape) else 1

def value():
    if random.random() < 0.01: return random.choice([nan, inf, -inf, 0.0, -0.0])
    return round(random.gauss(0, 2), 4)

def each_axis(t, f, axes, rank, keep):
    dims = sorted({a % rank for a in axes})
    for a in reversed(dims): t = f(t, a)
    return t if keep else t.squeeze(tuple(dims))

def reference(ex, x, y, w, axes, keep, rank, shape):
    K = True
    if ex == 0: return x - x.amax(axes, keepdim=K)
    if ex == 1: return (x - x.mean(axes, keepdim=K)) / torch.sqrt(x.var(axes, keepdim=K, correction=0) + 1e-5) * w
    if ex == 2: return x * y.sum(axes, keepdim=K)
    if ex == 3: return torch.logsumexp(x, axes, keepdim=keep)
    if ex == 4: return (x * y).sum(axes, keepdim=keep)
    if ex == 5: return torch.softmax(x, axes[0])
    if ex == 6: return x / x.std(axes, keepdim=K) + y.amin(axes, keepdim=K)
    if ex == 7: return (x * y).var(axes, keepdim=keep)
    if ex == 8: return x.argmax(axes[0], keepdim=True) if keep else x.argmin(axes[0])
    if ex == 9:
        if keep: return torch.linalg.vector_norm(x, 1, axes, keepdim=K) + torch.linalg.vector_norm(y, 2, axes, keepdim=K)
        return torch.linalg.vector_norm(x - y, inf, axes)
    # (Factors near 1: a product that overflows and underflows within one row is inf, 0 or NaN by
    # the order of its factors, and PyTorch reduces one dimension at a time.)
    if ex == 10: return each_axis(x * 0.01 + 1, lambda t, a: t.prod(a, keepdim=True), axes, rank, keep)
    if ex == 11: return torch.where(x > y, torch.exp(x) - y, torch.tanh(y) * x) + w
    if ex == 12:
        if keep: return x.mean(axes, keepdim=K) * y.amax(axes, keepdim=K) - (x * y).sum(axes, keepdim=K)
        return x.mean(axes) + y.amax(axes)
    if ex == 13:
        if keep: return (x > 0).count_nonzero(axes).reshape([1 if d in {a % rank for a in axes} else shape[d] for d in range(rank)])
        return each_axis(x > y, lambda t, a: t.any(a, keepdim=True), axes, rank, False)
    if ex == 14: return x - torch.logsumexp(x, axes, keepdim=K)
    if ex == 15: return torch.log_softmax(x, axes[0]) * y

def agree(got, want, tol):
    if math.isnan(got) and math.isnan(want): return True
    if got == want: return True
    if any(math.isinf(v) or math.isnan(v) for v in (got, want)): return False
    return abs(got - want) <= tol * max(1.0, abs(got), abs(want))

p = subprocess.Popen([driver, dtype], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
mismatches, agreed, skipped = {}, [0] * EXPRESSIONS, 0
for _ in range(cases):
    rank = random.choice([2, 3, 4])
    ex = random.randrange(EXPRESSIONS)
    n = 1 if ex in ONE_AXIS else random.choice([1, 1, 2])
    while True:
        shape = [random.choice([1, 2, 3, 5, 8, 17, 33, 40]) for _ in range(rank)]
        if random.random() < 0.03: shape[random.randrange(rank)] = 0
        if math.prod(shape) <= 3000: break
    axes = [a - rank if random.random() < 0.3 else a for a in random.sample(range(rank), n)]
    keep = random.random() < 0.5
    xs, ys, ws = strides_for(shape), strides_for(shape), random.choice([0, 1, 2])
    xo, yo, wo = random.randrange(3), random.randrange(3), random.randrange(3)
    count = max(xo + span(shape, xs), yo + span(shape, ys), wo + (shape[-1] - 1) * ws + 1 if shape[-1] > 0 else 1)
    values = [value() for _ in range(count)]
    order = random.sample(range(rank), rank)
    padding = random.randrange(2)
    line = ' '.join(map(str, [rank, n, ex, int(keep), *shape, xo, *xs, yo, *ys, wo, ws, *axes, *order, padding, count])) + ' ' + \
        ' '.join(repr(v) for v in values) + '\n'
    p.stdin.write(line)
    p.stdin.flush()
    out = p.stdout.readline().split()
    base = torch.tensor(values, dtype=tdtype)
    x, y = torch.as_strided(base, shape, xs, xo), torch.as_strided(base, shape, ys, yo)
    w = torch.as_strided(base, [shape[-1]], [ws], wo)
    try:
        want, error = reference(ex, x, y, w, axes, keep, rank, shape), None
    except (RuntimeError, IndexError) as e:
        want, error = None, str(e)
    if want is not None and ex in (1, 6) and (x.var(axes) == 0).any():
        skipped += 1
        continue
    kind = None
    if out[0] == 'E':
        if want is not None: kind = 'kiln threw, PyTorch did not: ' + ' '.join(out[1:])[:100]
    elif want is None:
        kind = 'PyTorch threw, kiln did not: ' + error[:100]
    else:
        got = [float(v) for v in out[1:]]
        want = want.contiguous().reshape(-1).double().tolist()
        tol = 1e-9 if dtype == 'd' else (2e-3 if ex in (1, 6) else 3e-4)  # (x - mean) / std amplifies the mean's last bit
        if len(got) != len(want): kind = f'{len(got)} elements, PyTorch {len(want)}'
        elif not all(agree(g, v, tol) for g, v in zip(got, want)): kind = 'values'
    if kind is None:
        agreed[ex] += 1
        continue
    key = (ex, kind)
    if key not in mismatches or len(line) < len(mismatches[key][0]):
        mismatches[key] = (line, ' '.join(out[:8]), str(want[:6] if isinstance(want, list) else error)[:200])
print(f'{cases} cases ({dtype}): agreed per expression {agreed}, {skipped} constant rows not compared, '
      f'{len(mismatches)} kinds of mismatch')
for (ex, kind), (line, got, want) in sorted(mismatches.items()):
    print(f'== expression {ex}: {kind}\n  case: {line.strip()[:400]}\n  kiln: {got}\n  PyTorch: {want}')
