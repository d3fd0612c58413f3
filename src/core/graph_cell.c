/* The lattice of a neighbour search (graph.c): the frame of a cell (zero
 * rows of non-periodic axes completed, checked, inverted), the reduced basis
 * a skewed cell is searched in, and the density check that refuses a cell
 * far denser than matter. Pure geometry, no lists. */
#include <math.h>
#include <string.h>

#include "error.h"
#include "graph_cell.h"

/* ---- geometry --------------------------------------------------------------- */

static double det3(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
           m[2] * (m[3] * m[7] - m[4] * m[6]);
}

static void cross3(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* hypot, not sqrt of the sum of squares: a lattice vector of 1e200 Å has a
 * length, not inf. So the degeneracy test below compares true lengths (an
 * extreme but regular cell such as diag(1e-170, 1e100, 1e80) Å passes it
 * and is refused by the search's image bound instead, naming its width)
 * and its message gives them. */
static double norm3(const double *a)
{
    return hypot(hypot(a[0], a[1]), a[2]);
}

/* Replace zero rows of non-periodic axes by unit vectors completing a basis.
 * Rows of periodic axes are left as they are. */
static void complete_cell(double m[9], const int per[3])
{
    int zero[3], nz = 0, k;
    for (k = 0; k < 3; k++) {
        zero[k] = !per[k] && m[3 * k] == 0.0 && m[3 * k + 1] == 0.0 && m[3 * k + 2] == 0.0;
        nz += zero[k];
    }
    if (nz == 0 || nz == 3)
        return;
    if (nz == 1) {
        for (k = 0; k < 3; k++)
            if (zero[k]) {
                double c[3], len;
                cross3(&m[3 * ((k + 1) % 3)], &m[3 * ((k + 2) % 3)], c);
                len = norm3(c);
                if (len > 0.0 && isfinite(len)) {
                    m[3 * k] = c[0] / len;
                    m[3 * k + 1] = c[1] / len;
                    m[3 * k + 2] = c[2] / len;
                }
            }
        return;
    }
    /* nz == 2: one non-zero row r; pick u orthogonal to r, then w = r × u. */
    {
        int kr = 0, k1 = -1, k2 = -1, j, jmin = 0;
        double r[3], u[3], w[3], e[3] = {0.0, 0.0, 0.0}, len;
        for (k = 0; k < 3; k++) {
            if (!zero[k])
                kr = k;
            else if (k1 < 0)
                k1 = k;
            else
                k2 = k;
        }
        len = norm3(&m[3 * kr]);
        if (!(len > 0.0) || !isfinite(len))
            return;
        for (j = 0; j < 3; j++)
            r[j] = m[3 * kr + j] / len;
        for (j = 1; j < 3; j++)
            if (fabs(r[j]) < fabs(r[jmin]))
                jmin = j;
        e[jmin] = 1.0;
        cross3(r, e, u);
        len = norm3(u);
        for (j = 0; j < 3; j++)
            u[j] /= len;
        cross3(r, u, w);
        for (j = 0; j < 3; j++) {
            m[3 * k1 + j] = u[j];
            m[3 * k2 + j] = w[j];
        }
    }
}

/* Inverse of a 3x3 row-major matrix with determinant det. */
static void inv3(const double m[9], double det, double inv[9])
{
    inv[0] = (m[4] * m[8] - m[5] * m[7]) / det;
    inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
    inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    inv[3] = (m[5] * m[6] - m[3] * m[8]) / det;
    inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
    inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    inv[6] = (m[3] * m[7] - m[4] * m[6]) / det;
    inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
    inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
}

int ecn_cell_periodic(const double *cell, const int pbc[3], int per[3])
{
    int any = 0;
    for (int k = 0; k < 3; k++) {
        per[k] = cell && (pbc ? pbc[k] != 0 : 1);
        any |= per[k];
    }
    return any;
}

/* The search frame of a cell with periodic axes per: the cell with its zero
 * non-periodic rows completed (complete_cell), checked to be finite and not
 * degenerate, and its inverse. */
ecenet_status ecn_cell_frame(const double *cell, const int per[3], double frame[9],
                             double inv[9], char *err, size_t err_len)
{
    double len[3], det;
    int k;
    for (k = 0; k < 9; k++)
        if (!isfinite(cell[k]))
            return ecn_fail(err, err_len, ECENET_ERR_INPUT, "cell entry [%d][%d] is not finite",
                            k / 3, k % 3);
    memcpy(frame, cell, 9 * sizeof *frame);
    complete_cell(frame, per);
    for (k = 0; k < 3; k++)
        len[k] = norm3(&frame[3 * k]);
    det = det3(frame);
    if (!(fabs(det) > 1e-10 * len[0] * len[1] * len[2]) || !isfinite(det) ||
        !(len[0] > 0.0 && len[1] > 0.0 && len[2] > 0.0))
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "the cell is singular or degenerate (det %g, lattice vector lengths %g, %g, %g Å)",
                        det, len[0], len[1], len[2]);
    inv3(frame, det, inv);
    for (k = 0; k < 9; k++)
        if (!isfinite(inv[k]))
            return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                            "the cell is singular or degenerate (its inverse is not finite)");
    return ECENET_OK;
}

/* |b_k|, the norm of column k of the inverse = 1 / perpendicular width k */
double ecn_cell_recip_norm(const double inv[9], int k)
{
    return hypot(hypot(inv[k], inv[3 + k]), inv[6 + k]); /* as norm3: no overflow */
}

/* ---- skewed cells ------------------------------------------------------------
 * A cell such as a = (10,0,0), b = (1e8,10,0) is a valid 10 Å cube written
 * with a skewed vector, but its perpendicular width along a is 1e-6 Å, so
 * the search would visit millions of images of it (minutes to hours). Such
 * a cell is searched in a reduced basis R = U·cell (U unimodular, mixing
 * periodic rows only: the same lattice), and each entry's image in R is
 * converted back, n = n_R·U, with its shift recomputed as n·cell and the
 * lists put back in the promised order: the same lists as the search in the
 * cell as given, bar entries within rounding (about 1e-16 of the skew's
 * |k|·|a|) of the cutoff. */

/* images the search visits around a bin, roughly: Π over periodic axes of
 * 2·ceil(r·|b_k|) + 1, b_k the reciprocal vectors (columns of the inverse) */
static double image_cost(const double inv[9], const int per[3], double r)
{
    double c = 1.0;
    for (int k = 0; k < 3; k++)
        if (per[k])
            c *= 2.0 * ceil(r * ecn_cell_recip_norm(inv, k)) + 1.0;
    return c;
}

/* rows i of R = Σ_j U[i][j]·m[j] (non-periodic rows: U is the identity there) */
void ecn_cell_apply_u(const int64_t U[9], const double m[9], double R[9])
{
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < 3; c++)
            R[3 * i + c] = (double)U[3 * i] * m[c] + (double)U[3 * i + 1] * m[3 + c] +
                           (double)U[3 * i + 2] * m[6 + c];
}

/* Pairwise (Lagrange–Gauss) reduction of the periodic rows of frame: a_i -=
 * k·a_j while that shortens a_i by more than rounding. Returns 1 and U,
 * frame = U·frame and its inverse when the reduced cell costs the search at
 * least 8 times fewer images (ordinary cells, even fairly oblique ones, are
 * searched as given), else 0 with frame untouched. */
int ecn_cell_reduce(double frame[9], double inv[9], const int per[3], double r,
                    int64_t U[9])
{
    double m[9], mi[9];
    int changed = 1, it;
    memcpy(m, frame, sizeof m);
    for (int k = 0; k < 9; k++)
        U[k] = k % 4 == 0;
    for (it = 0; changed && it < 200; it++) {
        changed = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double *a = &m[3 * i], *b = &m[3 * j], aa, bb, ab, q, t[3];
                if (i == j || !per[i] || !per[j])
                    continue;
                aa = a[0] * a[0] + a[1] * a[1] + a[2] * a[2];
                bb = b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
                ab = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
                q = nearbyint(ab / bb);
                if (q == 0.0)
                    continue;
                for (int c = 0; c < 3; c++) /* U stays small: n_R·U fits int64 */
                    if (!(fabs((double)U[3 * i + c] - q * (double)U[3 * j + c]) < 2147483648.0))
                        return 0;
                for (int c = 0; c < 3; c++)
                    t[c] = a[c] - q * b[c];
                if (!(t[0] * t[0] + t[1] * t[1] + t[2] * t[2] < aa * (1.0 - 1e-9)))
                    continue;
                memcpy(a, t, sizeof t);
                for (int c = 0; c < 3; c++)
                    U[3 * i + c] -= (int64_t)q * U[3 * j + c];
                changed = 1;
            }
    }
    ecn_cell_apply_u(U, frame, m); /* from the integers: no rounding accumulated over the steps */
    inv3(m, det3(m), mi);
    for (int k = 0; k < 9; k++)
        if (!isfinite(mi[k]))
            return 0;
    if (!(image_cost(inv, per, r) > 8.0 * image_cost(mi, per, r)))
        return 0;
    memcpy(frame, m, sizeof m);
    memcpy(inv, mi, sizeof mi);
    return 1;
}

/* A cell far denser than matter (a Lattice in nm or bohr taken for Å, a
 * nearly degenerate cell) would give every atom thousands of periodic
 * images within the cutoff: minutes of search and a workspace of tens of
 * GB before any result, which would be garbage. The mean number of atoms
 * and images within rmax of an atom is about n times the images of one
 * atom there (sphere volume over the cell volume; disc area over the cell
 * area, or diameter over the length, along two or one periodic axes), so
 * that count over the sphere's volume is the density an atom sees: refused
 * above ECN_MAX_DENSITY (diamond, the densest solid in atoms per volume,
 * has 0.18 atoms/Å^3; compressed hydrogen at 500 GPa under 1). */
#define ECN_MAX_DENSITY 5.0
ecenet_status ecn_cell_check_density(size_t n, const double frame[9], const int per[3],
                                      double rmax, char *err, size_t err_len)
{
    const double pi = 3.14159265358979323846, sphere = 4.0 / 3.0 * pi * rmax * rmax * rmax;
    int ax[3], np = 0, k;
    double images, c[3];
    for (k = 0; k < 3; k++)
        if (per[k])
            ax[np++] = k;
    if (np == 3)
        images = sphere / fabs(det3(frame));
    else if (np == 2) {
        cross3(&frame[3 * ax[0]], &frame[3 * ax[1]], c);
        images = pi * rmax * rmax / norm3(c);
    } else
        images = 2.0 * rmax / norm3(&frame[3 * ax[0]]);
    const double density = (double)n * images / sphere;
    if (!(density <= ECN_MAX_DENSITY))
        return ecn_fail(err, err_len, ECENET_ERR_INPUT,
                        "the cell is far denser than matter: with its periodic images an atom "
                        "would see %.3g atoms/Å^3 within the cutoff %g Å (about %.3g neighbours "
                        "each; refused above %g atoms/Å^3, diamond has 0.18): is the lattice in Å?",
                        density, rmax, density * sphere, ECN_MAX_DENSITY);
    return ECENET_OK;
}
