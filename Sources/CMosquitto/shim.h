#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <sys/prctl.h>

/// Names the calling thread (visible in /proc/self/task/<tid>/comm); prctl is variadic and
/// so not callable from Swift directly.
static inline int gatt2mqtt_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}
