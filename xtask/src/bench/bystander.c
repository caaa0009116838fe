/* A process the profiler is not asked to profile: one-byte read(2)s of /dev/zero in bursts of
 * 5 ms, then a 15 ms sleep, so that it takes about a quarter of a core whatever the machine.
 * After each burst it prints "burst <reads> <its CPU ns>": whatever a tracer adds to every
 * system call of the host shows as fewer reads per CPU second, and the bench takes the best
 * bursts of a phase, the ones other processes on the machine disturbed least. */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void) {
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
