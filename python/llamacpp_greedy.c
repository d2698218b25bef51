// llamacpp_greedy runs llama.cpp's own forward pass greedily: for each line
// of stdin (a prompt as space-separated token ids) it prints the next n
// argmax token ids, one context per prompt, the given ids never chosen (the
// end tokens, suppressed as transformers' min_new_tokens does). Fed token
// ids, it compares llama.cpp's model code with rlvr's without involving
// either tokenizer. Built by scripts/llamacpp.sh against its libllama.
//
// Usage: llamacpp_greedy MODEL.gguf N [SUPPRESSED_ID...] < prompts.txt
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf N [SUPPRESSED_ID...] < prompts.txt\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[2]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llamacpp_greedy: cannot load %s\n", argv[1]);
        return 1;
    }
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    static char line[1 << 20];
    llama_token toks[8192];
    while (fgets(line, sizeof line, stdin)) {
        int len = 0;
        for (char *p = strtok(line, " \n"); p && len < 8192; p = strtok(NULL, " \n")) toks[len++] = atoi(p);
        if (len == 0) continue;
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = len + n + 16;
        cp.n_batch = cp.n_ctx;
        cp.n_ubatch = cp.n_ctx;
        cp.no_perf = true;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            fprintf(stderr, "llamacpp_greedy: cannot make a context\n");
            return 1;
        }
        struct llama_batch batch = llama_batch_get_one(toks, len);
        for (int step = 0; step < n; step++) {
            if (llama_decode(ctx, batch) != 0) {
                fprintf(stderr, "llamacpp_greedy: decode failed\n");
                return 1;
            }
            float *z = llama_get_logits_ith(ctx, -1);
            for (int a = 3; a < argc; a++) z[atoi(argv[a])] = -INFINITY;
            int best = 0;
            for (int j = 1; j < V; j++)
                if (z[j] > z[best]) best = j;
            printf(step ? " %d" : "%d", best);
            toks[len] = best;
            batch = llama_batch_get_one(&toks[len], 1);
            len++;
        }
        printf("\n");
        fflush(stdout);
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}
