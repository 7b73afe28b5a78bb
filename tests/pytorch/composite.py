# tests/pytorch/composite.py: kiln's gradients of composite expressions against PyTorch's.
#   python3 composite.py DRIVER DTYPE [SEED [CASES [P_SPECIAL]]]
# DRIVER: the built composite.cpp; DTYPE: d or f; P_SPECIAL: the share of values drawn from the
# special ones (0, -0, +-1, inf, NaN...). Prints each kind of mismatch with its smallest case;
# docs/architecture.md lists the differences that are expected.
import math, random, subprocess, sys, torch
driver, dtype = sys.argv[1], sys.argv[2]
torch.set_default_dtype(torch.float32 if dtype == 'f' else torch.float64)
inf, nan = float('inf'), float('nan')
random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
n = int(sys.argv[4]) if len(sys.argv) > 4 else 400
pspecial = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
specials = [0.0, -0.0, 1.0, -1.0, 0.5, inf, -inf, nan, 2.0]
def val(): return random.choice(specials) if random.random() < pspecial else round(random.uniform(-2, 2), 3)
def f_torch(c, x, y, z):
    if c == 0: return (x.exp() * y + z).sum()
    if c == 1: return (x.mul(y).amax(2, keepdim=True) - z).sum()
    if c == 2: return (torch.logsumexp(x + y, 1) * z.sum(1)).mean()
    if c == 3: return (torch.softmax(x * z, 2) * y).sum()
    if c == 4: return (torch.var(x + y, dim=(0, 2)) + z.mean()).sum()
    if c == 5: return torch.where(x > y, x * z, y / (1 + z * z)).sum()
    if c == 6: return (torch.linalg.vector_norm(x - y, 2, dim=1) + torch.linalg.vector_norm(z, 1)).sum()
    if c == 7: return (torch.clamp(x, -0.5, 0.5) * torch.relu(y) + torch.sigmoid(z)).sum()
    if c == 8: return (torch.pow(x.abs() + 0.5, y) * z).sum()
    if c == 9: return (x * (x * y).mean(1, keepdim=True) + z).sum()
    if c == 10: return (torch.prod(1 + 0.1 * x, 0) * y).sum() + z.amin(dim=(0, 2)).sum()
    if c == 11: return (torch.std(x * z, dim=(1, 2)) + y.sum()).sum()
    if c == 12: return (torch.log_softmax(x + y, 1) * z).sum()
    if c == 13: return (torch.linalg.vector_norm(x * y, inf, dim=(0, 1)) * torch.tanh(z.sum(dim=(0, 1)))).sum()
    if c == 14: return (torch.hypot(x, y) + torch.atan2(z, x) + torch.lerp(x, z, y)).sum()
    if c == 15: return (torch.maximum(x, y) * torch.minimum(x, z) + torch.fmax(y, torch.tensor(0.25))).sum()
def same(a, b, tol=3e-4 if dtype == 'f' else 1e-9):
    if math.isnan(a) and math.isnan(b): return True
    if a == b: return True
    if any(math.isinf(v) or math.isnan(v) for v in (a, b)): return False
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))
p = subprocess.Popen([driver, dtype], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
mism = {}
cases = list(range(16))
for it in range(n):
    c = random.choice(cases)
    a, b, cc = [random.choice([1, 2, 3, 5, 17]) for _ in range(3)]
    yb, yc = random.choice([1, b]), random.choice([1, cc])
    za, zc = random.choice([1, a]), random.choice([1, cc])
    if c == 3: yb, yc = b, cc  # softmax's weights
    xs = [val() for _ in range(a*b*cc)]; ys = [val() for _ in range(yb*yc)]; zs = [val() for _ in range(za*zc)]
    p.stdin.write(f"{c} {a} {b} {cc} {yb} {yc} {za} {zc}\n" + " ".join(map(repr, xs + ys + zs)) + "\n"); p.stdin.flush()
    F = p.stdout.readline().split()[1:]; G = p.stdout.readline().split()[1:]
    X = torch.tensor(xs).reshape(a, b, cc).requires_grad_(); Y = torch.tensor(ys).reshape(yb, yc).requires_grad_(); Z = torch.tensor(zs).reshape(za, 1, zc).requires_grad_()
    try:
        L = f_torch(c, X, Y, Z); L.backward()
        tf = [L.item()]; tg = X.grad.flatten().tolist() + Y.grad.flatten().tolist() + Z.grad.flatten().tolist()
    except RuntimeError as e:
        tf = ['err']; tg = []
    if F and F[0] == 'err' or tf == ['err']:
        if not (F[0] == 'err' and tf == ['err']): mism.setdefault((c, 'err'), []).append((F, tf))
        continue
    kf = [float(v) for v in F]; kg = [float(v) for v in G]
    okf = same(kf[0], tf[0]); okg = len(kg) == len(tg) and all(same(u, v) for u, v in zip(kg, tg))
    if not (okf and okg):
        mism.setdefault((c, 'fwd' if not okf else 'grad'), []).append(((a, b, cc, yb, yc, za, zc), xs, ys, zs, kf, tf, kg, tg))
for k, v in sorted(mism.items()):
    print(k, len(v))
    r = min(v, key=lambda r: len(r[1]) if isinstance(r[1], list) else 0)
    print('   ', str(r)[:1500])
print('done', n)
