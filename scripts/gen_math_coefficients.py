"""Regenerate ``xla_teach/backends/llvm/math/coefficients.py``: minimax polynomials and split constants.

Usage::

    python scripts/gen_math_coefficients.py           # rewrite the coefficients module
    python scripts/gen_math_coefficients.py --check   # exit 1 if the module is out of date

Everything is computed here from first principles, with Python's ``decimal`` module at 60
significant digits (no numpy, no mpmath):

* reference functions: ``exp``/``ln``/``sqrt`` come with ``decimal``; pi comes from Machin's
  formula, sin/cos/atan from their Taylor series and erf from the series
  ``erf(x) = 2/sqrt(pi) * exp(-x^2) * sum 2^n x^(2n+1) / (1*3*...*(2n+1))`` (all terms positive,
  so nothing cancels);
* the **Remez exchange algorithm** finds, for basis functions ``phi_i`` and a weight ``w``, the
  coefficients ``c`` minimising ``max |w(x) * (sum c_i phi_i(x) - f(x))|`` on ``[a, b]``.  It
  solves ``sum c_i phi_i(x_j) + (-1)^j E / w(x_j) = f(x_j)`` on ``n + 1`` reference points (the
  error equioscillates with amplitude ``E``), moves the references to the extrema of the new
  error curve, and repeats until the extrema are all as large as ``|E|``;
* coefficients are then rounded to float32 / float64 (round half to even on the exact binary
  value), and the error is measured again *with the rounded coefficients*.

The weight is chosen to be the error that matters: relative error of the final result
(``1 / f``), or for erfc the absolute error compared with ``erf`` (``exp(-x^2) / erf(x)``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal as D
from decimal import getcontext
from fractions import Fraction
from pathlib import Path

getcontext().prec = 60
TINY = D(10) ** -65
OUTPUT = Path(__file__).resolve().parents[1] / "xla_teach" / "backends" / "llvm" / "math" / "coefficients.py"
PRECISION = {"f32": 24, "f64": 53}  # significand bits, hidden bit included


# ---------------------------------------------------------------------------------------------
# High-precision reference functions
# ---------------------------------------------------------------------------------------------
def _atan_series(x: D) -> D:
    """atan(x) = x - x^3/3 + x^5/5 - ...   (|x| < 1; fast for |x| <= 0.5)."""
    term, total, k, x2 = x, x, 1, x * x
    while True:
        term, k = -term * x2, k + 2
        if abs(term / k) < TINY:
            return total
        total += term / k


PI = 16 * _atan_series(D(1) / 5) - 4 * _atan_series(D(1) / 239)  # Machin, 1706
LN2 = D(2).ln()


def d_sin(x: D) -> D:
    term, total, k, x2 = x, x, 1, x * x
    while abs(term) > TINY:
        term, k = -term * x2 / ((k + 1) * (k + 2)), k + 2
        total += term
    return total


def d_cos(x: D) -> D:
    term, total, k, x2 = D(1), D(1), 0, x * x
    while abs(term) > TINY:
        term, k = -term * x2 / ((k + 1) * (k + 2)), k + 2
        total += term
    return total


def d_erf(x: D) -> D:
    x2, term, total, n = x * x, x, x, 0
    while term > total * TINY:
        n += 1
        term = term * 2 * x2 / (2 * n + 1)
        total += term
    return 2 / PI.sqrt() * (-x2).exp() * total


def d_atanh(s: D) -> D:
    return ((1 + s) / (1 - s)).ln() / 2


def d_cbrt(x: D) -> D:
    return x ** (D(1) / 3)


# ---------------------------------------------------------------------------------------------
# Rounding to binary floating point
# ---------------------------------------------------------------------------------------------
def round_binary(value: D | Fraction, bits: int) -> Fraction:
    """``value`` rounded to ``bits`` significant bits, ties to even (no overflow/underflow here)."""
    v = Fraction(value)
    if v == 0:
        return v
    e = math.floor(math.log2(abs(v)))
    while abs(v) >= Fraction(2) ** (e + 1):
        e += 1
    while abs(v) < Fraction(2) ** e:
        e -= 1
    scale = Fraction(2) ** (e - bits + 1)
    return round(v / scale) * scale  # Fraction.__round__ rounds half to even


def split(value: D, bits: int, parts: int, first_bits: int | None = None) -> list[float]:
    """Cody–Waite split: ``value ~= p1 + p2 + ...``, each part a float of ``bits`` bits.

    ``first_bits`` (< bits) leaves trailing zeros in ``p1`` so that ``k * p1`` is exact for small
    integers ``k`` even without an FMA.
    """
    out, rest = [], Fraction(value)
    for i in range(parts):
        part = round_binary(rest, first_bits if (i == 0 and first_bits) else bits)
        out.append(float(part))
        rest -= part
    return out


# ---------------------------------------------------------------------------------------------
# Remez exchange
# ---------------------------------------------------------------------------------------------
def _solve(matrix: list[list[D]], rhs: list[D]) -> list[D]:
    """Gaussian elimination with partial pivoting, in Decimal."""
    n = len(matrix)
    m = [row[:] + [rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [D(0)] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


@dataclass
class Fit:
    """One approximation problem: ``target(x) ~= sum c_i * basis_i(x)`` weighted by ``weight``."""

    name: str
    doc: str
    target: Callable[[D], D]
    basis: Callable[[D, int], D]  # basis(x, i)
    weight: Callable[[D], D]
    interval: tuple[str, str]
    terms: dict[str, int]  # number of coefficients per float type
    grid: int = 1000

    def grid_points(self) -> list[D]:
        a, b, n = D(self.interval[0]), D(self.interval[1]), self.grid
        pts = [(a + b) / 2 - (b - a) / 2 * D(math.cos(math.pi * k / (n - 1))) for k in range(n)]
        return [a] + pts[1:-1] + [b]


def remez(fit: Fit, n: int, iterations: int = 40) -> list[D]:
    xs = fit.grid_points()
    fs = [fit.target(x) for x in xs]
    ws = [fit.weight(x) for x in xs]
    phis = [[fit.basis(x, i) for i in range(n)] for x in xs]
    ref = [round((len(xs) - 1) * (j + 0.5) / (n + 1)) for j in range(n + 1)]
    best: tuple[D, list[D]] | None = None
    for _ in range(iterations):
        rows = [phis[k] + [D(-1) ** j / ws[k]] for j, k in enumerate(ref)]
        *coeffs, amplitude = _solve(rows, [fs[k] for k in ref])
        errors = [w * (sum(c * p for c, p in zip(coeffs, ph, strict=True)) - f)
                  for w, ph, f in zip(ws, phis, fs, strict=True)]
        worst = max(abs(e) for e in errors)
        if best is None or worst < best[0]:
            best = (worst, coeffs)
        # New references: the extremum of each run of equal sign, trimmed to n + 1 runs.
        runs: list[int] = []
        for k, e in enumerate(errors):
            if runs and (e >= 0) == (errors[runs[-1]] >= 0):
                if abs(e) > abs(errors[runs[-1]]):
                    runs[-1] = k
            else:
                runs.append(k)
        while len(runs) > n + 1:
            runs.pop(0 if abs(errors[runs[0]]) < abs(errors[runs[-1]]) else -1)
        if len(runs) < n + 1 or worst - abs(amplitude) < abs(amplitude) * D("1e-5"):
            break
        ref = runs
    assert best is not None
    return best[1]


def fit_rounded(fit: Fit, n: int, bits: int) -> list[float]:
    """Minimax coefficients rounded to ``bits``, one at a time from the lowest power up.

    Rounding all coefficients of a minimax polynomial at once can lose several bits of accuracy.
    Instead we round ``c_0``, then re-run Remez for ``c_1 .. c_{n-1}`` against ``f - c_0 phi_0``,
    round ``c_1``, and so on: the later (smaller) coefficients absorb the earlier rounding errors.
    """
    fixed: list[float] = []
    while len(fixed) < n:
        done = list(fixed)

        def target(x: D, done: list[float] = done) -> D:
            return fit.target(x) - sum(D(c) * fit.basis(x, i) for i, c in enumerate(done))

        def basis(x: D, i: int, k: int = len(done)) -> D:
            return fit.basis(x, i + k)

        rest = Fit(**{**fit.__dict__, "target": target, "basis": basis})
        fixed.append(float(round_binary(remez(rest, n - len(done))[0], bits)))
    # The refits need a Haar basis; where they break down (a basis whose every member vanishes at
    # an interior point, like r^k on [-a, a]) plain rounding of the full fit is better: keep the best.
    plain = [float(round_binary(c, bits)) for c in remez(fit, n)]
    return min(fixed, plain, key=lambda coeffs: max_error(fit, coeffs))


def max_error(fit: Fit, coeffs: Sequence[float]) -> float:
    """max |weighted error| on a grid twice as dense, with the rounded coefficients."""
    dense = Fit(**{**fit.__dict__, "grid": 2 * fit.grid + 1})
    worst = D(0)
    for x in dense.grid_points():
        p = sum(D(c) * fit.basis(x, i) for i, c in enumerate(coeffs))
        worst = max(worst, abs(fit.weight(x) * (p - fit.target(x))))
    return float(worst)


# ---------------------------------------------------------------------------------------------
# The approximation problems
# ---------------------------------------------------------------------------------------------
SQRT2 = D(2).sqrt()
LOG_ZMAX = ((SQRT2 - 1) / (SQRT2 + 1)) ** 2 * D("1.0001")  # s = f/(2+f), f in [sqrt(1/2)-1, sqrt(2)-1]


def _erfc_scaled(x: D) -> D:
    """G(x) = erfc(x) * exp(x^2), smooth and ~ 1/(x sqrt(pi)) for large x."""
    return (1 - d_erf(x)) * (x * x).exp()


def _erfc_weight(x: D) -> D:
    return (-(x * x)).exp() / d_erf(x)


FITS = [
    Fit("EXPM1", "expm1(r) ~= r + r^2 * P(r) on |r| <= 0.347 (also exp = 1 + expm1); relative to expm1(r)",
        lambda r: r.exp() - 1 - r, lambda r, i: r ** (i + 2), lambda r: 1 / abs(r.exp() - 1) if r else D(1),
        ("-0.347", "0.347"), {"f32": 5, "f64": 10}),
    Fit("LOG", "log(1+f) = f - f^2/2 + s*(f^2/2 + z*P(z)), s = f/(2+f), z = s^2 <= 0.0295; relative to log(1+f)",
        lambda z: (2 * d_atanh(z.sqrt()) - 2 * z.sqrt()) / z.sqrt(), lambda z, i: z ** (i + 1),
        lambda z: z.sqrt() / (2 * d_atanh(z.sqrt())), (str(LOG_ZMAX * D("1e-9")), str(LOG_ZMAX)),
        {"f32": 3, "f64": 8}),
    Fit("SIN", "sin(r) ~= r + r^3 * P(r^2) on |r| <= 0.786 (just over pi/4); relative",
        lambda r: d_sin(r) - r, lambda r, i: r ** (2 * i + 3), lambda r: 1 / d_sin(r), ("1e-6", "0.786"),
        {"f32": 3, "f64": 6}),
    Fit("COS", "cos(r) ~= 1 - r^2/2 + r^4 * P(r^2) on |r| <= 0.786; relative",
        lambda r: d_cos(r) - 1 + r * r / 2, lambda r, i: r ** (2 * i + 4), lambda r: 1 / d_cos(r),
        ("1e-6", "0.786"), {"f32": 3, "f64": 6}),
    Fit("ATAN", "atan(u) ~= u + u^3 * P(u^2) on |u| <= 0.4143 (just over tan(pi/8)); relative",
        lambda u: _atan_series(u) - u, lambda u, i: u ** (2 * i + 3), lambda u: 1 / _atan_series(u),
        ("1e-6", "0.4143"), {"f32": 5, "f64": 11}),
    Fit("ERF_SMALL", "erf(x) ~= x * P(x^2) on |x| <= 1; relative",
        d_erf, lambda x, i: x ** (2 * i + 1), lambda x: 1 / d_erf(x), ("1e-6", "1"), {"f32": 7, "f64": 12}),
    Fit("ERFC_NEAR", "erfc(x) ~= exp(-x^2) * P(x - 1) on [1, 2] (f64 only); abs. error of erfc relative to erf",
        _erfc_scaled, lambda x, i: (x - 1) ** i if i else D(1), _erfc_weight, ("1", "2"), {"f64": 15}),
    Fit("ERFC_FAR_F32", "erfc(x) ~= exp(-x^2) * P(1/x) on [1, 4] (f32; erf(x) rounds to 1 beyond 4)",
        _erfc_scaled, lambda x, i: x ** -i, _erfc_weight, ("1", "4"), {"f32": 8}),
    Fit("ERFC_FAR_F64", "erfc(x) ~= exp(-x^2) * P(1/x) on [2, 5.93] (f64; erf(x) rounds to 1 beyond 5.93)",
        _erfc_scaled, lambda x, i: x ** -i, _erfc_weight, ("2", "5.93"), {"f64": 11}),
    Fit("CBRT", "cbrt(m) ~= P(m) on [1, 2], a seed for Newton's iteration; relative",
        d_cbrt, lambda m, i: m**i, lambda m: 1 / d_cbrt(m), ("1", "2"), {"f32": 5, "f64": 5}, grid=400),
]


def constants() -> list[tuple[str, str, dict[str, list[float] | float]]]:
    """Split constants: (name, comment, value per type)."""
    pio2, pio4 = PI / 2, PI / 4
    both = ("f32", "f64")
    return [
        ("LOG2E", "1/ln(2), rounded", {t: float(round_binary(1 / LN2, PRECISION[t])) for t in both}),
        ("LN2", "ln(2) = hi + lo (Cody-Waite pair; used with FMA)", {t: split(LN2, PRECISION[t], 2) for t in both}),
        ("LN2_POW", "ln(2) = hi + lo with hi of 42 bits, so e*hi is exact for |e| < 2^11 (pow, f64)",
         {"f64": split(LN2, 53, 2, first_bits=42)}),
        ("TWO_OVER_PI", "2/pi, rounded", {t: float(round_binary(2 / PI, PRECISION[t])) for t in both}),
        ("PIO2", "pi/2 = p1 + p2 + p3 (three-part Cody-Waite split)", {t: split(pio2, PRECISION[t], 3) for t in both}),
        ("PIO4", "pi/4 = hi + lo", {t: split(pio4, PRECISION[t], 2) for t in both}),
        ("CBRT2", "2^(1/3) and 2^(2/3), rounded",
         {t: [float(round_binary(d_cbrt(D(2)), PRECISION[t])), float(round_binary(d_cbrt(D(4)), PRECISION[t]))]
          for t in both}),
    ]


def render() -> str:
    lines = [
        '"""Polynomial coefficients and split constants for ``xla_teach.backends.llvm.math``.',
        "",
        "GENERATED by ``scripts/gen_math_coefficients.py`` -- do not edit by hand; rerun the script.",
        "",
        "Polynomials list their coefficients from the lowest power up, for the basis named in the",
        "comment above each table; ``err`` is the measured max weighted error with these (rounded)",
        "coefficients, as a power of two. float32 entries are exactly representable in float32.",
        '"""',
        "",
    ]
    for fit in FITS:
        lines.append(f"# {fit.doc}")
        entries = []
        for ftype, n in fit.terms.items():
            bits = PRECISION[ftype]
            coeffs = fit_rounded(fit, n, bits)
            err = max_error(fit, coeffs)
            print(f"{fit.name:13s} {ftype}: {n:2d} terms, max weighted error 2^{math.log2(err):.1f}", file=sys.stderr)
            body = "".join(f"        {c!r},\n" for c in coeffs)
            entries.append(f'    # err 2^{math.log2(err):.1f}\n    "{ftype}": (\n{body}    ),\n')
        lines.append(f"{fit.name}: dict[str, tuple[float, ...]] = {{\n{''.join(entries)}}}")
        lines.append("")
    for name, comment, values in constants():
        lines.append(f"# {comment}")
        body = "".join(f'    "{t}": {tuple(v) if isinstance(v, list) else v!r},\n' for t, v in values.items())
        kind = "tuple[float, ...]" if isinstance(next(iter(values.values())), list) else "float"
        lines.append(f"{name}: dict[str, {kind}] = {{\n{body}}}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the module is up to date")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        print("up to date" if current == text else f"{OUTPUT} is out of date")
        return 0 if current == text else 1
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
