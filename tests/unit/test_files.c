/* gr_files: a job names files inside the weights folder only (issue 13,
 * hardening item 1).  Names that leave the folder, links, FIFOs, folders and
 * missing files are all refused, with one message shape that does not tell
 * them apart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gr_files.h"

static char root[256];

static void write_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void at(const char *rel, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", root, rel);
}

static int setup(void **state)
{
    char path[512], outside[512];
    (void)state;
    snprintf(root, sizeof root, "/tmp/fb-test-files-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    at("sub", path, sizeof path);
    mkdir(path, 0755);
    write_file("ok.safetensors", "12345678");
    write_file("sub/deep.bin", "abc");
    /* outside the folder, reachable only through links */
    snprintf(outside, sizeof outside, "%s-outside", root);
    mkdir(outside, 0755);
    snprintf(path, sizeof path, "%s/secret", outside);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("secret", f);
    fclose(f);
    at("link", path, sizeof path);
    snprintf(outside, sizeof outside, "%s-outside/secret", root);
    if (symlink(outside, path) != 0)
        return -1;
    at("ldir", path, sizeof path);
    snprintf(outside, sizeof outside, "%s-outside", root);
    if (symlink(outside, path) != 0)
        return -1;
    at("fifo", path, sizeof path);
    if (mkfifo(path, 0644) != 0)
        return -1;
    setenv("FUSIONBENCH_WEIGHTS_DIR", root, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[600];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s-outside'", root, root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_opens_inside(void **state)
{
    fb_err err = {0};
    int fd = -1;
    char buf[16] = "";
    (void)state;
    assert_string_equal(gr_files_dir(), root);
    assert_int_equal(gr_files_open("ok.safetensors", "params.weights", &fd, &err), FB_OK);
    assert_int_equal(read(fd, buf, sizeof buf - 1), 8);
    close(fd);
    assert_int_equal(gr_files_open("sub/deep.bin", "params.input", &fd, &err), FB_OK);
    close(fd);
}

static void test_bad_names(void **state)
{
    static const char *const bad[] = {
        "/etc/passwd", "../x", "sub/../ok.safetensors", ".hidden", "sub/.x", "a//b", "sub/", "",
        "a b",         "a\\b", "ok.safetensors\n",      "~root/x",
    };
    char longname[300];
    (void)state;
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fb_err err = {0};
        int fd = 7;
        assert_int_equal(gr_files_open(bad[i], "params.weights", &fd, &err), FB_EINVAL);
        assert_int_equal(fd, -1);
        assert_string_equal(err.field, "params.weights");
        assert_non_null(strstr(err.msg, "must name a file in the worker's weights folder"));
    }
    fb_err err = {0};
    int fd;
    assert_int_equal(gr_files_open(longname, "params.weights", &fd, &err), FB_EINVAL);
    assert_int_equal(gr_files_open(NULL, "params.weights", &fd, &err), FB_EINVAL);
}

/* Links (to a file or a folder outside), a FIFO, a folder and a missing name:
 * all refused, at once (the FIFO does not block), with the same message. */
static void test_refused_alike(void **state)
{
    static const char *const names[] = {"link", "ldir/secret", "fifo", "sub", "nope", "sub/nope"};
    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fb_err err = {0};
        char want[128];
        int fd = 7;
        time_t t0 = time(NULL);
        assert_int_equal(gr_files_open(names[i], "params.input", &fd, &err), FB_EINVAL);
        assert_true(time(NULL) - t0 < 2);
        assert_int_equal(fd, -1);
        snprintf(want, sizeof want, "no readable file '%s' in the worker's weights folder",
                 names[i]);
        assert_string_equal(err.msg, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opens_inside),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_refused_alike),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
