/* Context switches at a high rate: pairs of threads handing one byte back and forth through
 * two pipes, both threads of a pair on one CPU, so that every hand-over is a switch.
 * Arguments: pairs (default one per CPU), CPU (default: pair k on CPU k, round the CPUs).
 * Runs until killed; the bench counts its switches from /proc/PID/task/TID/status. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct side {
    int in, out;
    int cpu;
    int serve;
};

static void *run(void *arg) {
    struct side *s = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    char byte = 0;
    if (s->serve && write(s->out, &byte, 1) != 1) {
        perror("write");
        exit(1);
    }
    for (;;) {
        if (read(s->in, &byte, 1) != 1 || write(s->out, &byte, 1) != 1) {
            perror("pipe");
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int pairs = argc > 1 ? atoi(argv[1]) : cpus;
    int cpu = argc > 2 ? atoi(argv[2]) : -1;
    if (pairs < 1 || pairs > 64 || cpu < -1 || cpus < 1) {
        fprintf(stderr, "usage: pingpong [PAIRS 1-64] [CPU]\n");
        return 2;
    }
    for (int p = 0; p < pairs; p++) {
        int there[2], back[2];
        if (pipe(there) || pipe(back)) {
            perror("pipe");
            return 1;
        }
        struct side *a = malloc(sizeof *a), *b = malloc(sizeof *b);
        int on = cpu >= 0 ? cpu : p % cpus;
        *a = (struct side){back[0], there[1], on, 1};
        *b = (struct side){there[0], back[1], on, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, run, a) || pthread_create(&t, NULL, run, b)) {
            perror("pthread_create");
            return 1;
        }
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}
