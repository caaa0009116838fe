/* A process the profiler is not asked to profile: one-byte read(2)s of /dev/zero in bursts of
 * 5 ms, then a 15 ms sleep, so that it takes about a quarter of a core whatever the machine.
 * After each burst it prints "burst <reads> <its CPU ns>": whatever a tracer adds to every
 * system call of the host shows as fewer reads per CPU second, and the bench takes the best
 * bursts of a phase, the ones other processes on the machine disturbed least.
 * With the argument "pipe", the bursts are one-byte round trips through a pair of pipes to a
 * second thread that echoes them: each is two wake-ups and context switches, so what a tracer
 * adds to every switch of the host shows ("burst <round trips> <the process's CPU ns>"). Both
 * threads are held to one CPU (the last): a trip is then always two switches on that CPU,
 * not a mix of those and of wake-ups of idle CPUs, whose costs differ by far more than a
 * tracer's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int to_echo[2], from_echo[2];

static void *echo(void *unused) {
    char byte;
    (void)unused;
    while (read(to_echo[0], &byte, 1) == 1 && write(from_echo[1], &byte, 1) == 1) {
    }
    return NULL;
}

static int pipe_bursts(void) {
    pthread_t thread;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &one);
    /* Before the echo thread exists, which inherits it. */
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    if (pipe(to_echo) != 0 || pipe(from_echo) != 0 ||
        pthread_create(&thread, NULL, echo, NULL) != 0) {
        perror("pipe");
        return 1;
    }
    char byte = 'x';
    struct timespec pause = {0, 15 * 1000 * 1000};
    for (;;) {
        long long end = ns(CLOCK_MONOTONIC) + 5 * 1000 * 1000;
        long long cpu = ns(CLOCK_PROCESS_CPUTIME_ID);
        long trips = 0;
        while (ns(CLOCK_MONOTONIC) < end) {
            for (int i = 0; i < 16; i++) {
                if (write(to_echo[1], &byte, 1) != 1 || read(from_echo[0], &byte, 1) != 1) {
                    perror("round trip");
                    return 1;
                }
            }
            trips += 16;
        }
        printf("burst %ld %lld\n", trips, ns(CLOCK_PROCESS_CPUTIME_ID) - cpu);
        fflush(stdout);
        nanosleep(&pause, NULL);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "pipe") == 0) {
        return pipe_bursts();
    }
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0) {
        perror("/dev/zero");
        return 1;
    }
    char byte;
    struct timespec pause = {0, 15 * 1000 * 1000};
    for (;;) {
        long long end = ns(CLOCK_MONOTONIC) + 5 * 1000 * 1000;
        long long cpu = ns(CLOCK_THREAD_CPUTIME_ID);
        long reads = 0;
        while (ns(CLOCK_MONOTONIC) < end) {
            for (int i = 0; i < 256; i++) {
                if (read(fd, &byte, 1) != 1) {
                    perror("read");
                    return 1;
                }
            }
            reads += 256;
        }
        printf("burst %ld %lld\n", reads, ns(CLOCK_THREAD_CPUTIME_ID) - cpu);
        fflush(stdout);
        nanosleep(&pause, NULL);
    }
}
