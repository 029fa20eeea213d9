/* Generate and chat: the prompt (chat-templated unless generate.chat = false)
 * is prefilled, then tokens are sampled and decoded one at a time, streaming
 * text to stdout as each completes a UTF-8 character, until an end-of-sequence
 * token, max_tokens or the end of the context. One stats line goes to stderr.
 *
 * Interactive mode (-i) keeps the conversation: each turn renders the whole
 * history through the template, and only the tokens after the longest prefix
 * already in the KV cache are prefilled. When a turn would not fit, the oldest
 * turns are dropped (and the user is told). */
#include "cli.h"
#include "engine.h"
#include "generate.h"
#include "images.h"

#include "orin/chat_template.h"
#include "orin/error.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Ctrl-C ------------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void install_sigint(void)
{
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocked read returns EINTR */
}

/* ---- conversation ------------------------------------------------------------ */

/* A user turn's images, in front of its text (as Qwen3-VL's examples put them). */
typedef struct turn_images {
    run_image *images;
    int n;
    orin_chat_part *parts;   /* the images, then the text; NULL without images */
} turn_images;

typedef struct conversation {
    orin_chat_message *msgs;
    char **owned;          /* strings we allocated, parallel to msgs */
    turn_images *media;    /* parallel to msgs */
    size_t n, cap;
} conversation;

static int conversation_grow(conversation *c)
{
    if (c->n < c->cap)
        return 0;
    size_t cap = c->cap ? c->cap * 2 : 8;
    orin_chat_message *m = realloc(c->msgs, cap * sizeof *m);
    if (m)
        c->msgs = m;
    char **o = m ? realloc(c->owned, cap * sizeof *o) : NULL;
    if (o)
        c->owned = o;
    turn_images *t = o ? realloc(c->media, cap * sizeof *t) : NULL;
    if (!t)
        return orin_error_set("out of memory");
    c->media = t;
    c->cap = cap;
    return 0;
}

static void turn_images_free(turn_images *t)
{
    for (int i = 0; i < t->n; i++)
        run_image_free(&t->images[i]);
    free(t->images);
    free(t->parts);
    *t = (turn_images){0};
}

/* Adds a message; a user message takes the n_images images (which the
 * conversation then owns, also on failure). */
static int conversation_add_images(conversation *c, const char *role, const char *content,
                                   run_image *images, int n_images)
{
    turn_images t = {.images = images, .n = n_images};
    char *copy = strdup(content);
    if (n_images > 0 && copy)
        t.parts = malloc(((size_t)n_images + 1) * sizeof *t.parts);
    if (!copy || (n_images > 0 && !t.parts) || conversation_grow(c) != 0) {
        free(copy);
        turn_images_free(&t);
        return orin_error_set("out of memory");
    }
    for (int i = 0; i < n_images; i++)
        t.parts[i] = (orin_chat_part){.type = ORIN_CHAT_PART_IMAGE};
    if (t.parts)
        t.parts[n_images] = (orin_chat_part){.type = ORIN_CHAT_PART_TEXT, .text = copy};
    c->owned[c->n] = copy;
    c->media[c->n] = t;
    c->msgs[c->n++] = (orin_chat_message){.role = role, .content = t.parts ? NULL : copy,
                                          .parts = t.parts, .n_parts = t.parts ? n_images + 1 : 0};
    return 0;
}

static int conversation_add(conversation *c, const char *role, const char *content)
{
    return conversation_add_images(c, role, content, NULL, 0);
}

/* Drops messages [from, from + count). */
static void conversation_drop(conversation *c, size_t from, size_t count)
{
    if (!count)
        return; /* msgs and owned may still be NULL: memmove must not see them */
    for (size_t i = from; i < from + count; i++) {
        free(c->owned[i]);
        turn_images_free(&c->media[i]);
    }
    size_t tail = c->n - from - count;
    memmove(c->msgs + from, c->msgs + from + count, tail * sizeof *c->msgs);
    memmove(c->owned + from, c->owned + from + count, tail * sizeof *c->owned);
    memmove(c->media + from, c->media + from + count, tail * sizeof *c->media);
    c->n -= count;
}

static void conversation_free(conversation *c)
{
    conversation_drop(c, 0, c->n);
    free(c->msgs);
    free(c->owned);
    free(c->media);
    *c = (conversation){0};
}

/* The conversation's images in the order the template renders them, for
 * generator_reply. The arrays are malloc'd; pi->n may be 0. */
static int conversation_images(const conversation *c, prompt_images *pi)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += (size_t)c->media[i].n;
    orin_model_image *images = malloc((n ? n : 1) * sizeof *images);
    int32_t *serials = malloc((n ? n : 1) * sizeof *serials);
    if (!images || !serials) {
        free(images);
        free(serials);
        return orin_error_set("out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        for (int j = 0; j < c->media[i].n; j++, k++) {
            const orin_image_patches *p = &c->media[i].images[j].patches;
            images[k] = (orin_model_image){
                .pixel_values = p->pixel_values, .rows = p->n_patches, .cols = p->patch_dim,
                .grid = {.t = p->grid_t, .h = p->grid_h, .w = p->grid_w}};
            serials[k] = c->media[i].images[j].serial;
        }
    }
    *pi = (prompt_images){.images = images, .serials = serials, .n = (int)n};
    return 0;
}

/* The prompt text for the conversation: the rendered template, or with
 * generate.chat = false the last user message as it is. */
static int render_prompt(generator *g, const conversation *c, char **out)
{
    if (!g->chat) {
        *out = strdup(c->msgs[c->n - 1].content);
        return *out ? 0 : orin_error_set("out of memory");
    }
    orin_chat_options opt = ORIN_CHAT_OPTIONS_DEFAULT;
    return orin_chat_template_render(g->tpl, c->msgs, c->n, &opt, out);
}

/* Renders and encodes; with too many tokens for the context (leaving room for
 * at least one reply token), drops the oldest turns after the system prompt. */
static int prepare_turn(generator *g, conversation *c, size_t first_turn, int32_t **ids,
                        size_t *n_ids)
{
    for (;;) {
        char *text = NULL;
        if (render_prompt(g, c, &text) != 0)
            return -1;
        if (g->verbose_prompt)
            fprintf(stderr, "%s", text);
        int rc = orin_tokenizer_encode(g->tok, text, strlen(text), ids, n_ids);
        free(text);
        if (rc != 0)
            return -1;
        if (g->verbose_prompt)
            fprintf(stderr, "\n[prompt: %zu tokens]\n", *n_ids);
        if ((int64_t)*n_ids < g->context)
            return 0;
        free(*ids);
        *ids = NULL;
        /* Keep the newest user message; drop the oldest exchange before it. */
        if (c->n - first_turn <= 1)
            return orin_error_set("the prompt has %zu tokens; the context holds %d "
                                  "(runtime.max_context)",
                                  *n_ids, g->context);
        size_t drop = c->n - first_turn >= 3 ? 2 : 1;
        fprintf(stderr, "[context full: dropping the oldest %s]\n",
                drop == 2 ? "exchange" : "message");
        conversation_drop(c, first_turn, drop);
    }
}

/* ---- modes --------------------------------------------------------------------- */

/* Answers the conversation's last user message: the reply streams (or prints
 * at the end), the stats line follows, and the reply joins the history. */
static int take_turn(generator *g, conversation *c, size_t first_turn, bool json)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    reply r = {0};
    prompt_images pi = {0};
    int rc = prepare_turn(g, c, first_turn, &ids, &n_ids);
    if (rc == 0) /* after prepare_turn: it may drop old turns and their images */
        rc = conversation_images(c, &pi);
    if (rc == 0)
        rc = generator_reply(g, ids, n_ids, &pi, &interrupted, &r);
    if (rc == 0) {
        const turn_images *last = &c->media[c->n - 1];
        r.images = last->n;
        for (int i = 0; i < last->n; i++)
            r.prep_s += last->images[i].load_s;
        if (g->stream)
            fputc('\n', stdout);
        else
            printf("%s\n", r.text);
        fflush(stdout);
        generator_print_stats(g, &r, json);
        rc = conversation_add(c, "assistant", r.text);
    }
    free((void *)pi.images);
    free((void *)pi.serials);
    reply_free(&r);
    free(ids);
    return rc;
}

/* The images given by --image (all of them), else by generate.image. */
static int image_paths(const orin_cli *cli, char *list, const char **paths, int cap)
{
    if (cli->n_images > 0) {
        for (int i = 0; i < cli->n_images && i < cap; i++)
            paths[i] = cli->images[i];
        return cli->n_images > cap ? orin_error_set("more than %d images", cap) : cli->n_images;
    }
    snprintf(list, ORIN_CONFIG_MAX_STR, "%s", cli->cfg.generate.image);
    return image_split_list(list, paths, cap);
}

/* Loads the images of the first user turn, before the model (a bad file
 * fails at once). Returns an exit code; *images is malloc'd when *n > 0. */
static int load_start_images(const orin_cli *cli, image_loader *l, run_image **images, int *n)
{
    static char list[ORIN_CONFIG_MAX_STR];
    const char *paths[ORIN_MODEL_MAX_IMAGES];
    *images = NULL;
    *n = 0;
    image_loader_init(l, cli->cfg.model.path, cli->cfg.generate.max_pixels);
    int count = image_paths(cli, list, paths, ORIN_MODEL_MAX_IMAGES);
    if (count < 0)
        return ORIN_EXIT_USAGE;
    if (count > 0 && !cli->cfg.generate.chat)
        return orin_error_set("images need the chat template (generate.chat = true): it "
                              "places them in the prompt"), ORIN_EXIT_USAGE;
    if (count == 0)
        return ORIN_EXIT_OK;
    *images = calloc((size_t)count, sizeof **images);
    if (!*images)
        return orin_error_set("out of memory"), ORIN_EXIT_RUNTIME;
    for (; *n < count; (*n)++) {
        int code = image_loader_load(l, paths[*n], &(*images)[*n]);
        if (code != ORIN_EXIT_OK)
            return code;
    }
    return ORIN_EXIT_OK;
}

static void free_images(run_image *images, int n)
{
    for (int i = 0; i < n; i++)
        run_image_free(&images[i]);
    free(images);
}

/* The prompt, with the images (which it takes over). */
static int one_shot(generator *g, const orin_cli *cli, run_image *images, int n_images)
{
    conversation c = {0};
    int rc = 0;
    if (g->chat && cli->cfg.generate.system[0])
        rc = conversation_add(&c, "system", cli->cfg.generate.system);
    if (rc == 0)
        rc = conversation_add_images(&c, "user", cli->cfg.generate.prompt, images, n_images);
    else
        free_images(images, n_images);
    if (rc == 0)
        rc = take_turn(g, &c, c.n - 1, cli->json);
    conversation_free(&c);
    if (rc != 0)
        return -1;
    return interrupted ? 1 : 0;
}

/* User turns from stdin, one a line. Not stdio: a Ctrl-C must interrupt the
 * wait for input without a race (see read_line), which needs the fd itself. */
typedef struct line_reader {
    char *buf;
    size_t len, cap;
    bool eof;
} line_reader;

/* A complete line from the buffer (without its newline), or NULL. */
static char *take_line(line_reader *lr)
{
    char *nl = lr->len ? memchr(lr->buf, '\n', lr->len) : NULL; /* buf is NULL at first */
    if (!nl && !(lr->eof && lr->len))
        return NULL;
    size_t n = nl ? (size_t)(nl - lr->buf) : lr->len;
    size_t used = nl ? n + 1 : n;
    char *line = malloc(n + 1);
    if (!line)
        return NULL;
    memcpy(line, lr->buf, n);
    line[n] = '\0';
    while (n > 0 && line[n - 1] == '\r')
        line[--n] = '\0';
    memmove(lr->buf, lr->buf + used, lr->len - used);
    lr->len -= used;
    return line;
}

/* Waits for input with SIGINT blocked except inside ppoll, so that a Ctrl-C
 * arriving just before the wait is seen too. 1 = data or EOF ready, 0 =
 * interrupted, -1 = error. */
static int wait_for_input(void)
{
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &orig);
    int rc = 1;
    if (interrupted) {
        rc = 0;
    } else {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (ppoll(&p, 1, NULL, &orig) < 0)
            rc = errno == EINTR ? 0 : -1;
    }
    sigprocmask(SIG_SETMASK, &orig, NULL);
    return rc;
}

/* The next line of input (malloc'd, without its newline). NULL at the end of
 * input, on an error, or when Ctrl-C interrupted the wait (then `interrupted`
 * is set). */
static char *read_line(line_reader *lr)
{
    for (;;) {
        char *line = take_line(lr);
        if (line || lr->eof)
            return line;
        if (wait_for_input() <= 0)
            return NULL;
        if (lr->cap - lr->len < 4096) {
            size_t cap = lr->cap ? lr->cap * 2 : 8192;
            char *buf = realloc(lr->buf, cap);
            if (!buf)
                return NULL;
            lr->buf = buf;
            lr->cap = cap;
        }
        ssize_t got = read(STDIN_FILENO, lr->buf + lr->len, lr->cap - lr->len);
        if (got < 0 && errno != EINTR)
            return NULL;
        if (got == 0)
            lr->eof = true;
        if (got > 0)
            lr->len += (size_t)got;
    }
}

/* The images waiting for the next user turn (/image FILE). */
typedef struct pending_images {
    run_image *images;
    int n, cap;
} pending_images;

/* /image FILE: loads the file for the next user turn; a bad file or a text
 * model is said on one line and the chat goes on. */
static void add_pending_image(image_loader *l, pending_images *p, const char *path)
{
    while (*path == ' ' || *path == '\t')
        path++;
    if (!*path) {
        fprintf(stderr, "[/image needs a file name]\n");
        return;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4;
        run_image *grown = realloc(p->images, (size_t)cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "[/image: out of memory]\n");
            return;
        }
        p->images = grown;
        p->cap = cap;
    }
    if (image_loader_load(l, path, &p->images[p->n]) != ORIN_EXIT_OK) {
        fprintf(stderr, "[/image: %s]\n", orin_error());
        return;
    }
    p->n++;
    fprintf(stderr, "[image %d for the next turn: %s]\n", p->n, path);
}

/* Hands the pending images to a user turn. */
static int add_user_turn(conversation *c, pending_images *p, const char *text)
{
    int rc = conversation_add_images(c, "user", text, p->images, p->n);
    *p = (pending_images){0};
    return rc;
}

static int interactive(generator *g, const orin_cli *cli, image_loader *loader,
                       run_image *images, int n_images)
{
    pending_images pending = {.images = images, .n = n_images, .cap = n_images};
    conversation c = {0};
    line_reader input = {0};
    bool tty = isatty(STDIN_FILENO);
    int rc = 0;
    size_t first_turn = 0;
    if (cli->cfg.generate.system[0]) {
        rc = conversation_add(&c, "system", cli->cfg.generate.system);
        first_turn = 1;
    }
    if (tty)
        fprintf(stderr, "[interactive chat: /reset clears the history, /image FILE adds an "
                        "image to the next turn, /exit or Ctrl-D quits, Ctrl-C stops a reply]\n");
    while (rc == 0) {
        interrupted = 0;
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        char *line = read_line(&input);
        if (!line) {
            if (interrupted && tty) { /* Ctrl-C at the prompt: a fresh prompt */
                fputc('\n', stdout);
                continue;
            }
            break;
        }
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0) {
            free(line);
            break;
        }
        if (strncmp(line, "/image", 6) == 0 && (line[6] == ' ' || !line[6])) {
            add_pending_image(loader, &pending, line + 6);
            free(line);
            continue;
        }
        if (strcmp(line, "/reset") == 0) {
            free_images(pending.images, pending.n);
            pending = (pending_images){0};
            conversation_drop(&c, first_turn, c.n - first_turn);
            generator_forget(g);
            fprintf(stderr, "[history cleared]\n");
            free(line);
            continue;
        }
        if (!line[0]) {
            free(line);
            continue;
        }
        rc = add_user_turn(&c, &pending, line);
        free(line);
        if (rc == 0)
            rc = take_turn(g, &c, first_turn, cli->json);
    }
    free(input.buf);
    free_images(pending.images, pending.n);
    conversation_free(&c);
    return rc;
}

int mode_generate(const orin_cli *cli)
{
    orin_engine e = {0};
    generator g = {0};
    static image_loader loader; /* holds a path: off the stack */
    run_image *images;
    int n_images;
    int code = load_start_images(cli, &loader, &images, &n_images);
    if (code != ORIN_EXIT_OK) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        free_images(images, n_images);
        return code;
    }
    code = engine_open_model(&e, cli);
    if (code != ORIN_EXIT_OK) {
        free_images(images, n_images);
        return code;
    }
    orin_profile *profile = NULL, *vision_profile = NULL, *prefill_profile = NULL;
    if (generator_init(&g, &e, cli) != 0 ||
        (cli->profile && (!(profile = orin_profile_create(e.device)) ||
                          !(vision_profile = orin_profile_create(e.device)) ||
                          !(prefill_profile = orin_profile_create(e.device))))) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        orin_profile_free(profile);
        orin_profile_free(vision_profile);
        free_images(images, n_images);
        generator_free(&g);
        engine_close(&e);
        return ORIN_EXIT_LOAD;
    }
    if (profile) { /* the decode steps run op by op: the stats line shows that speed */
        orin_model_set_profile(e.model, profile);
        orin_model_set_vision_profile(e.model, vision_profile);
        orin_model_set_prefill_profile(e.model, prefill_profile);
    }
    install_sigint();
    int rc = cli->cfg.generate.interactive ? interactive(&g, cli, &loader, images, n_images)
                                           : one_shot(&g, cli, images, n_images);
    if (rc >= 0 && cli_flush_stdout() != 0)
        rc = -1; /* the text generated did not all arrive */
    if (rc < 0) {
        fflush(stdout);
        fprintf(stderr, "orin-run: %s\n", orin_error());
        code = ORIN_EXIT_RUNTIME;
    } else {
        code = rc == 1 ? ORIN_EXIT_INTERRUPTED : ORIN_EXIT_OK;
    }
    if (profile) {
        orin_model_set_profile(e.model, NULL);
        orin_model_set_vision_profile(e.model, NULL);
        orin_model_set_prefill_profile(e.model, NULL);
        fflush(stdout);
        orin_profile_print(profile, stderr, engine_bandwidth(e.device));
        fprintf(stderr, "prefill (a run is one chunk):\n");
        orin_profile_print(prefill_profile, stderr, 0);
        if (orin_profile_runs(vision_profile) > 0) {
            fprintf(stderr, "vision encoder (a run is one call of it):\n");
            orin_profile_print(vision_profile, stderr, 0);
        }
        orin_profile_free(profile);
        orin_profile_free(vision_profile);
        orin_profile_free(prefill_profile);
    }
    generator_free(&g);
    engine_close(&e);
    return code;
}
