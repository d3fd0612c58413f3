/* Real Clebsch-Gordan tensors Γ_l for 1 ⊗ (l-1) -> l (SPEC §7.2). */
#ifndef ECN_CG_H
#define ECN_CG_H

#include <stddef.h>

/* Number of doubles in the packed table for l = 2..L (layout: ecenet_cg_offset). */
size_t ecn_cg_size(int L);
/* Fill out[ecn_cg_size(L)]; L <= 12. */
void ecn_cg_build(int L, double *out);

#endif
