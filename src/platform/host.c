/* The host: its name, $HOME, this process's resident memory, the
 * machine's CPUs and runnable threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__ /* defined by the headers above */
#include <malloc.h>
#endif

#include "starling/platform.h"

sl_err sl_plat_hostname(char *buf, size_t cap) {
    if (cap == 0)
        return SL_EINVAL;
    if (gethostname(buf, cap) != 0)
        return SL_EIO;
    buf[cap - 1] = 0;
    char *dot = strchr(buf, '.');
    if (dot)
        *dot = 0;
    if (!buf[0])
        snprintf(buf, cap, "localhost");
    return SL_OK;
}

const char *sl_plat_home(void) {
    const char *h = getenv("HOME");
    return h && h[0] ? h : NULL;
}

uint64_t sl_plat_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

int sl_plat_cpu_count(void) { return (int)sysconf(_SC_NPROCESSORS_ONLN); }

int sl_plat_runnable_threads(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return -1;
    double l1, l5, l15;
    int running = -1, total;
    if (fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5)
        running = -1;
    fclose(f);
    return running;
}

void sl_plat_trim_memory(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
