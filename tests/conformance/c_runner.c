/*
 * C runner of the Kiln conformance suite: every case of manifest.txt (the line format that
 * gen.py writes next to manifest.json; see FORMAT.md) through the C ABI (kiln.h, libkiln),
 * never through another language. Written by hand: the manifest reader, the comparison and the
 * calls of the ops whose C functions are hand-written; every plain op's call is c_ops_gen.h's.
 *
 *   c_runner MANIFEST.txt OUT.json
 *
 * Writes {"language": "c", "missing_ops": [...], "cases": [{id, op, status, sha256, message}]}.
 * Exposure: each op of the manifest must be an exported symbol kiln_<op> of the loaded
 * library (dlsym), custom kernels kiln_kernel_compile / kiln_kernel_dispatch.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

#define MAX_PARAMS 16
#define MAX_INPUTS 8
#define MAX_LIST 16

typedef struct {
    char key[32];
    char kind; /* i f b n s I */
    long long i;
    unsigned long long u;
    double f;
    char s[256];
    long long list[MAX_LIST];
    int nlist;
} Param;

typedef struct {
    char name[32];
    uint32_t dtype;
    size_t shape[8];
    size_t ndim;
    char file[256];
    KilnTensor *t;
} Input;

typedef struct {
    char id[128], op[64];
    Param params[MAX_PARAMS];
    int nparams;
    Input inputs[MAX_INPUTS];
    int ninputs;
    uint32_t out_dtype;
    size_t out_shape[8], out_ndim;
    char out_file[256];
    double atol, rtol;
} Case;

static char g_dir[1024];

/* ---------------------------------------------------------------------------------------- */
/* SHA-256 (FIPS 180-4) */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = ((uint32_t)p[4 * i] << 24) | ((uint32_t)p[4 * i + 1] << 16) | ((uint32_t)p[4 * i + 2] << 8) | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

static void sha256_hex(const unsigned char *data, size_t n, char out[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t full = n / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, data + i);
    unsigned char tail[128] = {0};
    size_t rem = n - full;
    if (rem) memcpy(tail, data + full, rem);
    tail[rem] = 0x80;
    size_t tl = rem + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tl == 128) sha256_block(h, tail + 64);
    for (int i = 0; i < 8; i++) sprintf(out + 8 * i, "%08x", h[i]);
    out[64] = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Helpers */

static uint32_t parse_dtype(const char *s) {
    if (!strcmp(s, "f32")) return KILN_F32;
    if (!strcmp(s, "f16")) return KILN_F16;
    if (!strcmp(s, "i32")) return KILN_I32;
    if (!strcmp(s, "u32")) return KILN_U32;
    if (!strcmp(s, "bool")) return KILN_BOOL;
    fprintf(stderr, "c_runner: unknown dtype %s\n", s);
    exit(2);
}

static size_t dtype_size(uint32_t d) { return d == KILN_F16 ? 2 : d == KILN_BOOL ? 1 : 4; }

static double half_to_double(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp((double)(m | 0x400), e - 25);
    return s ? -v : v;
}

static double elem(const unsigned char *p, uint32_t d, size_t i) {
    switch (d) {
    case KILN_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case KILN_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return half_to_double(h); }
    case KILN_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case KILN_BOOL: return p[i];
    default: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    }
}

static unsigned char *read_file(const char *rel, size_t *n) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "c_runner: cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(len + 1);
    if (len && fread(buf, 1, len, f) != (size_t)len) { fprintf(stderr, "c_runner: short read %s\n", path); exit(2); }
    buf[len] = 0;
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static const Param *param(const Case *c, const char *key) {
    for (int i = 0; i < c->nparams; i++)
        if (!strcmp(c->params[i].key, key)) return &c->params[i];
    return NULL;
}
static const Param *need(const Case *c, const char *key) {
    const Param *p = param(c, key);
    if (!p) { fprintf(stderr, "c_runner: case %s lacks parameter %s\n", c->id, key); exit(2); }
    return p;
}
static double pf(const Case *c, const char *k) { const Param *p = need(c, k); return p->kind == 'i' ? (double)p->i : p->f; }
static long long pi(const Case *c, const char *k) { return need(c, k)->i; }
static bool pb(const Case *c, const char *k) { return need(c, k)->i != 0; }

static KilnTensor *input(const Case *c, const char *name) {
    for (int i = 0; i < c->ninputs; i++)
        if (!strcmp(c->inputs[i].name, name)) return c->inputs[i].t;
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* One op through the C ABI */

typedef KilnStatus (*UnaryFn)(const KilnTensor *, KilnTensor **);
typedef KilnStatus (*BinaryFn)(const KilnTensor *, const KilnTensor *, KilnTensor **);

/* Element `output` of the n tensors `o` an op gave (the others freed); a status already set
 * stays, an `output` past n is KILN_ERR_INVALID_ARGUMENT. */
static KilnTensor *pick_output(const Case *c, KilnTensor **o, size_t n, KilnStatus *st) {
    size_t k = (size_t)pi(c, "output");
    KilnTensor *kept = NULL;
    for (size_t i = 0; i < n; i++) {
        if (i == k) kept = o[i];
        else if (o[i]) kiln_tensor_free(o[i]);
    }
    if (*st == KILN_OK && k >= n) *st = KILN_ERR_INVALID_ARGUMENT;
    return kept;
}

/* UNARY[] and BINARY[] (kiln-core's unary and binary tables) and run_plain (every op whose C
 * function is generated from its typed row of the op table), generated by `kiln-gen`. */
#include "c_ops_gen.h"

static int hexval(char ch) { return ch <= '9' ? ch - '0' : (ch | 32) - 'a' + 10; }

static KilnStatus run_op(const Case *c, KilnTensor **out, KilnTensor **borrowed) {
    const char *op = c->op;
    KilnTensor *x = c->ninputs ? c->inputs[0].t : NULL;
    *borrowed = NULL;
    for (size_t i = 0; i < sizeof UNARY / sizeof *UNARY; i++)
        if (!strcmp(op, UNARY[i].name)) return UNARY[i].f(x, out);
    for (size_t i = 0; i < sizeof BINARY / sizeof *BINARY; i++)
        if (!strcmp(op, BINARY[i].name)) {
            if (param(c, "scalar"))
                return kiln_binary_scalar(op, x, pf(c, "scalar"), pb(c, "scalar_first"), out);
            return BINARY[i].f(input(c, "a"), input(c, "b"), out);
        }
    {
        KilnStatus st;
        if (run_plain(c, out, &st)) return st;
    }
    /* Written by hand: the ops whose C functions are (ffi-c/src/ops.rs says why). */
    if (!strcmp(op, "clip"))
        return c->ninputs == 3 ? kiln_clip(x, input(c, "min"), input(c, "max"), out) : kiln_clip_scalar(x, pf(c, "min"), pf(c, "max"), out);
    if (!strcmp(op, "tensordot")) {
        const Param *p1 = need(c, "axes1"), *p2 = need(c, "axes2");
        ptrdiff_t a1[MAX_LIST], a2[MAX_LIST];
        for (int j = 0; j < p1->nlist; j++) a1[j] = (ptrdiff_t)p1->list[j];
        for (int j = 0; j < p2->nlist; j++) a2[j] = (ptrdiff_t)p2->list[j];
        return kiln_tensordot(input(c, "a"), input(c, "b"), (ptrdiff_t)pi(c, "n"), a1, a2, (size_t)p1->nlist, out);
    }
    if (!strcmp(op, "quant_from_bytes")) {
        size_t nb = 0, want = (size_t)pi(c, "nbytes");
        KilnStatus st = kiln_tensor_nbytes(x, &nb);
        if (st != KILN_OK) return st;
        unsigned char *buf = malloc(nb ? nb : 1);
        st = kiln_tensor_to_host(x, buf, nb);
        if (st == KILN_OK)
            st = kiln_quant_from_bytes(buf, want < nb ? want : nb, need(c, "format")->s, (size_t)pi(c, "rows"), (size_t)pi(c, "cols"), out);
        free(buf);
        return st;
    }
    if (!strcmp(op, "kernel")) {
        size_t n;
        char *src = (char *)read_file(need(c, "source")->s, &n);
        KilnKernel *k = NULL;
        KilnStatus st = kiln_kernel_compile(src, need(c, "entry")->s, &k);
        free(src);
        if (st != KILN_OK) return st;
        const KilnTensor *ts[MAX_INPUTS];
        for (int i = 0; i < c->ninputs; i++) ts[i] = c->inputs[i].t;
        const Param *u = need(c, "uniforms");
        unsigned char ub[128];
        size_t ulen = 0;
        if (u->kind == 's')
            for (ulen = 0; u->s[2 * ulen]; ulen++) ub[ulen] = (unsigned char)(hexval(u->s[2 * ulen]) * 16 + hexval(u->s[2 * ulen + 1]));
        const Param *wg = need(c, "workgroups");
        st = kiln_kernel_dispatch(k, ts, (size_t)c->ninputs, ulen ? ub : NULL, ulen, (uint32_t)wg->list[0], (uint32_t)wg->list[1],
                                  (uint32_t)wg->list[2]);
        kiln_kernel_free(k);
        *borrowed = c->inputs[pi(c, "output")].t;
        return st;
    }
    fprintf(stderr, "c_runner: no mapping for op %s\n", op);
    return KILN_ERR_INVALID_ARGUMENT;
}

/* ---------------------------------------------------------------------------------------- */
/* Output */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void run_case(Case *c, bool missing, FILE *out, bool first, int *npass) {
    char status[16] = "pass", digest[65] = "", msg[1024] = "";
    if (missing) {
        strcpy(status, "missing");
        snprintf(msg, sizeof msg, "op %s is not exported by libkiln (kiln_%s)", c->op, c->op);
        goto done;
    }
    for (int i = 0; i < c->ninputs; i++) {
        Input *in = &c->inputs[i];
        size_t n;
        unsigned char *data = read_file(in->file, &n);
        KilnStatus st = kiln_tensor_from_host(in->dtype, in->shape, in->ndim, n ? data : NULL, n, &in->t);
        free(data);
        if (st != KILN_OK) {
            strcpy(status, "error");
            kiln_last_error_message(msg, sizeof msg);
            goto done;
        }
    }
    KilnTensor *y = NULL, *borrowed = NULL;
    KilnStatus st = run_op(c, &y, &borrowed);
    if (st != KILN_OK) {
        strcpy(status, "error");
        char m[900];
        kiln_last_error_message(m, sizeof m);
        snprintf(msg, sizeof msg, "%s: %s", kiln_status_name(st), m);
        goto done;
    }
    KilnTensor *r = borrowed ? borrowed : y;
    size_t nb = 0, nd = 0, shp[8];
    uint32_t dt = 0;
    kiln_tensor_nbytes(r, &nb);
    kiln_tensor_ndim(r, &nd);
    kiln_tensor_shape(r, shp, 8);
    {
        KilnDType d;
        kiln_tensor_dtype(r, &d);
        dt = (uint32_t)d;
    }
    unsigned char *got = malloc(nb ? nb : 1);
    st = kiln_tensor_to_host(r, nb ? got : NULL, nb);
    if (y) kiln_tensor_free(y);
    if (st != KILN_OK) {
        strcpy(status, "error");
        kiln_last_error_message(msg, sizeof msg);
        free(got);
        goto done;
    }
    sha256_hex(got, nb, digest);
    bool same_shape = nd == c->out_ndim && dt == c->out_dtype;
    for (size_t i = 0; same_shape && i < nd; i++) same_shape = shp[i] == c->out_shape[i];
    if (!same_shape) {
        strcpy(status, "fail");
        snprintf(msg, sizeof msg, "output dtype %u rank %zu differs from the expected dtype %u rank %zu (or its shape)", dt, nd, c->out_dtype,
                 c->out_ndim);
        free(got);
        goto done;
    }
    size_t wn;
    unsigned char *want = read_file(c->out_file, &wn);
    size_t n = nb / dtype_size(dt), bad = 0;
    if (wn != nb) { strcpy(status, "fail"); snprintf(msg, sizeof msg, "%zu output bytes, expected %zu", nb, wn); }
    for (size_t i = 0; wn == nb && i < n; i++) {
        double g = elem(got, dt, i), w = elem(want, dt, i);
        bool ok = (g == 0 && w == 0) ? !signbit(g) == !signbit(w)  /* -0 and +0 differ */
                                     : (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= c->atol + c->rtol * fabs(w);
        if (!ok && bad++ == 0)
            snprintf(msg, sizeof msg, "element %zu: got %.9g, expected %.9g (atol %g rtol %g)", i, g, w, c->atol, c->rtol);
    }
    if (bad) {
        strcpy(status, "fail");
        char m[1024];
        snprintf(m, sizeof m, "%zu of %zu elements outside tolerance; first: %.900s", bad, n, msg);
        strcpy(msg, m);
    }
    free(want);
    free(got);
done:
    for (int i = 0; i < c->ninputs; i++)
        if (c->inputs[i].t) { kiln_tensor_free(c->inputs[i].t); c->inputs[i].t = NULL; }
    if (!strcmp(status, "pass")) (*npass)++;
    fprintf(out, "%s  {\"id\": ", first ? "" : ",\n");
    json_str(out, c->id);
    fprintf(out, ", \"op\": ");
    json_str(out, c->op);
    fprintf(out, ", \"status\": \"%s\", \"sha256\": \"%s\", \"message\": ", status, digest);
    json_str(out, msg);
    fprintf(out, "}");
}

/* ---------------------------------------------------------------------------------------- */

static bool exported(const char *op) {
    char sym[96];
    if (!strcmp(op, "kernel"))
        return dlsym(RTLD_DEFAULT, "kiln_kernel_compile") && dlsym(RTLD_DEFAULT, "kiln_kernel_dispatch");
    snprintf(sym, sizeof sym, "kiln_%s", op);
    return dlsym(RTLD_DEFAULT, sym) != NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: c_runner MANIFEST.txt OUT.json\n"); return 2; }
    strncpy(g_dir, argv[1], sizeof g_dir - 1);
    char *slash = strrchr(g_dir, '/');
    if (slash) *slash = 0; else strcpy(g_dir, ".");
    FILE *in = fopen(argv[1], "r");
    if (!in) { fprintf(stderr, "c_runner: cannot open %s\n", argv[1]); return 2; }
    static char ops[128][64];
    static bool missing[128];
    int nops = 0, total = 0, npass = 0;
    char line[8192];
    static Case c;
    FILE *cases = tmpfile();
    bool first = true;
    while (fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = 0;
        char *tok = strtok(line, " ");
        if (!tok) continue;
        if (!strcmp(tok, "ops")) {
            strtok(NULL, " ");
            for (char *t; (t = strtok(NULL, " ")) && nops < 128; nops++) {
                strncpy(ops[nops], t, 63);
                missing[nops] = !exported(t);
            }
        } else if (!strcmp(tok, "case")) {
            memset(&c, 0, sizeof c);
            strncpy(c.id, strtok(NULL, " "), sizeof c.id - 1);
            strncpy(c.op, strtok(NULL, " "), sizeof c.op - 1);
        } else if (!strcmp(tok, "p")) {
            Param *p = &c.params[c.nparams++];
            strncpy(p->key, strtok(NULL, " "), sizeof p->key - 1);
            p->kind = strtok(NULL, " ")[0];
            char *v = strtok(NULL, " ");
            switch (p->kind) {
            case 'i': case 'b': p->i = strtoll(v, NULL, 10); p->u = strtoull(v, NULL, 10); break;
            case 'f': p->f = strtod(v, NULL); break;
            case 's': strncpy(p->s, v, sizeof p->s - 1); break;
            case 'I':
                p->nlist = atoi(v);
                for (int j = 0; j < p->nlist; j++) p->list[j] = strtoll(strtok(NULL, " "), NULL, 10);
                break;
            default: break;
            }
        } else if (!strcmp(tok, "in")) {
            Input *x = &c.inputs[c.ninputs++];
            strncpy(x->name, strtok(NULL, " "), sizeof x->name - 1);
            x->dtype = parse_dtype(strtok(NULL, " "));
            x->ndim = (size_t)atoi(strtok(NULL, " "));
            for (size_t j = 0; j < x->ndim; j++) x->shape[j] = (size_t)strtoull(strtok(NULL, " "), NULL, 10);
            strncpy(x->file, strtok(NULL, " "), sizeof x->file - 1);
        } else if (!strcmp(tok, "out")) {
            c.out_dtype = parse_dtype(strtok(NULL, " "));
            c.out_ndim = (size_t)atoi(strtok(NULL, " "));
            for (size_t j = 0; j < c.out_ndim; j++) c.out_shape[j] = (size_t)strtoull(strtok(NULL, " "), NULL, 10);
            strncpy(c.out_file, strtok(NULL, " "), sizeof c.out_file - 1);
            c.atol = strtod(strtok(NULL, " "), NULL);
            c.rtol = strtod(strtok(NULL, " "), NULL);
        } else if (!strcmp(tok, "end")) {
            bool miss = false;
            for (int i = 0; i < nops; i++)
                if (!strcmp(ops[i], c.op)) miss = missing[i];
            run_case(&c, miss, cases, first, &npass);
            first = false;
            total++;
        }
    }
    fclose(in);
    FILE *out = fopen(argv[2], "w");
    if (!out) { fprintf(stderr, "c_runner: cannot write %s\n", argv[2]); return 2; }
    fprintf(out, "{\"language\": \"c\", \"binding\": \"libkiln (kiln.h)\", \"missing_ops\": [");
    bool f1 = true;
    for (int i = 0; i < nops; i++)
        if (missing[i]) { fprintf(out, "%s", f1 ? "" : ", "); json_str(out, ops[i]); f1 = false; }
    fprintf(out, "],\n \"cases\": [\n");
    rewind(cases);
    int ch;
    while ((ch = fgetc(cases)) != EOF) fputc(ch, out);
    fprintf(out, "\n ]}\n");
    fclose(cases);
    fclose(out);
    printf("conformance (c): %d/%d cases pass; results in %s\n", npass, total, argv[2]);
    return 0;
}
