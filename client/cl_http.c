#include "cl_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "cl_fmt.h"
#include "fb_table.h"

static volatile sig_atomic_t *interrupted;

fb_code cl_http_global_init(fb_err *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return fb_err_set(err, FB_EINTERNAL, NULL, "curl_global_init failed");
    return FB_OK;
}

void cl_http_global_cleanup(void)
{
    curl_global_cleanup();
}

void cl_http_set_interrupt(volatile sig_atomic_t *flag)
{
    interrupted = flag;
}

typedef struct sink {
    cl_http_resp *resp;
    size_t cap;
    bool over;
} sink;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    sink *s = ud;
    size_t n = size * nmemb;
    cl_http_resp *r = s->resp;

    if (r->len + n > (size_t)CL_HTTP_BODY_MAX) {
        s->over = true;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    if (r->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return 0;
        r->body = b;
        s->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    cl_http_resp *r = ud;
    size_t n = size * nmemb, k = strlen("Retry-After:");

    if (n > k && strncasecmp(data, "Retry-After:", k) == 0) {
        size_t i = k, end = n;
        while (i < n && (data[i] == ' ' || data[i] == '\t'))
            i++;
        while (end > i && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' '))
            end--;
        snprintf(r->retry_after, sizeof r->retry_after, "%.*s", (int)(end - i), data + i);
    }
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    return interrupted && *interrupted ? 1 : 0;
}

/* curl's failure as the project's code, with curl's own words. */
static fb_code curl_fail(CURLcode c, const sink *s, const char *url, const char *detail,
                         fb_err *err)
{
    const char *why = detail[0] ? detail : curl_easy_strerror(c);

    if (s->over)
        return fb_err_set(err, FB_ETOOBIG, NULL, "%s: the answer is over %ld bytes", url,
                          CL_HTTP_BODY_MAX);
    if (c == CURLE_ABORTED_BY_CALLBACK)
        return fb_err_set(err, FB_ETIMEOUT, NULL, "interrupted");
    if (c == CURLE_OPERATION_TIMEDOUT)
        return fb_err_set(err, FB_ETIMEOUT, NULL, "%s: %s", url, why);
    return fb_err_set(err, FB_EUNAVAIL, NULL, "%s: %s", url, why);
}

fb_code cl_http_request(const char *method, const char *url, const char *token, const char *body,
                        cl_http_resp *resp, fb_err *err)
{
    return cl_http_request_key(method, url, token, body, NULL, resp, err);
}

fb_code cl_http_new_key(char key[33], fb_err *err)
{
    unsigned char b[16];
    size_t have = 0;
    while (have < sizeof b) {
        ssize_t got = getrandom(b + have, sizeof b - have, 0);
        if (got <= 0)
            return fb_err_set(err, FB_EIO, NULL, "the random source failed");
        have += (size_t)got;
    }
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(key + 2 * i, 3, "%02x", b[i]);
    return FB_OK;
}

fb_code cl_http_request_key(const char *method, const char *url, const char *token,
                            const char *body, const char *idem_key, cl_http_resp *resp, fb_err *err)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    char auth[600], key[320], detail[CURL_ERROR_SIZE] = "";
    sink s = {.resp = resp};
    fb_code rc = FB_OK;
    CURLcode c;

    memset(resp, 0, sizeof *resp);
    if (!h)
        return fb_err_set(err, FB_ENOMEM, NULL, "curl_easy_init failed");
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (strcmp(method, "POST") == 0)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    else if (strcmp(method, "GET") != 0) /* DELETE: no body, says it is an API call */
        hdrs = curl_slist_append(hdrs, "X-FusionBench-Client: fusionbench");
    if (token && token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (idem_key && idem_key[0]) {
        snprintf(key, sizeof key, "Idempotency-Key: %s", idem_key);
        hdrs = curl_slist_append(hdrs, key);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fusionbench/" FB_CLIENT_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CL_HTTP_CONNECT_S);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, CL_HTTP_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c = curl_easy_perform(h);
    if (c != CURLE_OK) {
        rc = curl_fail(c, &s, url, detail, err);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    if (!resp->body) {
        resp->body = calloc(1, 1);
        if (!resp->body)
            rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
out:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return rc;
}

/* ---- a file streamed ---- */

typedef struct xfer {
    cl_http_transfer *t;
    sink body; /* an answer that is not the file */
    bool to_file;
    CURL *h;
    EVP_MD_CTX *sha;
    double last_draw;
    bool drew;
} xfer;

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = fread(buf, 1, size * nmemb, x->t->in);
    if (n == 0 && ferror(x->t->in))
        return CURL_READFUNC_ABORT;
    if (x->sha && n)
        EVP_DigestUpdate(x->sha, buf, n);
    return n;
}

static size_t on_file_body(char *data, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    long status = 0;

    if (!x->to_file) { /* decided on the first bytes: 200 goes to the file */
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
        x->to_file = status == 200 && x->t->out;
        if (!x->to_file)
            return on_body(data, size, nmemb, &x->body);
    }
    if (fwrite(data, 1, n, x->t->out) != n)
        return 0;
    if (x->sha)
        EVP_DigestUpdate(x->sha, data, n);
    return n;
}

static int on_file_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = ud;
    double total = (double)(x->t->in ? ut : dt), now = (double)(x->t->in ? un : dn);
    double secs = 0;
    char a[32], b[32], bar[31];

    if (interrupted && *interrupted)
        return 1;
    if (!x->t->progress)
        return 0;
    curl_easy_getinfo(x->h, CURLINFO_TOTAL_TIME, &secs);
    if (secs - x->last_draw < 0.2 && !(total > 0 && now >= total))
        return 0;
    x->last_draw = secs;
    int filled = total > 0 ? (int)(30 * now / total) : 0;
    for (int i = 0; i < 30; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[30] = '\0';
    fb_table_bytes(a, sizeof a, now);
    fb_table_bytes(b, sizeof b, total);
    fprintf(stderr, "\r%s [%s] %s / %s %3.0f%% %5.1f MiB/s", x->t->label ? x->t->label : "", bar, a,
            b, total > 0 ? 100 * now / total : 0.0, secs > 0 ? now / secs / (1024 * 1024) : 0.0);
    x->drew = true;
    return 0;
}

fb_code cl_http_transfer_file(const char *url, const char *token, cl_http_transfer *t,
                              cl_http_resp *resp, fb_err *err)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    char auth[600], detail[CURL_ERROR_SIZE] = "";
    xfer x = {.t = t, .body = {.resp = resp}, .h = h};
    fb_code rc = FB_OK;
    CURLcode c;

    memset(resp, 0, sizeof *resp);
    if (!h)
        return fb_err_set(err, FB_ENOMEM, NULL, "curl_easy_init failed");
    if (t->sha256_hex &&
        (!(x.sha = EVP_MD_CTX_new()) || EVP_DigestInit_ex(x.sha, EVP_sha256(), NULL) != 1)) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "SHA-256 unavailable");
        goto out;
    }
    hdrs = curl_slist_append(hdrs, "Accept: application/json, application/octet-stream");
    hdrs = curl_slist_append(hdrs, "X-FusionBench-Client: fusionbench");
    if (t->in)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
    if (token && token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (t->in) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &x);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->in_size);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fusionbench/" FB_CLIENT_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CL_HTTP_CONNECT_S);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_file_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_file_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c = curl_easy_perform(h);
    if (x.drew)
        fputc('\n', stderr);
    if (c != CURLE_OK) {
        rc = curl_fail(c, &x.body, url, detail, err);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    if (!resp->body && !(resp->body = calloc(1, 1)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    if (!rc && x.sha) {
        unsigned char d[32];
        unsigned int n = 0;
        if (EVP_DigestFinal_ex(x.sha, d, &n) != 1 || n != sizeof d)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "SHA-256 failed");
        for (unsigned i = 0; !rc && i < n; i++)
            snprintf(t->sha256_hex + 2 * i, 3, "%02x", d[i]);
    }
out:
    EVP_MD_CTX_free(x.sha);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return rc;
}

void cl_http_resp_free(cl_http_resp *resp)
{
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
}
