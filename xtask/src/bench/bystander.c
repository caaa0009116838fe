/* A process the profiler is not asked to profile: one-byte read(2)s of /dev/zero in bursts of
 * 5 ms, then a 15 ms sleep, so that it takes about a quarter of a core whatever the machine.
 * The bench prices tracing by its reads per CPU second (/proc/PID/io syscr over utime+stime):
 * whatever a tracer adds to every system call of the host shows there. */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
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
        long long end = now_ns() + 5 * 1000 * 1000;
        while (now_ns() < end) {
            for (int i = 0; i < 256; i++) {
                if (read(fd, &byte, 1) != 1) {
                    perror("read");
                    return 1;
                }
            }
        }
        nanosleep(&pause, NULL);
    }
}
