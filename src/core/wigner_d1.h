/* The per-edge bond-frame math shared by the ref and omp backends, in fp64
 * (SPEC §7.1-§7.2): D¹ from r̂ with the two charts of ECENet's
 * build_D1_from_rhat, and one step of the CG recursion in the reference's
 * contraction order. The includer defines WN (the 2·l_max + 1 bound). */
#ifndef ECN_WIGNER_D1_H
#define ECN_WIGNER_D1_H

#include <math.h>

/* Value and gradient with respect to r̂ (3 components): D¹'s entries are
 * simple expressions of r̂, so forward-mode duals give its Jacobian exactly. */
typedef struct { double v, g[3]; } dual;

static inline dual dconst(double v) { dual r = {v, {0, 0, 0}}; return r; }
static inline dual dvar(double v, int k) { dual r = dconst(v); r.g[k] = 1.0; return r; }
static inline dual dmul(dual a, dual b)
{
    dual r = {a.v * b.v, {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = a.g[k] * b.v + a.v * b.g[k];
    return r;
}
static inline dual ddiv(dual a, dual b)
{
    dual r = {a.v / b.v, {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = (a.g[k] - r.v * b.g[k]) / b.v;
    return r;
}
static inline dual dneg(dual a)
{
    for (int k = 0; k < 3; k++) a.g[k] = -a.g[k];
    a.v = -a.v;
    return a;
}
static inline dual dsqrt(dual a)
{
    dual r = {sqrt(a.v), {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = a.g[k] / (2.0 * r.v);
    return r;
}
static inline dual dadd(dual a, dual b)
{
    a.v += b.v;
    for (int k = 0; k < 3; k++) a.g[k] += b.g[k];
    return a;
}

/* D¹[g][k] = (e_k)_g, rows g in (y,z,x), columns (e_y, e_z, e_x) (SPEC §7.1).
 * Chart A (|r̂x| < 0.9): reference axis x̂; chart B (|r̂x| >= 0.9): ŷ. */
static inline void d1_from_rhat(const double rh[3], dual D[9])
{
    dual x = dvar(rh[0], 0), y = dvar(rh[1], 1), z = dvar(rh[2], 2);
    if (fabs(rh[0]) < 0.9) {
        dual s = dsqrt(dadd(dmul(y, y), dmul(z, z)));
        D[0] = ddiv(z, s);           D[1] = y; D[2] = dneg(ddiv(dmul(x, y), s));
        D[3] = dneg(ddiv(y, s));     D[4] = z; D[5] = dneg(ddiv(dmul(x, z), s));
        D[6] = dconst(0.0);          D[7] = x; D[8] = s;
    } else {
        dual s = dsqrt(dadd(dmul(x, x), dmul(z, z)));
        D[0] = dconst(0.0);          D[1] = y; D[2] = s;
        D[3] = ddiv(x, s);           D[4] = z; D[5] = dneg(ddiv(dmul(y, z), s));
        D[6] = dneg(ddiv(z, s));     D[7] = x; D[8] = dneg(ddiv(dmul(x, y), s));
    }
}

/* D^l from D¹ and D^{l-1}, in the reference's contraction order:
 * U[a,b',k] = Σ_b Γ[a,b,k] D^{l-1}[b,b'];  V[a',b',k] = Σ_a D¹[a,a'] U[a,b',k];
 * D^l[k,k'] = Σ_{a',b'} V[a',b',k] Γ[a',b',k']. */
static inline void d_next(int l, const double *G, const double *D1, const double *Dp, double *Dl)
{
    const int n2 = 2 * l - 1, n3 = 2 * l + 1;
    double U[3 * WN * WN], V[3 * WN * WN];
    for (int a = 0; a < 3; a++)
        for (int bp = 0; bp < n2; bp++)
            for (int k = 0; k < n3; k++) {
                double acc = 0.0;
                for (int b = 0; b < n2; b++)
                    acc += G[(a * n2 + b) * n3 + k] * Dp[b * n2 + bp];
                U[(a * n2 + bp) * n3 + k] = acc;
            }
    for (int ap = 0; ap < 3; ap++)
        for (int bp = 0; bp < n2; bp++)
            for (int k = 0; k < n3; k++) {
                double acc = 0.0;
                for (int a = 0; a < 3; a++)
                    acc += D1[a * 3 + ap] * U[(a * n2 + bp) * n3 + k];
                V[(ap * n2 + bp) * n3 + k] = acc;
            }
    for (int k = 0; k < n3; k++)
        for (int kp = 0; kp < n3; kp++) {
            double acc = 0.0;
            for (int q = 0; q < 3 * n2; q++)
                acc += V[q * n3 + k] * G[q * n3 + kp];
            Dl[k * n3 + kp] = acc;
        }
}

/* Offset of block l in a compact Wigner-D row: Σ_{l'<l} (2l'+1)². */
static inline int ecn_dblock_offset(int l) { return l * (2 * l - 1) * (2 * l + 1) / 3; }

/* One edge of the Wigner-D VJP (SPEC §7.5), in fp64: De, Db the edge's
 * compact D and D̄ (ND values each), d the edge vector, r its length (with
 * the 1e-30 regulariser); adds ∂/∂d to dbar[0..2]. For l = L..2,
 * Mtx = Γ D̄^l Γᵀ feeds D̄¹ and D̄^{l-1}; then D̄¹ -> r̂̄ through the chart, and
 * r̂̄ -> d̄ through r̂ = d/r. */
static inline void ecn_wigner_vjp_edge(int L, const double *cg, const double *De,
                                       const double *Db, const double d[3], double r,
                                       double dbar[3])
{
    double Gb[WN * WN], Mt[3 * WN * 3 * WN], tmp[3 * WN * WN], carry[WN * WN];
    double D1bar[9];
    if (L < 1)
        return;
    for (int q = 0; q < 9; q++)
        D1bar[q] = Db[1 + q];
    for (int l = L; l >= 2; l--) {
        const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2;
        const double *G = cg + ecenet_cg_offset(l);
        const double *Dl_bar = Db + ecn_dblock_offset(l);
        for (int q = 0; q < n3 * n3; q++) /* carry: D̄^{l} accumulated from level l+1 */
            Gb[q] = Dl_bar[q] + (l < L ? carry[q] : 0.0);
        /* tmp[q,k'] = Σ_k Γ[q,k] Gb[k,k'];  Mt[q,q'] = Σ_k' tmp[q,k'] Γ[q',k'] */
        for (int q = 0; q < nq; q++)
            for (int kp = 0; kp < n3; kp++) {
                double acc = 0.0;
                for (int k = 0; k < n3; k++)
                    acc += G[q * n3 + k] * Gb[k * n3 + kp];
                tmp[q * n3 + kp] = acc;
            }
        for (int q = 0; q < nq; q++)
            for (int qp = 0; qp < nq; qp++) {
                double acc = 0.0;
                for (int kp = 0; kp < n3; kp++)
                    acc += tmp[q * n3 + kp] * G[qp * n3 + kp];
                Mt[q * nq + qp] = acc;
            }
        const double *Dp = De + ecn_dblock_offset(l - 1), *D1 = De + 1;
        for (int a = 0; a < 3; a++)
            for (int ap = 0; ap < 3; ap++) {
                double acc = 0.0;
                for (int b = 0; b < n2; b++)
                    for (int bp = 0; bp < n2; bp++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * Dp[b * n2 + bp];
                D1bar[a * 3 + ap] += acc;
            }
        for (int b = 0; b < n2; b++)
            for (int bp = 0; bp < n2; bp++) {
                double acc = 0.0;
                for (int a = 0; a < 3; a++)
                    for (int ap = 0; ap < 3; ap++)
                        acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * D1[a * 3 + ap];
                carry[b * n2 + bp] = acc;
            }
    }
    if (L >= 2) /* the l = 1 part of the carry is a D̄¹ contribution */
        for (int q = 0; q < 9; q++)
            D1bar[q] += carry[q];
    double rh[3] = {d[0] / r, d[1] / r, d[2] / r};
    dual D1d[9];
    d1_from_rhat(rh, D1d);
    double rhbar[3] = {0, 0, 0};
    for (int q = 0; q < 9; q++)
        for (int k = 0; k < 3; k++)
            rhbar[k] += D1bar[q] * D1d[q].g[k];
    /* r̂ = d/r: ∂r̂_α/∂d_β = δ_αβ/r - d_α d_β / r³ */
    const double dot = rhbar[0] * d[0] + rhbar[1] * d[1] + rhbar[2] * d[2], r3 = r * r * r;
    for (int b = 0; b < 3; b++)
        dbar[b] += rhbar[b] / r - dot * d[b] / r3;
}

#endif
