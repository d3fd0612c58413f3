/* Upload a model's parameters to a backend (converted to its precision). */
#include "engine.h"
#include "backend.h"
#include "cg.h"
#include "error.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const ecenet_backend *ecn_engine_backend(const ecn_engine *eng) { return eng->be; }

void ecn_engine_set_fused(ecn_engine *eng, int on) { eng->no_fused = !on; }

int ecn_engine_set_tf32(ecn_engine *eng, int on)
{
    if (!eng->be->set_tf32)
        return -1;
    eng->tf32 = on < 0 ? eng->be->set_tf32(-1) : !!on;
    return 0;
}

void ecn_engine_set_low_memory(ecn_engine *eng, int on, int64_t chunk_edges)
{
    eng->low_memory = !!on;
    eng->chunk_edges = chunk_edges > 0 ? chunk_edges : 0;
}
size_t ecn_engine_param_bytes(const ecn_engine *eng) { return eng->param_bytes; }
size_t ecn_engine_workspace_bytes(const ecn_engine *eng) { return eng->ws_bytes; }

/* n reals of backend memory owned by the engine (freed with it); NULL when
 * out of memory */
static void *own_opt(ecn_engine *eng, size_t n)
{
    void *p = eng->n_owned < ECN_MAX_OWNED ? eng->be->alloc(n * eng->be->real_size) : NULL;
    if (!p)
        return NULL;
    eng->owned[eng->n_owned++] = p;
    eng->param_bytes += n * eng->be->real_size;
    return p;
}

/* the same for memory the engine needs: NULL marks it failed */
static void *own(ecn_engine *eng, size_t n)
{
    void *p = own_opt(eng, n);
    if (!p)
        eng->failed = 1;
    return p;
}

static const void *up(ecn_engine *eng, const void *src_, size_t n)
{
    const double *src = src_;
    if (!src)
        return NULL;
    void *p = own(eng, n);
    if (p)
        eng->be->upload(p, src, n);
    return p;
}

/* the backend's split of n uploaded weights (ops.h linear_split); NULL
 * where there is no memory for it (not a failure: see ecn_engine_split) */
static const void *split(ecn_engine *eng, const void *w, size_t n)
{
    void *p = w ? own_opt(eng, 2 * n) : NULL;
    if (p)
        eng->be->linear_split(n, w, p);
    return p;
}

static void split_linear(ecn_engine *eng, ecenet_linear_params *d)
{
    const size_t n = (size_t)d->Q * d->fout * d->fin;
    if (!d->w || d->w_split)
        return;
    d->w_split = split(eng, d->w, n);
    d->w_t_split = d->w_split ? split(eng, d->w_t, n) : NULL;
}

void ecn_engine_split(ecn_engine *eng)
{
    if (!eng->be->linear_split || eng->split_done)
        return;
    eng->split_done = 1;
    if (eng->be->linear_split(0, NULL, NULL)) /* its GEMMs would not read them */
        return;
    const ecn_config *c = &eng->model->cfg;
    const int nl = c->n_mp * c->n_layers, nmp = c->n_mp - 1;
    for (int k = 0; k < nl; k++) {
        split_linear(eng, &eng->lin[k]);
        split_linear(eng, &eng->lin_up[k]);
    }
    for (int g = 0; g < nmp; g++) {
        split_linear(eng, &eng->amp[g].down);
        split_linear(eng, &eng->amp[g].up);
        split_linear(eng, &eng->amp[g].rdown);
        split_linear(eng, &eng->amp[g].rup);
    }
}

static ecenet_linear_params up_linear(ecn_engine *eng, const ecenet_linear_params *l)
{
    ecenet_linear_params d = *l;
    const size_t n = (size_t)l->Q * l->fout * l->fin;
    d.w = up(eng, l->w, n);
    d.bias = up(eng, l->bias, (size_t)l->fout);
    d.w_src = up(eng, l->w_src, (size_t)l->T * n);
    d.w_tgt = up(eng, l->w_tgt, (size_t)l->T * n);
    d.w_t = NULL;
    if (eng->be->linear_w_t && l->w) {
        double *t = malloc(n * sizeof *t);
        if (!t) {
            eng->failed = 1;
            return d;
        }
        ecn_linear_transpose(l->Q, l->fout, l->fin, l->w, t);
        d.w_t = up(eng, t, n);
        free(t);
    }
    d.w_split = d.w_t_split = NULL; /* ecn_engine_split */
    return d;
}

static ecenet_realspace_params up_rs(ecn_engine *eng, const ecenet_realspace_params *r)
{
    ecenet_realspace_params s = *r;
    const size_t qg = (size_t)r->Q * r->G, tf = (size_t)r->T * r->F;
    ecn_rs_table_flags(&s); /* from the host tables, before they are replaced */
    s.cos_synth = up(eng, r->cos_synth, qg);
    s.sin_synth = up(eng, r->sin_synth, qg);
    s.cos_analysis = up(eng, r->cos_analysis, qg);
    s.sin_analysis = up(eng, r->sin_analysis, qg);
    s.scale = up(eng, r->scale, (size_t)r->F);
    s.shift = up(eng, r->shift, (size_t)r->F);
    s.scale_src = up(eng, r->scale_src, tf);
    s.scale_tgt = up(eng, r->scale_tgt, tf);
    s.shift_src = up(eng, r->shift_src, tf);
    s.shift_tgt = up(eng, r->shift_tgt, tf);
    return s;
}

static ecenet_mlp_params up_mlp(ecn_engine *eng, const ecenet_mlp_params *m)
{
    ecenet_mlp_params d = *m;
    for (int k = 0; k < m->n_layers; k++) {
        const size_t n = (size_t)m->dims[k + 1] * m->dims[k];
        d.w[k] = up(eng, m->w[k], n);
        d.b[k] = up(eng, m->b[k], (size_t)m->dims[k + 1]);
        d.w_src[k] = up(eng, m->w_src[k], (size_t)m->T * n);
        d.w_tgt[k] = up(eng, m->w_tgt[k], (size_t)m->T * n);
    }
    return d;
}

void ecn_engine_free(ecn_engine *eng)
{
    if (!eng)
        return;
    for (int k = 0; k < eng->n_owned; k++)
        eng->be->release(eng->owned[k]);
    if (eng->ws)
        eng->be->release(eng->ws);
    free(eng->host_in);
    free(eng->lin);
    free(eng->lin_up);
    free(eng->rs);
    free((void *)eng->W_msg);
    free(eng->amp);
    free(eng);
}

ecenet_status ecn_engine_create(const ecenet_model *m, const ecenet_backend *be, ecn_engine **out,
                                char *err, size_t err_len)
{
    const ecn_config *c = &m->cfg;
    const int T = c->n_types, nl = c->n_mp * c->n_layers, nmp = c->n_mp - 1;
    *out = NULL;
    ecn_engine *eng = calloc(1, sizeof *eng);
    if (!eng)
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory creating the engine");
    eng->be = be;
    eng->model = m;
    eng->tf32 = be->set_tf32 ? be->set_tf32(-1) : -1; /* the process default (ECENET_TF32) */
    /* step.c, stage_fwd; 0: all edges at once. Digits only: anything else
     * is an error, not a silent 0 or a prefix ("8k" would be 8). */
    const char *sc = getenv("ECENET_STAGE_CHUNK");
    eng->stage_chunk = be->stage_chunk;
    if (sc && *sc) {
        char *end;
        errno = 0;
        const long long v = strtoll(sc, &end, 10);
        if (!isdigit((unsigned char)sc[0]) || *end || errno) {
            free(eng);
            return ecn_fail(err, err_len, ECENET_ERR_ARGUMENT,
                            "ECENET_STAGE_CHUNK='%s': not a whole number of edges >= 0 "
                            "(0: all edges at once)",
                            sc);
        }
        eng->stage_chunk = v;
    }
    eng->lin = calloc((size_t)nl, sizeof *eng->lin);
    eng->lin_up = calloc((size_t)nl, sizeof *eng->lin_up);
    eng->rs = calloc((size_t)nl, sizeof *eng->rs);
    eng->W_msg = calloc((size_t)(nmp > 0 ? nmp : 1), sizeof *eng->W_msg);
    eng->amp = calloc((size_t)(nmp > 0 ? nmp : 1), sizeof *eng->amp);
    double *cg = calloc(ecn_cg_size(c->l_max) + 1, sizeof *cg);
    if (!eng->lin || !eng->lin_up || !eng->rs || !eng->W_msg || !eng->amp || !cg) {
        free(cg);
        ecn_engine_free(eng);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM, "out of memory creating the engine");
    }
    ecn_cg_build(c->l_max, cg);
    eng->cg = up(eng, cg, ecn_cg_size(c->l_max) + 1);
    free(cg);
    eng->W = up(eng, m->W, (size_t)T * T * c->n_max * c->embed_dim);
    eng->V_dist = up(eng, m->V_dist, (size_t)c->n_dist_embed * c->F);
    for (int k = 0; k < nl; k++) {
        eng->lin[k] = up_linear(eng, &m->lin[k]);
        /* the first layer reads the edge frame's output, half of whose
         * columns are structural zeros (ecenet_linear_params.frame_nl) */
        if (k == 0 && !c->n_dist_embed && !c->element_film && c->m_max <= c->l_max &&
            m->lin[0].fin == c->F && c->F % (c->l_max + 1) == 0)
            eng->lin[0].frame_nl = c->l_max + 1;
        if (m->lin_up)
            eng->lin_up[k] = up_linear(eng, &m->lin_up[k]);
        if (c->use_nonlinearity)
            eng->rs[k] = up_rs(eng, &m->rs[k]);
    }
    for (int g = 0; g < nmp; g++) {
        if (c->mp_type == ECN_MP_EDGE) {
            eng->W_msg[g] = up(eng, m->W_msg[g], (size_t)T * T * c->n_dist_basis * c->B);
            continue;
        }
        const ecn_attn_mp *a = &m->amp[g];
        ecn_attn_mp *d = &eng->amp[g];
        d->down = up_linear(eng, &a->down);
        d->nonlin = up_rs(eng, &a->nonlin);
        d->up = up_linear(eng, &a->up);
        d->score = up_mlp(eng, &a->score);
        d->rdown = up_linear(eng, &a->rdown);
        d->rnonlin = up_rs(eng, &a->rnonlin);
        d->rup = up_linear(eng, &a->rup);
    }
    if (c->element_film) {
        eng->film_a = up(eng, m->film.a, (size_t)T * c->film_embed_dim);
        eng->film_b = up(eng, m->film.b, (size_t)T * c->film_embed_dim);
        eng->film_mlp = up_mlp(eng, &m->film.mlp);
    }
    eng->mlp = up_mlp(eng, &m->mlp);
    if (eng->failed) {
        ecn_engine_free(eng);
        return ecn_fail(err, err_len, ECENET_ERR_NOMEM,
                        "backend '%s': out of memory uploading the model parameters", be->name);
    }
    *out = eng;
    return ECENET_OK;
}
