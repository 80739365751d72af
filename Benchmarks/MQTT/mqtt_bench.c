/* libmosquitto baseline for the MQTTClient benchmark (Benchmarks/MQTT/run.sh).
 * Same shape as Swift/main.swift: libmosquitto's own network thread (loop_start),
 *  - latency: one client subscribed to bench/lat publishes a 16-byte QoS 0 message and waits
 *    until it comes back through the broker; p50/p99 over N round trips;
 *  - throughput: a publisher keeps 100 QoS 1 messages unacknowledged at most, a second client
 *    receives; messages/s from the first publish to the last receipt.
 * Usage: mqtt_bench PORT ROUNDTRIPS MESSAGES */
#include <mosquitto.h>
#include <sys/resource.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long received = 0;
static sem_t window;
static volatile int connected = 0;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void on_connect(struct mosquitto *m, void *obj, int rc) {
    (void)m; (void)obj;
    pthread_mutex_lock(&lock);
    connected = rc == 0 ? 1 : -1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_subscribe(struct mosquitto *m, void *obj, int mid, int n, const int *q) {
    (void)m; (void)obj; (void)mid; (void)n; (void)q;
    pthread_mutex_lock(&lock);
    connected = 2;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *m, void *obj, const struct mosquitto_message *msg) {
    (void)m; (void)obj;
    /* Copy the payload, as the Swift wrapper does, so both sides do the same work. */
    void *copy = malloc(msg->payloadlen > 0 ? msg->payloadlen : 1);
    memcpy(copy, msg->payload, msg->payloadlen);
    free(copy);
    pthread_mutex_lock(&lock);
    received++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void on_publish(struct mosquitto *m, void *obj, int mid) {
    (void)m; (void)obj; (void)mid;
    sem_post(&window);
}

static void wait_state(int state) {
    pthread_mutex_lock(&lock);
    while (connected != state) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static struct mosquitto *client(int port, int subscribe, const char *topic) {
    struct mosquitto *m = mosquitto_new(NULL, true, NULL);
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_max_inflight_messages_set(m, 100);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_callback_set(m, on_message);
    mosquitto_publish_callback_set(m, on_publish);
    connected = 0;
    if (mosquitto_connect(m, "127.0.0.1", port, 60) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "connect failed\n"); exit(1); }
    mosquitto_loop_start(m);
    wait_state(1);
    if (subscribe) {
        mosquitto_subscribe(m, NULL, topic, 1);
        wait_state(2);
    }
    return m;
}

/* CPU time (user + system, µs) and context switches of the whole process so far. */
static double cpu_us(long *switches) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    *switches = u.ru_nvcsw + u.ru_nivcsw;
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s PORT ROUNDTRIPS MESSAGES\n", argv[0]); return 2; }
    int port = atoi(argv[1]);
    long rounds = atol(argv[2]), messages = atol(argv[3]);
    char payload[16] = "0123456789abcdef";
    mosquitto_lib_init();

    struct mosquitto *lat = client(port, 1, "bench/lat");
    double *samples = malloc(sizeof(double) * rounds);
    long cs0 = 0, cs1 = 0;
    double cpu0 = 0, cpu1;
    for (long i = -200; i < rounds; i++) { /* 200 warm-up round trips */
        long target;
        if (i == 0) cpu0 = cpu_us(&cs0);
        pthread_mutex_lock(&lock);
        target = received + 1;
        pthread_mutex_unlock(&lock);
        double t0 = now_ns();
        mosquitto_publish(lat, NULL, "bench/lat", sizeof payload, payload, 0, false);
        pthread_mutex_lock(&lock);
        while (received < target) pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        if (i >= 0) samples[i] = now_ns() - t0;
    }
    cpu1 = cpu_us(&cs1);
    qsort(samples, rounds, sizeof(double), compare);
    printf("c           latency  QoS0 round trip  p50 %8.1f us  p99 %8.1f us  (%ld)  cpu %6.1f us  %4.1f cs per round trip\n",
           samples[rounds / 2] / 1e3, samples[rounds * 99 / 100] / 1e3, rounds,
           (cpu1 - cpu0) / rounds, (double)(cs1 - cs0) / rounds);
    mosquitto_disconnect(lat);
    mosquitto_loop_stop(lat, false);
    mosquitto_destroy(lat);

    struct mosquitto *sub = client(port, 1, "bench/tp");
    struct mosquitto *pub = client(port, 0, NULL);
    sem_init(&window, 0, 100);
    pthread_mutex_lock(&lock);
    received = 0;
    pthread_mutex_unlock(&lock);
    cpu0 = cpu_us(&cs0);
    double t0 = now_ns();
    for (long i = 0; i < messages; i++) {
        sem_wait(&window);
        mosquitto_publish(pub, NULL, "bench/tp", sizeof payload, payload, 1, false);
    }
    pthread_mutex_lock(&lock);
    while (received < messages) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    double seconds = (now_ns() - t0) / 1e9;
    cpu1 = cpu_us(&cs1);
    printf("c           throughput QoS1 window 100  %10.0f msg/s  (%ld in %.2f s)  cpu %6.1f us  %4.2f cs per message\n",
           messages / seconds, messages, seconds, (cpu1 - cpu0) / messages, (double)(cs1 - cs0) / messages);
    mosquitto_disconnect(pub);
    mosquitto_disconnect(sub);
    mosquitto_loop_stop(pub, false);
    mosquitto_loop_stop(sub, false);
    mosquitto_destroy(pub);
    mosquitto_destroy(sub);
    mosquitto_lib_cleanup();
    return 0;
}
