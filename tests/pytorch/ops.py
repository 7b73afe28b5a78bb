# tests/pytorch/ops.py: every elementwise op of kiln and its gradient against PyTorch's, at edge
# values (+-0, +-inf, NaN, subnormals, the ends of each domain) mixed with ordinary ones, in float
# and double, over tensors of 1 to 33 elements (PyTorch's scalar and vectorised kernels both).
#   python3 ops.py DRIVER SEED CASES [OP,OP...]
# DRIVER: the built ops.cpp. Prints each kind of mismatch (op, type, value or gradient) with up to
# six inputs; docs/architecture.md lists the differences that are expected.
import math, random, subprocess, sys, torch
import torch.nn.functional as Fn
inf, nan = float('inf'), float('nan')
specials = [709.5, 709.7, 127.5, 1023.5, 88.5, 0.0, -0.0, inf, -inf, nan, 1e-310, -1e-310, 1e-40, -1e-40, 1e308, -1e308, 3e38, -3e38, 1.0, -1.0, 0.5, -0.5, 2.0, 2.5, -2.5, 88.7, -88.7, 89.0, -104.0, 710.0, -745.0, 20.0, 1e-8, -1e-8, 0.99999, -0.99999, 1.5, -1.5]
U = {'sigmoid': torch.sigmoid, 'logit': torch.logit, 'relu': torch.relu, 'gelu': Fn.gelu, 'silu': Fn.silu, 'neg': torch.neg,
     'abs': torch.abs, 'sign': torch.sign, 'reciprocal': torch.reciprocal, 'square': torch.square, 'floor': torch.floor,
     'ceil': torch.ceil, 'round': torch.round, 'trunc': torch.trunc, 'frac': torch.frac, 'sqrt': torch.sqrt, 'rsqrt': torch.rsqrt,
     'exp': torch.exp, 'exp2': torch.exp2, 'expm1': torch.expm1, 'log': torch.log, 'log2': torch.log2, 'log10': torch.log10,
     'log1p': torch.log1p, 'sin': torch.sin, 'cos': torch.cos, 'tan': torch.tan, 'asin': torch.asin, 'acos': torch.acos,
     'atan': torch.atan, 'sinh': torch.sinh, 'cosh': torch.cosh, 'tanh': torch.tanh, 'asinh': torch.asinh, 'acosh': torch.acosh,
     'atanh': torch.atanh, 'erf': torch.erf, 'erfc': torch.erfc, 'softplus': Fn.softplus, 'elu': Fn.elu,
     'leaky_relu': Fn.leaky_relu, 'hardtanh': Fn.hardtanh, 'clamp': lambda v: torch.clamp(v, -1.5, 2.0)}
B = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'pow': torch.pow, 'fmod': torch.fmod,
     'remainder': torch.remainder, 'minimum': torch.minimum, 'maximum': torch.maximum, 'fmin': torch.fmin, 'fmax': torch.fmax,
     'hypot': torch.hypot, 'copysign': torch.copysign, 'atan2': torch.atan2, 'lerp': lambda a, b: torch.lerp(a, b, 0.25),
     'where': lambda a, b: torch.where(a > b, a * 2.0, b)}
ops = sys.argv[4].split(',') if len(sys.argv) > 4 else list(U) + list(B)
def close(a, b, rtol):
    if math.isnan(a) and math.isnan(b): return True
    if a == b: return True
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b): return False
    tiny = 1e-300 if rtol < 1e-8 else 1e-37
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + tiny
random.seed(int(sys.argv[2])); iters = int(sys.argv[3])
p = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
bad = {}
for it in range(iters):
    op = random.choice(ops); t = random.choice(['f', 'd'])
    dt = torch.float32 if t == 'f' else torch.float64
    n = random.choice([1, 3, 7, 8, 9, 16, 17, 33])
    def val():
        return random.choice(specials) if random.random() < 0.4 else round(random.uniform(-4, 4), random.choice([0, 1, 3]))
    xs = [val() for _ in range(n)]; ys = [val() for _ in range(n)]; ws = [random.choice([1.0, -0.5, 2.0]) for _ in range(n)]
    # the values as the type holds them
    xt = torch.tensor(xs, dtype=dt); yt = torch.tensor(ys, dtype=dt); wt = torch.tensor(ws, dtype=dt)
    p.stdin.write(f"{t} {op} {n}\n" + " ".join(repr(float(v)) for v in xt.tolist()) + "\n" + " ".join(repr(float(v)) for v in yt.tolist()) + "\n" + " ".join(repr(v) for v in ws) + "\n"); p.stdin.flush()
    F = [float(v) for v in p.stdout.readline().split()[1:]]
    GX = [float(v) for v in p.stdout.readline().split()[1:]]
    GY = [float(v) for v in p.stdout.readline().split()[1:]]
    a = xt.clone().requires_grad_(True); b = yt.clone().requires_grad_(True)
    if op in U: r = U[op](a)
    else: r = B[op](a, b)
    (r * wt).sum().backward()
    rtol = 5e-6 if t == 'f' else 1e-12
    grtol = 2e-5 if t == 'f' else 1e-10
    tf = r.detach().tolist(); tgx = a.grad.tolist() if a.grad is not None else [0.0]*n
    tgy = (b.grad.tolist() if b.grad is not None else [0.0]*n) if op in B else []
    for kind, mine, ref, tol, inp in (('fwd', F, tf, rtol, None), ('dx', GX, tgx, grtol, None), ('dy', GY, tgy, grtol, None)):
        for i, (m, r_) in enumerate(zip(mine, ref)):
            if not close(m, r_, tol):
                key = (op, t, kind)
                bad.setdefault(key, set()).add((xt.tolist()[i], yt.tolist()[i] if op in B else None, m, r_, ws[i] if kind != 'fwd' else None))
        if len(mine) != len(ref): bad.setdefault((op, t, kind, 'len'), set()).add((len(mine), len(ref)))
for k in sorted(bad):
    v = sorted(bad[k], key=str)
    print(k, len(v))
    for e in v[:6]: print('    x=%r y=%r kiln=%r torch=%r w=%r' % e if len(e) == 5 else '    %r' % (e,))
