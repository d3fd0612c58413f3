/* Real Clebsch-Gordan tensors, built once in float64 as ECENet does
 * (SPEC §7.2): complex CG from the Racah formula, then e3nn's real-basis change. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include "cg.h"
#include "ecenet/ops.h"

static double fact(int n)
{
    double f = 1.0;
    for (int k = 2; k <= n; k++)
        f *= k;
    return f;
}

/* Wigner 3j symbol (j1 j2 j3; m1 m2 m3), Racah formula. */
static double wigner3j(int j1, int j2, int j3, int m1, int m2, int m3)
{
    if (m1 + m2 + m3 != 0 || abs(m1) > j1 || abs(m2) > j2 || abs(m3) > j3)
        return 0.0;
    if (j3 < abs(j1 - j2) || j3 > j1 + j2)
        return 0.0;
    double tri = fact(j1 + j2 - j3) * fact(j1 - j2 + j3) * fact(-j1 + j2 + j3) / fact(j1 + j2 + j3 + 1);
    double pre = sqrt(tri * fact(j1 + m1) * fact(j1 - m1) * fact(j2 + m2) * fact(j2 - m2) *
                      fact(j3 + m3) * fact(j3 - m3));
    int kmin = 0, kmax = j1 + j2 - j3;
    if (j2 - j3 - m1 > kmin) kmin = j2 - j3 - m1;
    if (j1 - j3 + m2 > kmin) kmin = j1 - j3 + m2;
    if (j1 - m1 < kmax) kmax = j1 - m1;
    if (j2 + m2 < kmax) kmax = j2 + m2;
    double sum = 0.0;
    for (int k = kmin; k <= kmax; k++) {
        double den = fact(k) * fact(j1 + j2 - j3 - k) * fact(j1 - m1 - k) * fact(j2 + m2 - k) *
                     fact(j3 - j2 + m1 + k) * fact(j3 - j1 - m2 + k);
        sum += ((k & 1) ? -1.0 : 1.0) / den;
    }
    int ph = j1 - j2 - m3;
    return ((ph % 2 != 0) ? -1.0 : 1.0) * pre * sum;
}

/* e3nn's real<->complex basis matrix for degree l (SPEC §7.2 step 2), row-major. */
static void basis_q(int l, double complex *q)
{
    int n = 2 * l + 1;
    for (int k = 0; k < n * n; k++)
        q[k] = 0.0;
    const double h = 1.0 / sqrt(2.0);
    for (int m = -l; m < 0; m++) {
        q[(l + m) * n + (l - m)] = h;
        q[(l + m) * n + (l + m)] = -I * h;
    }
    q[l * n + l] = 1.0;
    for (int m = 1; m <= l; m++) {
        double sg = (m % 2) ? -1.0 : 1.0;
        q[(l + m) * n + (l + m)] = sg * h;
        q[(l + m) * n + (l - m)] = I * sg * h;
    }
    double complex ph = cpow(-I, l);
    for (int k = 0; k < n * n; k++)
        q[k] *= ph;
}

size_t ecn_cg_size(int L)
{
    return L < 2 ? 0 : (size_t)ecenet_cg_offset(L + 1);
}

void ecn_cg_build(int L, double *out)
{
    double complex q1[9], q2[25 * 25], q3[25 * 25];
    double cc[3 * 25 * 25];
    for (int l = 2; l <= L; l++) {
        int n2 = 2 * l - 1, n3 = 2 * l + 1;
        basis_q(1, q1);
        basis_q(l - 1, q2);
        basis_q(l, q3);
        /* complex CG <1 m1, l-1 m2 | l m3> */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < n2; b++)
                for (int c = 0; c < n3; c++) {
                    int m1 = a - 1, m2 = b - (l - 1), m3 = c - l;
                    double v = 0.0;
                    if (m3 == m1 + m2) {
                        int ph = 1 - (l - 1) + m3;
                        v = ((ph % 2 != 0) ? -1.0 : 1.0) * sqrt(2.0 * l + 1) *
                            wigner3j(1, l - 1, l, m1, m2, -m3);
                    }
                    cc[(a * n2 + b) * n3 + c] = v;
                }
        double *G = out + ecenet_cg_offset(l);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < n2; j++)
                for (int k = 0; k < n3; k++) {
                    double complex acc = 0.0;
                    for (int a = 0; a < 3; a++)
                        for (int b = 0; b < n2; b++)
                            for (int c = 0; c < n3; c++) {
                                double v = cc[(a * n2 + b) * n3 + c];
                                if (v != 0.0)
                                    acc += conj(q1[a * 3 + i]) * conj(q2[b * n2 + j]) *
                                           q3[c * n3 + k] * v;
                            }
                    G[(i * n2 + j) * n3 + k] = creal(acc);
                }
    }
}
