/*
 * test_dist_cli.c: `placer step --procs N` on the CPU backend: the ranks'
 * loss is the single-process loss, bad input is one line before any fork,
 * and a rank killed mid-run stops the others with one line, exit 1, no
 * process left (the ranks carry a marker in their environment; after the
 * run no process in /proc may have it).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int run_placer(const char *env, const char *args, char *out, size_t len) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", env ? env : "", PLACER_BIN, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "cannot run %s", PLACER_BIN);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double json_num(const char *out, const char *key) {
    const char *p = strstr(out, key);
    cr_assert_not_null(p, "no %s in %s", key, out);
    return strtod(p + strlen(key), NULL);
}

Test(step_procs, dp2_and_dp4_report_the_single_process_loss) {
    char one[8192], two[8192], four[8192];
    cr_assert_eq(run_placer(NULL, "step --config tiny --cpu 1 --warmup 1 --steps 3 --json", one, sizeof one), 0, "%s",
                 one);
    cr_assert_eq(run_placer(NULL, "step --config tiny --procs 2 --warmup 1 --steps 3 --json", two, sizeof two), 0,
                 "%s", two);
    cr_assert_eq(run_placer(NULL,
                            "step --config tiny --procs 4 --cpu 2 --placement 0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1 "
                            "--warmup 1 --steps 3 --json",
                            four, sizeof four),
                 0, "%s", four);
    cr_expect(strstr(two, "\"procs\":2") && strstr(two, "\"rank_batch\":2"), "%s", two);
    cr_expect(strstr(four, "\"procs\":4") && strstr(four, "\"rank_batch\":1"), "%s", four);
    /* printed with 6 decimals; test_dist_dp.c bounds the difference at 1e-8 relative */
    const double f1 = json_num(one, "\"first\":"), l1 = json_num(one, "\"last\":");
    cr_expect(fabs(json_num(two, "\"first\":") - f1) <= 2e-6 && fabs(json_num(two, "\"last\":") - l1) <= 2e-6,
              "%s vs %s", two, one);
    cr_expect(fabs(json_num(four, "\"first\":") - f1) <= 2e-6 && fabs(json_num(four, "\"last\":") - l1) <= 2e-6,
              "%s vs %s", four, one);
    cr_expect(json_num(two, "\"median\":") > 0, "%s", two);
}

/* ZeRO-1 in bf16 from the command line: the zero-0 bf16 losses (the bits
 * are checked by dist_dp/zero1_in_bf16_gives_zero0_bits). */
Test(step_procs, zero1_runs_in_bf16) {
    char z0[8192], z1[8192];
    cr_assert_eq(run_placer(NULL, "step --config tiny --procs 2 --precision bf16 --warmup 1 --steps 3 --json", z0,
                            sizeof z0),
                 0, "%s", z0);
    cr_assert_eq(run_placer(NULL, "step --config tiny --procs 2 --zero 1 --precision bf16 --warmup 1 --steps 3 --json",
                            z1, sizeof z1),
                 0, "%s", z1);
    cr_expect(strstr(z1, "\"zero\":1") != NULL, "%s", z1);
    cr_expect(json_num(z1, "\"first\":") == json_num(z0, "\"first\":") &&
                  json_num(z1, "\"last\":") == json_num(z0, "\"last\":"),
              "%s vs %s", z1, z0);
}

Test(step_procs, bad_input_is_one_line_and_exit_2) {
    static const char *cases[] = {
        "step --config tiny --procs 3",                    /* does not divide 4 */
        "step --config tiny --procs 2 --micro-batches 4",  /* 4 micro-batches of a 2-sample slice */
        "step --config tiny --procs 0",
        "step --config tiny --procs 2 --devices 0",
        "step --config tiny --procs 2 --timeout 0",
        "step --config tiny --procs 2 --cpu 2 --placement 0,1",
        "step --config tiny --procs 2 --trace /tmp/x.json",
        "step --config tiny --procs 2 --zero 2",
        "step --config tiny --zero 1",                     /* no data-parallel ranks */
        "step --config tiny --procs 2 --bucket-mb 0",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4096];
        int rc = run_placer(NULL, cases[i], out, sizeof out);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", cases[i], rc, out);
        cr_expect(strncmp(out, "placer step: ", 13) == 0, "'%s': %s", cases[i], out);
        char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0, "'%s' printed more than one line: %s", cases[i], out);
    }
}

/* Processes whose environment holds marker (an orphaned rank would). */
static int count_marked(const char *marker) {
    DIR *d = opendir("/proc");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        char path[300], buf[65536];
        snprintf(path, sizeof path, "/proc/%s/environ", de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf, f);
        fclose(f);
        for (size_t i = 0; i + strlen(marker) <= k; i++)
            if (memcmp(buf + i, marker, strlen(marker)) == 0) {
                n++;
                break;
            }
    }
    closedir(d);
    return n;
}

Test(step_procs, a_killed_rank_stops_the_run_with_one_line_and_no_orphan, .timeout = 120) {
    /* 20 runs (the count): 10 of 2 ranks, 10 of 4, every rank a victim in turn. The
     * victim dies after its first step, while the others are in their second */
    for (int rep = 0; rep < 20; rep++) {
        const int procs = rep < 10 ? 2 : 4, victim = rep % procs;
        char env[256], marker[64], args[256], out[4096];
        snprintf(marker, sizeof marker, "PLACER_TEST_TAG=h9-%d-%d", (int)getpid(), rep);
        snprintf(env, sizeof env, "env %s PLACER_TEST_KILL_RANK=%d", marker, victim);
        /* every other run with ZeRO-1, so a death also lands in a reduce-scatter or all-gather */
        snprintf(args, sizeof args, "step --config tiny --procs %d --zero %d --warmup 1 --steps 20 --timeout 20", procs,
                 rep % 2);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = run_placer(env, args, out, sizeof out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        cr_expect_eq(rc, 1, "procs %d victim %d: exit %d: %s", procs, victim, rc, out);
        char want[64];
        snprintf(want, sizeof want, "placer step: rank %d was killed by signal 9", victim);
        cr_expect(strncmp(out, want, strlen(want)) == 0, "%s", out);
        char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0, "more than one line: %s", out);
        cr_expect(dt < 10.0, "took %.1f s", dt);
        cr_expect_eq(count_marked(marker), 0, "a rank of run %d is still running", rep);
    }
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The launcher itself killed: its ranks die with it (PR_SET_PDEATHSIG). */
Test(step_procs, killing_the_launcher_kills_its_ranks, .timeout = 60) {
    char marker[64];
    snprintf(marker, sizeof marker, "PLACER_TEST_TAG=h9-parent-%d", (int)getpid());
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        putenv(marker);
        execl(PLACER_BIN, "placer", "step", "--config", "tiny", "--procs", "2", "--warmup", "0", "--steps", "10000",
              (char *)NULL);
        _exit(127);
    }
    /* the launcher and its 2 ranks */
    double t0 = mono_s();
    while (count_marked(marker) < 3 && mono_s() - t0 < 10.0) usleep(10000);
    cr_assert_eq(count_marked(marker), 3, "the ranks never started");
    kill(pid, SIGKILL);
    int ws;
    waitpid(pid, &ws, 0);
    t0 = mono_s();
    while (count_marked(marker) > 0 && mono_s() - t0 < 5.0) usleep(10000);
    cr_expect_eq(count_marked(marker), 0, "ranks outlived their launcher");
}

/* ZeRO-1 composes with tensor parallelism: tp 2 x dp 2 (with and without
 * sp) prints zero 0's losses (the same bits on sockets: dist_dp.h) with
 * smaller static bytes (the tp shard's moments split over dp 2). */
Test(step_procs, zero1_under_tp2_dp2_keeps_the_loss_and_shrinks_the_moments, .timeout = 120) {
    char z0[8192], z1[8192], z1sp[8192];
    const char *base = "step --config tiny --procs 4 --tp 2 --warmup 1 --steps 3 --json";
    char args[256];
    snprintf(args, sizeof args, "%s --zero 0", base);
    cr_assert_eq(run_placer(NULL, args, z0, sizeof z0), 0, "%s", z0);
    snprintf(args, sizeof args, "%s --zero 1", base);
    cr_assert_eq(run_placer(NULL, args, z1, sizeof z1), 0, "%s", z1);
    snprintf(args, sizeof args, "%s --sp --zero 1", base);
    cr_assert_eq(run_placer(NULL, args, z1sp, sizeof z1sp), 0, "%s", z1sp);
    const double l0 = json_num(z0, "\"last\":");
    /* printed with 6 decimals; the bits are equal, so the text is too */
    cr_expect(fabs(json_num(z1, "\"last\":") - l0) < 1e-7 && fabs(json_num(z1sp, "\"last\":") - l0) < 1e-7,
              "%s / %s / %s", z0, z1, z1sp);
    const double s0 = json_num(z0, "\"static_bytes_rank0\":["), s1 = json_num(z1, "\"static_bytes_rank0\":[");
    cr_expect(s1 < s0, "static bytes %g with zero 1, %g without", s1, s0);
}

/* A rank that hangs (PLACER_TEST_HANG_RANK: it pauses after its first
 * step): the others give up after --timeout, one line, exit 1, and the
 * launcher kills the hung one. */
Test(step_procs, a_hung_rank_times_out_the_run_with_one_line_and_no_orphan, .timeout = 60) {
    for (int procs = 2; procs <= 4; procs += 2) {
        char env[256], marker[64], args[256], out[4096];
        snprintf(marker, sizeof marker, "PLACER_TEST_TAG=hdp-hang-%d-%d", (int)getpid(), procs);
        snprintf(env, sizeof env, "env %s PLACER_TEST_HANG_RANK=1", marker);
        snprintf(args, sizeof args, "step --config tiny --procs %d --zero 1 --warmup 1 --steps 20 --timeout 1", procs);
        const double t0 = mono_s();
        int rc = run_placer(env, args, out, sizeof out);
        const double dt = mono_s() - t0;
        cr_expect_eq(rc, 1, "procs %d: exit %d: %s", procs, rc, out);
        cr_expect(strstr(out, "no word from rank 1 for 1.0 s") != NULL, "%s", out);
        char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0, "more than one line: %s", out);
        cr_expect(dt < 20.0, "took %.1f s", dt);
        cr_expect_eq(count_marked(marker), 0, "a rank is still running");
    }
}
