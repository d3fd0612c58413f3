/* Block-diagonal Wigner-D of the bond frame (SPEC §7); mirrors ref_wigner.c
 * (same charts, same CG recursion and contraction order), one edge per
 * iteration in parallel, evaluated in double for both precisions. */
#include "omp_ops.h"

#define WL_MAX 12
#define WN (2 * WL_MAX + 1)
#define WCG_SIZE 7755 /* ecenet_cg_offset(WL_MAX + 1) */

/* Value and gradient with respect to r̂ (3 components): D¹'s entries are
 * simple expressions of r̂, so forward-mode duals give its Jacobian exactly. */
typedef struct { double v, g[3]; } dual;

static dual dconst(double v) { dual r = {v, {0, 0, 0}}; return r; }
static dual dvar(double v, int k) { dual r = dconst(v); r.g[k] = 1.0; return r; }
static dual dmul(dual a, dual b)
{
    dual r = {a.v * b.v, {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = a.g[k] * b.v + a.v * b.g[k];
    return r;
}
static dual ddiv(dual a, dual b)
{
    dual r = {a.v / b.v, {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = (a.g[k] - r.v * b.g[k]) / b.v;
    return r;
}
static dual dneg(dual a)
{
    for (int k = 0; k < 3; k++) a.g[k] = -a.g[k];
    a.v = -a.v;
    return a;
}
static dual dsqrt(dual a)
{
    dual r = {sqrt(a.v), {0, 0, 0}};
    for (int k = 0; k < 3; k++) r.g[k] = a.g[k] / (2.0 * r.v);
    return r;
}
static dual dadd(dual a, dual b)
{
    a.v += b.v;
    for (int k = 0; k < 3; k++) a.g[k] += b.g[k];
    return a;
}

/* D¹[g][k] = (e_k)_g, rows g in (y,z,x), columns (e_y, e_z, e_x) (SPEC §7.1).
 * Chart A (|r̂x| < 0.9): reference axis x̂; chart B (|r̂x| >= 0.9): ŷ. */
static void d1_from_rhat(const double rh[3], dual D[9])
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
static void d_next(int l, const double *G, const double *D1, const double *Dp, double *Dl)
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

void OMP_FN(omp_wigner_fwd)(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                            void *D_)
{
    const real *cgr = cg_, *d = d_, *r = r_;
    real *D = D_;
    const int ND = omp_dblock_offset(L + 1);
    const int ncg = L >= 2 ? ecenet_cg_offset(L + 1) : 0;
    double cg[WCG_SIZE];
    for (int q = 0; q < ncg; q++)
        cg[q] = (double)cgr[q];
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        real *De = D + e * ND;
        double Dd[WL_MAX * (2 * WL_MAX - 1) * (2 * WL_MAX + 1) / 3 + WN * WN];
        Dd[0] = 1.0;
        if (L >= 1) {
            const double re = (double)r[e];
            double rh[3] = {(double)d[3 * e] / re, (double)d[3 * e + 1] / re,
                            (double)d[3 * e + 2] / re};
            dual D1[9];
            d1_from_rhat(rh, D1);
            for (int q = 0; q < 9; q++)
                Dd[1 + q] = D1[q].v;
            for (int l = 2; l <= L; l++)
                d_next(l, cg + ecenet_cg_offset(l), Dd + 1, Dd + omp_dblock_offset(l - 1),
                       Dd + omp_dblock_offset(l));
        }
        for (int q = 0; q < ND; q++)
            De[q] = (real)Dd[q];
    }
}

/* SPEC §7.5, as ref_wigner_vjp. */
void OMP_FN(omp_wigner_vjp)(int64_t E, int L, const void *cg_, const void *d_, const void *r_,
                            const void *D_, const void *Dbar_, void *dbar_)
{
    const real *cgr = cg_, *d = d_, *r = r_, *D = D_, *Dbar = Dbar_;
    real *dbar = dbar_;
    const int ND = omp_dblock_offset(L + 1);
    if (L < 1)
        return;
    const int ncg = L >= 2 ? ecenet_cg_offset(L + 1) : 0;
    double cg[WCG_SIZE];
    for (int q = 0; q < ncg; q++)
        cg[q] = (double)cgr[q];
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < E; e++) {
        double Gb[WN * WN], Mt[3 * WN * 3 * WN], tmp[3 * WN * WN], carry[WN * WN];
        const real *De = D + e * ND;
        const real *Db = Dbar + e * ND;
        double D1bar[9];
        for (int q = 0; q < 9; q++)
            D1bar[q] = (double)Db[1 + q];
        for (int l = L; l >= 2; l--) {
            const int n2 = 2 * l - 1, n3 = 2 * l + 1, nq = 3 * n2;
            const double *G = cg + ecenet_cg_offset(l);
            const real *Dl_bar = Db + omp_dblock_offset(l);
            for (int q = 0; q < n3 * n3; q++)
                Gb[q] = (double)Dl_bar[q] + (l < L ? carry[q] : 0.0);
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
            const real *Dp = De + omp_dblock_offset(l - 1);
            const real *D1 = De + 1;
            for (int a = 0; a < 3; a++)
                for (int ap = 0; ap < 3; ap++) {
                    double acc = 0.0;
                    for (int b = 0; b < n2; b++)
                        for (int bp = 0; bp < n2; bp++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * (double)Dp[b * n2 + bp];
                    D1bar[a * 3 + ap] += acc;
                }
            for (int b = 0; b < n2; b++)
                for (int bp = 0; bp < n2; bp++) {
                    double acc = 0.0;
                    for (int a = 0; a < 3; a++)
                        for (int ap = 0; ap < 3; ap++)
                            acc += Mt[(a * n2 + b) * nq + ap * n2 + bp] * (double)D1[a * 3 + ap];
                    carry[b * n2 + bp] = acc;
                }
        }
        if (L >= 2)
            for (int q = 0; q < 9; q++)
                D1bar[q] += carry[q];
        const double re = (double)r[e];
        const double de[3] = {(double)d[3 * e], (double)d[3 * e + 1], (double)d[3 * e + 2]};
        double rh[3] = {de[0] / re, de[1] / re, de[2] / re};
        dual D1d[9];
        d1_from_rhat(rh, D1d);
        double rhbar[3] = {0, 0, 0};
        for (int q = 0; q < 9; q++)
            for (int k = 0; k < 3; k++)
                rhbar[k] += D1bar[q] * D1d[q].g[k];
        double dot = rhbar[0] * de[0] + rhbar[1] * de[1] + rhbar[2] * de[2];
        double r3 = re * re * re;
        for (int b = 0; b < 3; b++)
            dbar[3 * e + b] += (real)(rhbar[b] / re - dot * de[b] / r3);
    }
}
