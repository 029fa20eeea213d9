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

typedef struct conversation {
    orin_chat_message *msgs;
    char **owned;          /* strings we allocated, parallel to msgs */
    size_t n, cap;
} conversation;

static int conversation_add(conversation *c, const char *role, const char *content)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        orin_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m)
            return orin_error_set("out of memory");
        c->msgs = m;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o)
            return orin_error_set("out of memory");
        c->owned = o;
        c->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy)
        return orin_error_set("out of memory");
    c->owned[c->n] = copy;
    c->msgs[c->n++] = (orin_chat_message){.role = role, .content = copy};
    return 0;
}

/* Drops messages [from, from + count). */
static void conversation_drop(conversation *c, size_t from, size_t count)
{
    if (!count)
        return; /* msgs and owned may still be NULL: memmove must not see them */
    for (size_t i = from; i < from + count; i++)
        free(c->owned[i]);
    memmove(c->msgs + from, c->msgs + from + count, (c->n - from - count) * sizeof *c->msgs);
    memmove(c->owned + from, c->owned + from + count, (c->n - from - count) * sizeof *c->owned);
    c->n -= count;
}

static void conversation_free(conversation *c)
{
    conversation_drop(c, 0, c->n);
    free(c->msgs);
    free(c->owned);
    *c = (conversation){0};
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
    int rc = prepare_turn(g, c, first_turn, &ids, &n_ids);
    if (rc == 0)
        rc = generator_reply(g, ids, n_ids, &interrupted, &r);
    if (rc == 0) {
        if (g->stream)
            fputc('\n', stdout);
        else
            printf("%s\n", r.text);
        fflush(stdout);
        generator_print_stats(g, &r, json);
        rc = conversation_add(c, "assistant", r.text);
    }
    reply_free(&r);
    free(ids);
    return rc;
}

static int one_shot(generator *g, const orin_cli *cli)
{
    conversation c = {0};
    int rc = 0;
    if (g->chat && cli->cfg.generate.system[0])
        rc = conversation_add(&c, "system", cli->cfg.generate.system);
    if (rc == 0)
        rc = conversation_add(&c, "user", cli->cfg.generate.prompt);
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

static int interactive(generator *g, const orin_cli *cli)
{
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
        fprintf(stderr, "[interactive chat: /reset clears the history, /exit or Ctrl-D quits, "
                        "Ctrl-C stops a reply]\n");
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
        if (strcmp(line, "/reset") == 0) {
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
        rc = conversation_add(&c, "user", line);
        free(line);
        if (rc == 0)
            rc = take_turn(g, &c, first_turn, cli->json);
    }
    free(input.buf);
    conversation_free(&c);
    return rc;
}

int mode_generate(const orin_cli *cli)
{
    orin_engine e = {0};
    generator g = {0};
    int code = engine_open_model(&e, cli);
    if (code != ORIN_EXIT_OK)
        return code;
    orin_profile *profile = NULL;
    if (generator_init(&g, &e, cli) != 0 ||
        (cli->profile && !(profile = orin_profile_create(e.device)))) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        generator_free(&g);
        engine_close(&e);
        return ORIN_EXIT_LOAD;
    }
    if (profile) /* the decode steps run op by op: the stats line shows that speed */
        orin_model_set_profile(e.model, profile);
    install_sigint();
    int rc = cli->cfg.generate.interactive ? interactive(&g, cli) : one_shot(&g, cli);
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
        fflush(stdout);
        orin_profile_print(profile, stderr, engine_bandwidth(e.device));
        orin_profile_free(profile);
    }
    generator_free(&g);
    engine_close(&e);
    return code;
}
