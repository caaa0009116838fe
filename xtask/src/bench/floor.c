// The floor of what seeing a target's context switches costs: a BPF program that does nothing
// (it returns at once), run at every switch of each of the target's threads by a software
// context-switch perf event opened on that thread alone. Any tracer that sees the target's
// switches pays at least this, whatever it does there; what it costs a process that is not
// traced is the kernel's, not the tracer's.
//
// Usage: floor PID. Runs until SIGINT or SIGTERM; threads born later are picked up every
// 100 ms. Says on stderr how many threads it watched.
#include <dirent.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 65536

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static int load_noop(void) {
    // r0 = 0; exit
    struct bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    static char log[4096];
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_PERF_EVENT;
    attr.insns = (unsigned long)insns;
    attr.insn_cnt = 2;
    attr.license = (unsigned long)"GPL";
    attr.log_buf = (unsigned long)log;
    attr.log_size = sizeof log;
    attr.log_level = 1;
    int fd = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
    if (fd < 0) fprintf(stderr, "floor: cannot load the program: %s\n%s\n", strerror(errno), log);
    return fd;
}

// 1: attached; 0: the thread is gone; -1: failed.
static int attach(int prog, int tid) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    attr.sample_period = 1;
    attr.disabled = 1;
    int fd = syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        if (errno == ESRCH) return 0;
        fprintf(stderr, "floor: perf_event_open on thread %d: %s\n", tid, strerror(errno));
        return -1;
    }
    if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog) < 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
        fprintf(stderr, "floor: attaching to thread %d: %s\n", tid, strerror(errno));
        close(fd);
        return -1;
    }
    // The descriptor stays open until exit: closing it would detach the program.
    return 1;
}

static char seen[MAX_THREADS * 64 / 8];

static int is_seen(long tid) {
    return tid < (long)sizeof seen * 8 && (seen[tid / 8] >> (tid % 8)) & 1;
}

static void mark(long tid) {
    if (tid < (long)sizeof seen * 8) seen[tid / 8] |= 1 << (tid % 8);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: floor PID\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    // A descriptor per thread.
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    int prog = load_noop();
    if (prog < 0) return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/task", argv[1]);
    long watched = 0;
    while (!stop) {
        DIR *dir = opendir(path);
        if (!dir) {
            if (watched == 0) {
                fprintf(stderr, "floor: cannot read %s: %s\n", path, strerror(errno));
                return 1;
            }
            break; // the target exited
        }
        struct dirent *entry;
        while ((entry = readdir(dir))) {
            long tid = strtol(entry->d_name, NULL, 10);
            if (tid <= 0 || is_seen(tid)) continue;
            int r = attach(prog, (int)tid);
            if (r < 0) return 1;
            mark(tid);
            watched += r;
        }
        closedir(dir);
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "floor: watched %ld threads\n", watched);
    return 0;
}
