/* hrbench's sandbox launcher: one exec between the harness and bwrap (hrbench/envs/local/confine.py).
 *
 *   launch [-c CGROUP_FILE]... [-l RESOURCE=LIMIT]... [-n NETNS_FD] [-u UID:GID] -- PROGRAM ARG...
 *
 * In this order: writes "0" (the calling thread) into every CGROUP_FILE (so everything it starts
 * is counted in the trial's cgroups: a v1 group's `tasks`, a v2 group's `cgroup.procs`; the
 * launcher is single-threaded, so moving its thread moves the process, and on v1 a thread moving
 * itself skips the global lock whose RCU grace period made each join wait 5-9 ms), sets each rlimit (soft = hard = LIMIT, never above the current
 * hard limit), joins the network namespace NETNS_FD names and closes it (-n: one per trial, shared by
 * its sandboxes; needs root, so only with -u), and with -u (hrbench is root) empties the ambient and bounding capability sets,
 * drops every supplementary group, switches real, effective and saved ids to UID:GID and empties
 * the remaining capability sets; then sets no_new_privs and execs PROGRAM (an absolute path).
 * The same as `sh -c 'echo 0 > tasks; ulimit ...; exec setpriv --reuid --regid --clear-groups
 * --inh-caps=-all --bounding-set=-all --no-new-privs -- PROGRAM'`, without two execs.
 * Any failure exits 125 with a line on stderr, before PROGRAM runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static void die(const char *what, const char *arg) {
    fprintf(stderr, "hrbench launcher: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
    _exit(125);
}

static unsigned long number(const char *text, const char *what) {
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno || end == text || (*end && *end != '=' && *end != ':')) {
        errno = EINVAL;
        die(what, text);
    }
    return value;
}

int main(int argc, char **argv) {
    int i = 1;
    long uid = -1, gid = -1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        if (i + 1 >= argc) {
            errno = EINVAL;
            die("option without a value:", argv[i]);
        }
        const char *value = argv[i + 1];
        if (strcmp(argv[i], "-c") == 0) {
            int fd = open(value, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "0", 1) < 0 || close(fd) < 0)
                die("cannot join the cgroup", value);
        } else if (strcmp(argv[i], "-l") == 0) {
            int resource = (int)number(value, "bad rlimit");
            rlim_t limit = (rlim_t)number(strchr(value, '=') ? strchr(value, '=') + 1 : "", "bad rlimit");
            struct rlimit current;
            if (getrlimit(resource, &current) < 0)
                die("cannot read rlimit", value);
            if (current.rlim_max != RLIM_INFINITY && current.rlim_max < limit)
                limit = current.rlim_max;
            struct rlimit wanted = {limit, limit};
            if (setrlimit(resource, &wanted) < 0)
                die("cannot set rlimit", value);
        } else if (strcmp(argv[i], "-n") == 0) {
            /* the trial's network namespace (an fd the harness passed): joined while still root, then
             * closed, so the sandbox never holds it; bwrap then runs without --unshare-net */
            int fd = (int)number(value, "bad network namespace fd");
            if (setns(fd, CLONE_NEWNET) < 0 || close(fd) < 0)
                die("cannot join the trial's network namespace", value);
        } else if (strcmp(argv[i], "-u") == 0) {
            uid = (long)number(value, "bad uid:gid");
            gid = (long)number(strchr(value, ':') ? strchr(value, ':') + 1 : "", "bad uid:gid");
        } else {
            errno = EINVAL;
            die("unknown option", argv[i]);
        }
    }
    if (i + 1 >= argc || argv[i + 1][0] != '/') {
        errno = EINVAL;
        die("usage: launch [-c CGROUP_FILE]... [-l RES=LIMIT]... [-n NETNS_FD] [-u UID:GID] -- /PROGRAM ARG...", NULL);
    }
    if (uid >= 0) {
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
            die("cannot clear the ambient capabilities", NULL);
        for (int cap = 0;; cap++) {  /* needs CAP_SETPCAP: before the uid change; EINVAL past the last */
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                if (errno == EINVAL && cap > 0)
                    break;
                die("cannot empty the capability bounding set", NULL);
            }
        }
        if (setgroups(0, NULL) < 0)
            die("cannot drop the supplementary groups", NULL);
        if (setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) < 0)
            die("cannot change the group id", NULL);
        if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0)
            die("cannot change the user id", NULL);
        struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);  /* the inheritable set too: setresuid clears only the others */
        if (syscall(SYS_capset, &header, data) < 0)
            die("cannot empty the capability sets", NULL);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die("cannot set no_new_privs", NULL);
    execv(argv[i + 1], argv + i + 1);
    die("cannot run", argv[i + 1]);
    return 125;
}
