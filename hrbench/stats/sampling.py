"""Exact, vectorized binomial sampling by table inversion.

``numpy.random.Generator.binomial`` costs ~100 ns per draw, which makes a
10,000-replicate bootstrap over thousands of task-stages too slow. Every
bootstrap draw here comes from a small set of distributions known in advance
(``Bin(n, p̂)`` for one ``p̂`` per task-stage and ``n`` up to the trial count),
so we tabulate their CDFs once and invert uniforms through a guide table
(Chen & Asau 1974): the draw is exact — the same distribution as
``Generator.binomial`` — up to floating-point resolution of the CDF.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Guide cells per row: a power of two, so that u * G and F * G are exact in floating
# point and the guide never starts the search past the answer; about one cell per
# support point keeps most draws to one comparison without the guide outgrowing the CDF.
MAX_GUIDE_CELLS = 128


def guide_cells(width: int) -> int:
    """Power-of-two guide size for CDF rows of ``width`` entries."""
    return int(min(MAX_GUIDE_CELLS, 1 << max(1, (width - 1).bit_length())))


@dataclass(frozen=True, eq=False)
class BinomialTables:
    """CDF rows ``F[row, k] = P(X <= k)`` (padded with 1.0) plus their guide tables."""

    cdf: np.ndarray  # (rows * width,) float64, flattened row-major
    guide: np.ndarray  # (rows * (cells + 1),) int32: #{k : F[k] <= g / cells}
    width: int
    cells: int

    def sample(self, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Inverse-CDF draw ``min{k : F[row, k] > u}`` for each (row, uniform) pair."""
        # int32 indices: half the memory traffic of int64 in this memory-bound loop.
        rows = rows.ravel().astype(np.int32, copy=False)
        u = u.ravel()
        G = self.cells
        cell = (u * G).astype(np.int32)
        cell += rows * np.int32(G + 1)
        # The answer lies in [guide[g], guide[g+1]].
        lo = self.guide[cell]
        cell += 1
        hi = self.guide[cell]
        # Most cells hold at most one CDF jump: one comparison settles them.
        active = np.flatnonzero(lo < hi)
        base = rows[active] * np.int32(self.width)  # only the unsettled draws need CDF lookups
        lo[active] += self.cdf[base + lo[active]] <= u[active]
        still = lo[active] < hi[active]
        active, base = active[still], base[still]
        # Binary-search the rest (tail cells can span many k, too many for a linear walk).
        while active.size:
            a_lo, a_hi = lo[active], hi[active]
            mid = (a_lo + a_hi) >> 1
            above = self.cdf[base + mid] > u[active]
            a_hi = np.where(above, mid, a_hi)
            a_lo = np.where(above, a_lo, mid + 1)
            lo[active], hi[active] = a_lo, a_hi
            still = a_lo < a_hi
            active, base = active[still], base[still]
        return lo


def _guide(cdf: np.ndarray, G: int) -> np.ndarray:
    """Guide table ``guide[r, g] = #{k : F[r, k] <= g / G}`` for ``g = 0..G``, computed exactly.

    ``guide[r, G]`` is clipped to the last column, where F = 1 > u always.
    """
    rows, width = cdf.shape
    cell = np.ceil(cdf * G).astype(np.int64)  # F <= g/G  iff  cell <= g
    flat = (np.arange(rows)[:, None] * (G + 1) + np.minimum(cell, G)).ravel()
    counts = np.bincount(flat, minlength=rows * (G + 1)).reshape(rows, G + 1)
    guide = np.minimum(np.cumsum(counts, axis=1), width - 1)
    return guide.astype(np.int32)


def _finish(pmf: np.ndarray, n: np.ndarray) -> BinomialTables:
    rows, width = pmf.shape
    cdf = np.cumsum(pmf, axis=1)
    # Force F = 1 from k = n on: guarantees termination and removes rounding drift.
    cdf[np.arange(width)[None, :] >= n[:, None]] = 1.0
    np.minimum(cdf, 1.0, out=cdf)
    G = guide_cells(width)
    return BinomialTables(cdf=cdf.ravel(), guide=_guide(cdf, G).ravel(), width=width, cells=G)


def binomial_tables(n: np.ndarray, p: np.ndarray, width: int) -> BinomialTables:
    """Tables for ``Bin(n_r, p_r)``, one row per (n, p) pair; ``width > max(n)``."""
    n = np.asarray(n, dtype=np.int64)
    p = np.asarray(p, dtype=np.float64)
    k = np.arange(width)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        from scipy.special import gammaln

        nn = n[:, None].astype(np.float64)
        logpmf = (
            gammaln(nn + 1)
            - gammaln(k + 1)
            - gammaln(np.maximum(nn - k, 0) + 1)
            + np.where(k > 0, k * np.log(p[:, None]), 0.0)
            + np.where(nn - k > 0, (nn - k) * np.log1p(-p[:, None]), 0.0)
        )
    pmf = np.where(k <= n[:, None], np.exp(logpmf), 0.0)
    return _finish(pmf, n)


def binomial_tables_all_n(p: np.ndarray, max_n: int) -> BinomialTables:
    """Tables for ``Bin(n, p_j)`` for every ``n in 0..max_n``; row index ``j * (max_n+1) + n``.

    Built by the Pascal recurrence pmf_{n+1}(k) = (1−p) pmf_n(k) + p pmf_n(k−1),
    which is exact and cheap; used for the natural-rollout chain where ``n`` is
    itself a resampled count.
    """
    p = np.asarray(p, dtype=np.float64)
    width = max_n + 1
    pmf = np.zeros((p.size, width, width))
    pmf[:, 0, 0] = 1.0
    pc = p[:, None]
    for n in range(max_n):
        pmf[:, n + 1, :] = (1 - pc) * pmf[:, n, :]
        pmf[:, n + 1, 1:] += pc * pmf[:, n, :-1]
    n_rows = np.tile(np.arange(width), p.size)
    return _finish(pmf.reshape(p.size * width, width), n_rows)
