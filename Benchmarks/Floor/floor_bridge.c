/* floor_bridge.c - the physical floor of one gatt2mqtt bridge command on this machine: the same
 * contract in plain C, to measure the bridge against, side by side in one run.
 *
 * The project's copy of ../shared/bench/floor/floor_bridge.c (Benchmarks/Floor/README.md), run by
 * Benchmarks/Bridge/run.sh. Changed from the original: several devices on the one loop
 * (`-n camera0,camera1 -a ADDR0,ADDR1`), each with its own GATT operation in flight, its own
 * queue and its own AcquireNotify socket, so the benchmark's "8 devices, one command in flight
 * each" has a floor too; with one device it does exactly what the original does.
 *
 * One thread, one epoll loop, no allocation per command beyond what libdbus and libmosquitto do,
 * doing per command what `gatt2mqtt run` must do for a GoPro set_shutter that the device answers
 * at once:
 *
 *   1. MQTT: the command arrives on <base>/<device>/set (subscribed `<base>/+/set`, QoS 1, MQTT 5;
 *      retained ones ignored, as the contract says); `transaction`, `command`, `value` taken out
 *      with a minimal JSON scanner.
 *   2. SQLite (the bridge's store settings: WAL, synchronous=NORMAL, locking_mode=EXCLUSIVE,
 *      1 KiB pages, wal_autocheckpoint 4000; the bridge's outbox schema v3): the command's outbox
 *      row INSERTed with status 'sent' in one autocommit statement BEFORE the device is touched
 *      (at most once). A command that must wait (a GATT operation is under way) is stored
 *      'queued' at the end of the loop turn (all of that turn's in one transaction), and updated
 *      to 'sent' (one statement) when it goes out.
 *   3. D-Bus (libdbus, its watch on the loop): org.bluez.GattCharacteristic1.WriteValue
 *      (03 01 01 01 for true / 03 01 01 00 for false, options {"type": "request"}, with reply)
 *      on GP-0072, one GATT operation in flight: the next write waits for the method return.
 *   4. The answer 02 01 00 on GP-0073's AcquireNotify socket ends the command at once (before
 *      the method return if it comes first): the outbox row DELETEd and (state mode, the
 *      default) the device state UPSERTed in ONE transaction; without the state: the DELETE
 *      alone (one autocommit statement).
 *   5. MQTT: {"transaction":..,"status":"ok","command":{..},"data":{..}} on <base>/<device>/response,
 *      QoS 1, not retained; state mode: the state JSON on <base>/<device>, QoS 1, retained.
 *
 * Whether the answer also stores and publishes the device state (-s 1, default) or not (-s 0):
 * the Swift bridge stores and publishes the state only when the answer changed it; a GoPro
 * command answer `02 01 00` from a GoPro that answers at once (no status pushes) changes nothing,
 * so for that benchmark `gatt2mqtt run` does the -s 0 work.
 *
 * Start-up (blocking, not measured): D-Bus system bus (DBUS_SYSTEM_BUS_ADDRESS); the device's
 * Device1 object (Adapter1.StartDiscovery until it appears), Device1.Connect, ServicesResolved,
 * ObjectManager.GetManagedObjects once for the characteristic paths (GP-0072, GP-0073),
 * AcquireNotify on GP-0073; SQLite; MQTT connect (TCP_NODELAY), subscribe; then
 * <base>/<device>/availability {"state":"online"} and <base>/bridge/state, QoS 1, retained.
 * SIGTERM/SIGINT: availability offline, MQTT disconnect, Device1.Disconnect, exit 0. On exit it
 * prints its own counters to stderr (commands, loop wake-ups, getrusage).
 *
 *   build/floor_bridge [-H host] [-p port] [-b base] [-n id[,id…]] [-a address[,address…]] [-i hciN]
 *                      [-d db-path] [-s 0|1] [-v]
 * Build: cc -O2 -o build/floor_bridge floor_bridge.c $(pkg-config --cflags --libs dbus-1) -lmosquitto -lsqlite3
 */
#define _GNU_SOURCE
#include <dbus/dbus.h>
#include <errno.h>
#include <fcntl.h>
#include <mosquitto.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GP_CMD "b5f90072-aa8d-11e3-9046-0002a5d5c51b"
#define GP_CMD_RSP "b5f90073-aa8d-11e3-9046-0002a5d5c51b"
#define CHR1 "org.bluez.GattCharacteristic1"
#define TAG_MQTT 1
#define TAG_DBUS 2
#define TAG_NOTIFY 3
#define QCAP 1024

/* ------------------------------------------------------------------ options, globals */
static const char *host = "127.0.0.1", *base = "gatt2mqtt", *devids = "camera", *addresses = "C0:FF:EE:00:00:01",
                  *adapter = "hci0", *dbpath = "./state.sqlite";
static int port = 1883, with_state = 1, verbose;
static volatile sig_atomic_t stopping;

static struct mosquitto *mq;
static DBusConnection *bus;
static sqlite3 *db;
static int ep = -1, mq_fd = -1, dbus_fd = -1;
static uint32_t dbus_events;                      /* what the D-Bus fd is registered for */
static char set_topic[256], bridge_topic[256];
static volatile int mq_connected, mq_subscribed;

struct cmd {
    char txn[128];      /* the transaction as JSON text ("perf-12" with its quotes), "" = none */
    int value;          /* set_shutter true / false */
    int64_t oid;        /* outbox row id */
    int stored;         /* row written ('queued') */
};
/* one device: its BlueZ objects, topics, notify socket, and its one GATT operation in flight */
#define MAXDEV 16
struct dev {
    char id[64], address[32];
    char devpath[128], wpath[256], npath[256];
    char resp_topic[256], state_topic[256], avail_topic[256];
    int nfd;
    struct cmd queue[QCAP];
    unsigned qhead, qlen, qunstored;
    struct cmd cur;                               /* the command whose GATT operation is under way */
    int busy, await_return, await_answer;
    double cur_started;                           /* CLOCK_MONOTONIC (vDSO) when its write went out */
    dbus_uint32_t cur_serial;
};
static struct dev devs[MAXDEV];
static int ndev;
static int64_t next_oid = 1;
static uint64_t n_cmds, n_ok, n_err, n_wakeups, n_events, n_commits;

static sqlite3_stmt *st_ins, *st_upd, *st_del, *st_ups, *st_begin, *st_commit;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "floor_bridge: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}
static void logv(const char *fmt, ...) {
    if (!verbose) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
static double wall_now(void) {   /* CLOCK_REALTIME through the vDSO: no system call */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}
static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ SQLite */
static void sql_exec(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) die("sqlite: %s: %s", sql, err ? err : "?");
}
static sqlite3_stmt *prep(const char *sql) {
    sqlite3_stmt *s;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        die("sqlite prepare: %s: %s", sql, sqlite3_errmsg(db));
    return s;
}
static void step(sqlite3_stmt *s) {
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) die("sqlite step: %s", sqlite3_errmsg(db));
    sqlite3_reset(s);
}
static void db_open(void) {
    int fd = open(dbpath, O_RDWR | O_CREAT, 0600);
    if (fd < 0) die("cannot create %s: %s", dbpath, strerror(errno));
    close(fd);
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        die("sqlite open %s: %s", dbpath, sqlite3_errmsg(db));
    /* the Swift bridge's BridgeStore settings (Sources/BridgeStore/BridgeStore.swift) */
    sql_exec("PRAGMA locking_mode = EXCLUSIVE");
    sql_exec("PRAGMA page_size = 1024");
    sql_exec("PRAGMA journal_mode = WAL");
    sql_exec("PRAGMA synchronous = NORMAL");
    sql_exec("PRAGMA wal_autocheckpoint = 4000");
    sql_exec("PRAGMA journal_size_limit = 16777216");
    sql_exec("CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY NOT NULL, deviceID TEXT NOT NULL, "
             "\"transaction\" TEXT, command TEXT NOT NULL, attribute TEXT, status TEXT NOT NULL, "
             "createdAt DATETIME NOT NULL, deadline DATETIME NOT NULL, responseTopic TEXT, correlationData BLOB)");
    sql_exec("CREATE TABLE IF NOT EXISTS deviceState (deviceID TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL, "
             "updatedAt DATETIME NOT NULL)");
    sql_exec("BEGIN IMMEDIATE; COMMIT");                 /* take the exclusive lock now */
    /* a row left by a previous run: the bridge answers `sent` ones error/interrupted; the floor drops them */
    sqlite3_stmt *mx = prep("SELECT MAX(id) FROM outbox");
    if (sqlite3_step(mx) == SQLITE_ROW) next_oid = sqlite3_column_int64(mx, 0) + 1;
    sqlite3_finalize(mx);
    sql_exec("DELETE FROM outbox");
    st_ins = prep("INSERT INTO outbox (id, deviceID, \"transaction\", command, attribute, status, createdAt, deadline, "
                  "responseTopic, correlationData) VALUES (?, ?, ?, ?, 'shutter', ?, ?, ?, NULL, NULL)");
    st_upd = prep("UPDATE outbox SET status = ? WHERE id = ?");
    st_del = prep("DELETE FROM outbox WHERE id = ?");
    st_ups = prep("INSERT INTO deviceState (deviceID, state, updatedAt) VALUES (?, ?, ?) ON CONFLICT(deviceID) DO "
                  "UPDATE SET state = excluded.state, updatedAt = excluded.updatedAt");
    st_begin = prep("BEGIN");
    st_commit = prep("COMMIT");
}
static const char *cmd_json(int value) {
    return value ? "{\"command\":\"set_shutter\",\"value\":true}" : "{\"command\":\"set_shutter\",\"value\":false}";
}
static void outbox_insert(const struct dev *d, struct cmd *c, const char *status) {
    double now = wall_now();
    sqlite3_bind_int64(st_ins, 1, c->oid);
    sqlite3_bind_text(st_ins, 2, d->id, -1, SQLITE_STATIC);
    if (c->txn[0]) sqlite3_bind_text(st_ins, 3, c->txn, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st_ins, 3);
    sqlite3_bind_text(st_ins, 4, cmd_json(c->value), -1, SQLITE_STATIC);
    sqlite3_bind_text(st_ins, 5, status, -1, SQLITE_STATIC);
    sqlite3_bind_double(st_ins, 6, now);
    sqlite3_bind_double(st_ins, 7, now + 60.0);
    step(st_ins);
}

/* ------------------------------------------------------------------ MQTT publishing */
static void publish(const char *topic, const char *payload, int len, int retain) {
    int rc = mosquitto_publish(mq, NULL, topic, len, payload, 1, retain);
    if (rc != MOSQ_ERR_SUCCESS) fprintf(stderr, "floor_bridge: publish %s: %s\n", topic, mosquitto_strerror(rc));
}
static void respond(const struct dev *d, const struct cmd *c, const char *status, const char *error_code, const char *message) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "{%s%s%s\"status\":\"%s\",\"command\":%s", c->txn[0] ? "\"transaction\":" : "",
                     c->txn, c->txn[0] ? "," : "", status, cmd_json(c->value));
    if (error_code)
        n += snprintf(buf + n, sizeof buf - n, ",\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", error_code, message);
    else
        n += snprintf(buf + n, sizeof buf - n,
                      ",\"data\":{\"id\":1,\"status\":0,\"name\":\"set_shutter\",\"status_name\":\"success\"}}");
    publish(d->resp_topic, buf, n, 0);
}
/* the device state: what the answer changed plus `last_seen` (its text cached per second, as the bridge does) */
static int state_json(char *buf, size_t cap, int shutter) {
    static time_t last;
    static char stamp[32];
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    if (t.tv_sec != last) {
        struct tm tm;
        gmtime_r(&t.tv_sec, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        last = t.tv_sec;
    }
    return snprintf(buf, cap,
                    "{\"hardware\":{\"model_number\":62,\"model_name\":\"HERO12 Black\",\"firmware_version\":"
                    "\"H23.01.01.99.56\",\"serial_number\":\"C3501324501234\"},\"shutter\":%s,\"last_seen\":\"%s\"}",
                    shutter ? "true" : "false", stamp);
}

/* ------------------------------------------------------------------ the command path */
static void send_write(struct dev *d, const struct cmd *c) {
    DBusMessage *m = dbus_message_new_method_call("org.bluez", d->wpath, CHR1, "WriteValue");
    unsigned char v[4] = {0x03, 0x01, 0x01, c->value ? 0x01 : 0x00};   /* GoPro TLV: len 3, id 01, param len 1, value */
    const unsigned char *pv = v;
    const char *k = "type", *val = "request";
    DBusMessageIter it, arr, dict, entry, var;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "y", &arr);
    dbus_message_iter_append_fixed_array(&arr, DBUS_TYPE_BYTE, &pv, 4);
    dbus_message_iter_close_container(&it, &arr);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
    dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &k);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "s", &var);
    dbus_message_iter_append_basic(&var, DBUS_TYPE_STRING, &val);
    dbus_message_iter_close_container(&entry, &var);
    dbus_message_iter_close_container(&dict, &entry);
    dbus_message_iter_close_container(&it, &dict);
    /* libdbus writes a message at once when the socket takes it (no poll; its write watch stays off) */
    if (!dbus_connection_send(bus, m, &d->cur_serial)) die("dbus send: out of memory");
    dbus_message_unref(m);
}
static void dispatch(struct dev *d, struct cmd *c) {
    /* at most once: the outbox says `sent` before the device gets the first byte */
    if (c->stored) {
        sqlite3_bind_text(st_upd, 1, "sent", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st_upd, 2, c->oid);
        step(st_upd);
    } else {
        outbox_insert(d, c, "sent");
    }
    n_commits++;
    d->cur = *c;
    d->busy = d->await_return = d->await_answer = 1;
    d->cur_started = mono_now();
    send_write(d, &d->cur);
}
static void next_command(struct dev *d) {
    d->busy = 0;
    if (!d->qlen || stopping) return;
    struct cmd c = d->queue[d->qhead];
    d->qhead = (d->qhead + 1) % QCAP;
    d->qlen--;
    if (!c.stored) d->qunstored--;
    dispatch(d, &c);
}
/* the command under way ended: its store writes in one commit, then its response (and state) */
static void finish(struct dev *d, int ok, const char *code, const char *message) {
    if (ok && with_state) {
        char st[512];
        int n = state_json(st, sizeof st, d->cur.value);
        step(st_begin);
        sqlite3_bind_int64(st_del, 1, d->cur.oid);
        step(st_del);
        sqlite3_bind_text(st_ups, 1, d->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st_ups, 2, st, n, SQLITE_STATIC);
        sqlite3_bind_double(st_ups, 3, wall_now());
        step(st_ups);
        step(st_commit);
        n_commits++;
        respond(d, &d->cur, "ok", NULL, NULL);
        publish(d->state_topic, st, n, 1);
    } else {
        sqlite3_bind_int64(st_del, 1, d->cur.oid);
        step(st_del);
        n_commits++;
        respond(d, &d->cur, ok ? "ok" : "error", code, message);
    }
    if (ok) n_ok++;
    else n_err++;
}
/* the end of a loop turn: commands that wait are stored `queued`, all of this turn's in one commit */
static void store_waiting(void) {
    int any = 0;
    for (int k = 0; k < ndev; k++) any |= devs[k].qunstored != 0;
    if (!any) return;
    step(st_begin);
    for (int k = 0; k < ndev; k++) {
        struct dev *d = &devs[k];
        for (unsigned i = 0, j = d->qhead; i < d->qlen; i++, j = (j + 1) % QCAP)
            if (!d->queue[j].stored) {
                outbox_insert(d, &d->queue[j], "queued");
                d->queue[j].stored = 1;
            }
        d->qunstored = 0;
    }
    step(st_commit);
    n_commits++;
}

/* minimal JSON: the value of top-level member `key` of the object in [p, end) (pointer, length) */
static const char *skip_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}
static const char *skip_string(const char *p, const char *e) {   /* p at the opening quote */
    for (p++; p < e; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}
static const char *skip_value(const char *p, const char *e) {
    if (p >= e) return NULL;
    if (*p == '"') return skip_string(p, e);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < e) {
            if (*p == '"') {
                if (!(p = skip_string(p, e))) return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') p++;
    return p;
}
static const char *json_member(const char *p, const char *e, const char *key, size_t *len) {
    size_t klen = strlen(key);
    p = skip_ws(p, e);
    if (p >= e || *p != '{') return NULL;
    p++;
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"') return NULL;
        const char *k = p + 1, *ke = skip_string(p, e);
        if (!ke) return NULL;
        p = skip_ws(ke, e);
        if (p >= e || *p != ':') return NULL;
        const char *v = skip_ws(p + 1, e), *ve = skip_value(v, e);
        if (!ve) return NULL;
        if ((size_t)(ke - 1 - k) == klen && memcmp(k, key, klen) == 0) {
            *len = (size_t)(ve - v);
            return v;
        }
        p = skip_ws(ve, e);
        if (p < e && *p == ',') {
            p++;
            continue;
        }
        return NULL;
    }
}
static void on_command(struct dev *d, const char *payload, int len) {
    const char *e = payload + len, *v;
    size_t n;
    struct cmd c = {0};
    n_cmds++;
    if ((v = json_member(payload, e, "transaction", &n)) && n < sizeof c.txn) {
        memcpy(c.txn, v, n);
        c.txn[n] = 0;
    }
    c.value = 1;
    v = json_member(payload, e, "command", &n);
    if (!v || n != 13 || memcmp(v, "\"set_shutter\"", 13) != 0) {
        respond(d, &c, "error", "unknown_command", "the floor knows set_shutter only");
        n_err++;
        return;
    }
    v = json_member(payload, e, "value", &n);
    if (v && n == 4 && memcmp(v, "true", 4) == 0) c.value = 1;
    else if (v && n == 5 && memcmp(v, "false", 5) == 0) c.value = 0;
    else {
        respond(d, &c, "error", "invalid_value", "set_shutter needs a boolean value");
        n_err++;
        return;
    }
    c.oid = next_oid++;
    if (!d->busy && !d->qlen && !stopping) {
        dispatch(d, &c);                               /* goes out at once: `sent` in one commit */
        return;
    }
    if (d->qlen == QCAP) {
        respond(d, &c, "error", "queue_full", "too many commands waiting");
        n_err++;
        return;
    }
    d->queue[(d->qhead + d->qlen) % QCAP] = c;         /* stored `queued` at the end of this turn */
    d->qlen++;
    d->qunstored++;
}

/* ------------------------------------------------------------------ libmosquitto callbacks */
static void on_connect(struct mosquitto *m, void *ud, int rc, int flags, const mosquitto_property *props) {
    (void)ud; (void)flags; (void)props;
    if (rc) die("MQTT connect refused: %s", mosquitto_reason_string(rc));
    mq_connected = 1;
    mosquitto_subscribe(m, NULL, set_topic, 1);
}
static void on_subscribe(struct mosquitto *m, void *ud, int mid, int n, const int *q) {
    (void)m; (void)ud; (void)mid; (void)n; (void)q;
    mq_subscribed = 1;
}
static void on_message(struct mosquitto *m, void *ud, const struct mosquitto_message *msg) {
    (void)m; (void)ud;
    if (msg->retain) return;                            /* retained /set messages are ignored */
    /* <base>/<device>/set, for one of the devices served */
    size_t bl = strlen(base), tl = strlen(msg->topic);
    if (tl <= bl + 5 || memcmp(msg->topic, base, bl) != 0 || msg->topic[bl] != '/' ||
        strcmp(msg->topic + tl - 4, "/set") != 0)
        return;
    size_t dl = tl - bl - 5;
    for (int k = 0; k < ndev; k++)
        if (strlen(devs[k].id) == dl && memcmp(msg->topic + bl + 1, devs[k].id, dl) == 0) {
            on_command(&devs[k], msg->payload, msg->payloadlen);
            return;
        }
}

/* ------------------------------------------------------------------ D-Bus on the loop */
#define MAXW 4
static DBusWatch *watches[MAXW];
static int nwatches;
static void dbus_update_epoll(void) {
    uint32_t ev = 0;
    int fd = -1;
    for (int i = 0; i < nwatches; i++) {
        if (!dbus_watch_get_enabled(watches[i])) continue;
        unsigned fl = dbus_watch_get_flags(watches[i]);
        fd = dbus_watch_get_unix_fd(watches[i]);
        if (fl & DBUS_WATCH_READABLE) ev |= EPOLLIN;
        if (fl & DBUS_WATCH_WRITABLE) ev |= EPOLLOUT;
    }
    if (fd < 0) fd = dbus_fd;
    if (fd < 0 || ev == dbus_events) return;
    struct epoll_event e = {.events = ev, .data.u32 = TAG_DBUS};
    if (dbus_events == 0 && ev) epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    else if (ev == 0) epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    else epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
    dbus_fd = fd;
    dbus_events = ev;
}
static dbus_bool_t add_watch(DBusWatch *w, void *d) {
    (void)d;
    if (nwatches == MAXW) return FALSE;
    watches[nwatches++] = w;
    dbus_update_epoll();
    return TRUE;
}
static void remove_watch(DBusWatch *w, void *d) {
    (void)d;
    for (int i = 0; i < nwatches; i++)
        if (watches[i] == w) {
            watches[i] = watches[--nwatches];
            break;
        }
    dbus_update_epoll();
}
static void toggle_watch(DBusWatch *w, void *d) {
    (void)w; (void)d;
    dbus_update_epoll();
}
static void dbus_ready(uint32_t ev) {
    DBusWatch *ws[MAXW];
    int n = nwatches;
    memcpy(ws, watches, sizeof ws);
    for (int i = 0; i < n; i++) {
        if (!dbus_watch_get_enabled(ws[i])) continue;
        unsigned fl = dbus_watch_get_flags(ws[i]), f = 0;
        if ((ev & EPOLLIN) && (fl & DBUS_WATCH_READABLE)) f |= DBUS_WATCH_READABLE;
        if ((ev & EPOLLOUT) && (fl & DBUS_WATCH_WRITABLE)) f |= DBUS_WATCH_WRITABLE;
        if (ev & EPOLLHUP) f |= DBUS_WATCH_HANGUP;
        if (ev & EPOLLERR) f |= DBUS_WATCH_ERROR;
        if (f) dbus_watch_handle(ws[i], f);
    }
    while (dbus_connection_dispatch(bus) == DBUS_DISPATCH_DATA_REMAINS) {}
}
/* the method return (or error) of the WriteValue under way */
static DBusHandlerResult filter(DBusConnection *c, DBusMessage *m, void *data) {
    (void)c; (void)data;
    int t = dbus_message_get_type(m);
    if (t != DBUS_MESSAGE_TYPE_METHOD_RETURN && t != DBUS_MESSAGE_TYPE_ERROR) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    dbus_uint32_t serial = dbus_message_get_reply_serial(m);
    struct dev *d = NULL;
    for (int k = 0; k < ndev && !d; k++)
        if (devs[k].busy && devs[k].await_return && devs[k].cur_serial == serial) d = &devs[k];
    if (!d) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    d->await_return = 0;
    if (t == DBUS_MESSAGE_TYPE_ERROR && d->await_answer) {
        d->await_answer = 0;
        logv("WriteValue failed: %s", dbus_message_get_error_name(m));
        finish(d, 0, "ble_error", "WriteValue failed");
    }
    if (!d->await_answer) next_command(d);             /* one GATT operation in flight */
    return DBUS_HANDLER_RESULT_HANDLED;
}

/* ------------------------------------------------------------------ the AcquireNotify socket */
static void notify_ready(struct dev *d) {
    unsigned char b[520];
    ssize_t n = recv(d->nfd, b, sizeof b, MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        die("notify socket: %s", strerror(errno));
    }
    if (n == 0) die("notify socket closed by BlueZ (link lost)");
    /* GoPro general header (5-bit length), one packet: [len, id, status, ...] */
    if (n < 3 || (b[0] & 0x80) || ((b[0] >> 5) & 3) != 0 || (b[0] & 0x1f) < 2) return;
    if (!d->busy || !d->await_answer || b[1] != 0x01) return;   /* not the answer of set_shutter (id 0x01) */
    d->await_answer = 0;
    if (b[2] == 0) finish(d, 1, NULL, NULL);
    else finish(d, 0, "device_error", "the camera answered an error status");
    if (!d->await_return) next_command(d);
}

/* ------------------------------------------------------------------ start-up (blocking) */
static DBusMessage *call(DBusMessage *m, int timeout_ms, char *errname, size_t errcap) {
    DBusError err;
    dbus_error_init(&err);
    DBusMessage *r = dbus_connection_send_with_reply_and_block(bus, m, timeout_ms, &err);
    dbus_message_unref(m);
    if (!r) {
        if (errname) snprintf(errname, errcap, "%s: %s", err.name, err.message);
        logv("call failed: %s: %s", err.name, err.message);
        dbus_error_free(&err);
    }
    return r;
}
static int get_bool_prop(const char *path, const char *iface, const char *prop, int *out) {
    DBusMessage *m = dbus_message_new_method_call("org.bluez", path, "org.freedesktop.DBus.Properties", "Get");
    dbus_message_append_args(m, DBUS_TYPE_STRING, &iface, DBUS_TYPE_STRING, &prop, DBUS_TYPE_INVALID);
    DBusMessage *r = call(m, 5000, NULL, 0);
    if (!r) return 0;
    DBusMessageIter it, var;
    int ok = 0;
    if (dbus_message_iter_init(r, &it) && dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_VARIANT) {
        dbus_message_iter_recurse(&it, &var);
        if (dbus_message_iter_get_arg_type(&var) == DBUS_TYPE_BOOLEAN) {
            dbus_bool_t b;
            dbus_message_iter_get_basic(&var, &b);
            *out = b;
            ok = 1;
        } else if (out) {
            *out = 1;                                  /* exists (any type) */
            ok = 1;
        }
    }
    dbus_message_unref(r);
    return ok;
}
static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}
static int simple_call(const char *path, const char *iface, const char *member, int timeout_ms, char *err, size_t cap) {
    DBusMessage *r = call(dbus_message_new_method_call("org.bluez", path, iface, member), timeout_ms, err, cap);
    if (r) dbus_message_unref(r);
    return r != NULL;
}
/* GetManagedObjects once: the paths of GP-0072 and GP-0073 under each device */
static void find_characteristics(void) {
    DBusMessage *r = call(dbus_message_new_method_call("org.bluez", "/", "org.freedesktop.DBus.ObjectManager",
                                                       "GetManagedObjects"), 10000, NULL, 0);
    if (!r) die("GetManagedObjects failed");
    DBusMessageIter it, objs, obj, ifs, ifc, props, prop, var;
    dbus_message_iter_init(r, &it);
    dbus_message_iter_recurse(&it, &objs);
    for (; dbus_message_iter_get_arg_type(&objs) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&objs)) {
        const char *path;
        dbus_message_iter_recurse(&objs, &obj);
        dbus_message_iter_get_basic(&obj, &path);
        struct dev *d = NULL;
        for (int k = 0; k < ndev && !d; k++) {
            size_t dl = strlen(devs[k].devpath);
            if (strncmp(path, devs[k].devpath, dl) == 0 && path[dl] == '/') d = &devs[k];
        }
        if (!d) continue;
        dbus_message_iter_next(&obj);
        dbus_message_iter_recurse(&obj, &ifs);
        for (; dbus_message_iter_get_arg_type(&ifs) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&ifs)) {
            const char *name;
            dbus_message_iter_recurse(&ifs, &ifc);
            dbus_message_iter_get_basic(&ifc, &name);
            if (strcmp(name, CHR1) != 0) continue;
            dbus_message_iter_next(&ifc);
            dbus_message_iter_recurse(&ifc, &props);
            for (; dbus_message_iter_get_arg_type(&props) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&props)) {
                const char *pn, *uuid;
                dbus_message_iter_recurse(&props, &prop);
                dbus_message_iter_get_basic(&prop, &pn);
                if (strcmp(pn, "UUID") != 0) continue;
                dbus_message_iter_next(&prop);
                dbus_message_iter_recurse(&prop, &var);
                if (dbus_message_iter_get_arg_type(&var) != DBUS_TYPE_STRING) continue;
                dbus_message_iter_get_basic(&var, &uuid);
                if (strcasecmp(uuid, GP_CMD) == 0) snprintf(d->wpath, sizeof d->wpath, "%s", path);
                if (strcasecmp(uuid, GP_CMD_RSP) == 0) snprintf(d->npath, sizeof d->npath, "%s", path);
            }
        }
    }
    dbus_message_unref(r);
    for (int k = 0; k < ndev; k++) {
        if (!devs[k].wpath[0] || !devs[k].npath[0]) die("GP-0072/GP-0073 not found under %s", devs[k].devpath);
        logv("%s: GP-0072 %s, GP-0073 %s", devs[k].id, devs[k].wpath, devs[k].npath);
    }
}
/* one device: its object (known already, else discovered), connected, services resolved */
static void connect_device(struct dev *d, const char *apath) {
    char a[32], e[512];
    snprintf(a, sizeof a, "%s", d->address);
    for (char *p = a; *p; p++)
        if (*p == ':') *p = '_';
    snprintf(d->devpath, sizeof d->devpath, "%s/dev_%s", apath, a);
    int exists = 0, discovering = 0;
    double until = mono_now() + 30;
    while (!get_bool_prop(d->devpath, "org.bluez.Device1", "Address", &exists)) {
        if (!discovering) {
            if (!simple_call(apath, "org.bluez.Adapter1", "StartDiscovery", 5000, e, sizeof e)) die("StartDiscovery: %s", e);
            discovering = 1;
        }
        if (mono_now() > until) die("%s not found within 30 s", d->address);
        sleep_ms(50);
    }
    if (discovering) simple_call(apath, "org.bluez.Adapter1", "StopDiscovery", 5000, NULL, 0);
    /* connect (retried while BlueZ says a connect or disconnect is under way) */
    until = mono_now() + 30;
    while (!simple_call(d->devpath, "org.bluez.Device1", "Connect", 30000, e, sizeof e)) {
        if (mono_now() > until) die("Connect %s: %s", d->address, e);
        sleep_ms(200);
    }
    int resolved = 0;
    until = mono_now() + 15;
    while (!(get_bool_prop(d->devpath, "org.bluez.Device1", "ServicesResolved", &resolved) && resolved)) {
        if (mono_now() > until) die("ServicesResolved did not come for %s", d->address);
        sleep_ms(20);
    }
}
/* AcquireNotify on the device's GP-0073 (retried: a previous client's socket may still be releasing) */
static void acquire_notify(struct dev *d) {
    DBusError err;
    dbus_error_init(&err);
    char e[512];
    double until = mono_now() + 10;
    for (;;) {
        DBusMessage *m = dbus_message_new_method_call("org.bluez", d->npath, CHR1, "AcquireNotify");
        DBusMessageIter it, dict;
        dbus_message_iter_init_append(m, &it);
        dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{sv}", &dict);
        dbus_message_iter_close_container(&it, &dict);
        DBusMessage *r = call(m, 10000, e, sizeof e);
        if (r) {
            int fd = -1;
            dbus_uint16_t mtu = 0;
            if (!dbus_message_get_args(r, &err, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID))
                die("AcquireNotify answered %s", dbus_message_get_signature(r));
            dbus_message_unref(r);
            d->nfd = fd;                               /* our own duplicate */
            fcntl(d->nfd, F_SETFL, fcntl(d->nfd, F_GETFL) | O_NONBLOCK);
            logv("%s: AcquireNotify: fd %d, MTU %u", d->id, d->nfd, mtu);
            return;
        }
        if (mono_now() > until) die("AcquireNotify %s: %s", d->id, e);
        sleep_ms(100);
    }
}
static void ble_start(void) {
    DBusError err;
    dbus_error_init(&err);
    bus = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err);
    if (!bus) die("D-Bus: %s", err.message);
    dbus_connection_set_exit_on_disconnect(bus, FALSE);
    char apath[64];
    snprintf(apath, sizeof apath, "/org/bluez/%s", adapter);
    for (int k = 0; k < ndev; k++) connect_device(&devs[k], apath);
    find_characteristics();
    for (int k = 0; k < ndev; k++) acquire_notify(&devs[k]);
}
static void mqtt_start(void) {
    char id[64];
    snprintf(id, sizeof id, "gatt2mqtt-floor-%d", (int)getpid());
    mosquitto_lib_init();
    mq = mosquitto_new(id, true, NULL);
    if (!mq) die("mosquitto_new failed");
    mosquitto_int_option(mq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(mq, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_v5_callback_set(mq, on_connect);
    mosquitto_subscribe_callback_set(mq, on_subscribe);
    mosquitto_message_callback_set(mq, on_message);
    const char *off = "{\"state\":\"offline\"}";
    mosquitto_will_set(mq, bridge_topic, (int)strlen(off), off, 1, true);
    int rc = mosquitto_connect(mq, host, port, 30);
    if (rc) die("MQTT connect to %s:%d: %s", host, port, mosquitto_strerror(rc));
    double until = mono_now() + 15;
    while (!mq_subscribed) {                           /* CONNACK, SUBACK: libmosquitto's own loop, once */
        rc = mosquitto_loop(mq, 100, 1);
        if (rc) die("MQTT: %s", mosquitto_strerror(rc));
        if (mono_now() > until) die("MQTT: no SUBACK");
    }
    mq_fd = mosquitto_socket(mq);
    const char *on = "{\"state\":\"online\"}";
    publish(bridge_topic, on, (int)strlen(on), 1);
    for (int k = 0; k < ndev; k++) publish(devs[k].avail_topic, on, (int)strlen(on), 1);
}

/* ------------------------------------------------------------------ main */
static void on_signal(int s) {
    (void)s;
    stopping = 1;
}

int main(int argc, char **argv) {
    int o;
    while ((o = getopt(argc, argv, "H:p:b:n:a:i:d:s:v")) != -1) {
        switch (o) {
        case 'H': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'b': base = optarg; break;
        case 'n': devids = optarg; break;
        case 'a': addresses = optarg; break;
        case 'i': adapter = optarg; break;
        case 'd': dbpath = optarg; break;
        case 's': with_state = atoi(optarg); break;
        case 'v': verbose = 1; break;
        default: fprintf(stderr, "usage: see the header of floor_bridge.c\n"); return 2;
        }
    }
    /* -n a,b,… and -a A,B,…: as many ids as addresses, at most MAXDEV */
    for (const char *i = devids, *a = addresses; i && a; ndev++) {
        if (ndev == MAXDEV) die("at most %d devices", MAXDEV);
        struct dev *d = &devs[ndev];
        size_t il = strcspn(i, ","), al = strcspn(a, ",");
        if (il == 0 || il >= sizeof d->id || al == 0 || al >= sizeof d->address) die("bad -n/-a lists");
        memcpy(d->id, i, il);
        memcpy(d->address, a, al);
        d->nfd = -1;
        snprintf(d->resp_topic, sizeof d->resp_topic, "%s/%s/response", base, d->id);
        snprintf(d->state_topic, sizeof d->state_topic, "%s/%s", base, d->id);
        snprintf(d->avail_topic, sizeof d->avail_topic, "%s/%s/availability", base, d->id);
        i = i[il] ? i + il + 1 : NULL;
        a = a[al] ? a + al + 1 : NULL;
        if (!i != !a) die("-n and -a name different numbers of devices");
    }
    snprintf(set_topic, sizeof set_topic, "%s/+/set", base);
    snprintf(bridge_topic, sizeof bridge_topic, "%s/bridge/state", base);
    struct sigaction sa = {.sa_handler = on_signal};   /* no SA_RESTART: epoll_wait returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ble_start();
    db_open();
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e;
    for (int k = 0; k < ndev; k++) {
        e = (struct epoll_event){.events = EPOLLIN, .data.u32 = TAG_NOTIFY + (uint32_t)k};
        epoll_ctl(ep, EPOLL_CTL_ADD, devs[k].nfd, &e);
    }
    dbus_connection_add_filter(bus, filter, NULL, NULL);
    if (!dbus_connection_set_watch_functions(bus, add_watch, remove_watch, toggle_watch, NULL, NULL))
        die("dbus watch functions");
    while (dbus_connection_dispatch(bus) == DBUS_DISPATCH_DATA_REMAINS) {}   /* NameAcquired etc. */
    mqtt_start();
    e = (struct epoll_event){.events = EPOLLIN, .data.u32 = TAG_MQTT};
    epoll_ctl(ep, EPOLL_CTL_ADD, mq_fd, &e);
    int mq_out = 0;                                    /* EPOLLOUT asked for on the MQTT socket */
    printf("READY floor_bridge %d device(s), %s -> %s (state per command: %s)\n", ndev, devs[0].address, devs[0].wpath,
           with_state ? "yes" : "no");
    fflush(stdout);

    double last_misc = mono_now();
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    while (!stopping) {
        /* end of the turn: what waits is stored; queued MQTT packets (publishes made inside
         * libmosquitto's callbacks) are written */
        store_waiting();
        if (mosquitto_want_write(mq)) mosquitto_loop_write(mq, 1);
        int want_out = mosquitto_want_write(mq);
        if (want_out != mq_out) {
            e = (struct epoll_event){.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.u32 = TAG_MQTT};
            epoll_ctl(ep, EPOLL_CTL_MOD, mq_fd, &e);
            mq_out = want_out;
        }
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, 1000);
        n_wakeups++;
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            n_events++;
            switch (evs[i].data.u32) {
            case TAG_MQTT:
                if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                    int rc = mosquitto_loop_read(mq, 1);
                    if (rc != MOSQ_ERR_SUCCESS && !stopping) die("MQTT read: %s", mosquitto_strerror(rc));
                }
                if (evs[i].events & EPOLLOUT) mosquitto_loop_write(mq, 1);
                break;
            case TAG_DBUS: dbus_ready(evs[i].events); break;
            default: notify_ready(&devs[evs[i].data.u32 - TAG_NOTIFY]); break;
            }
        }
        double now = mono_now();
        if (now - last_misc >= 1.0) {                  /* keep-alive (PINGREQ) */
            mosquitto_loop_misc(mq);
            if (!dbus_connection_get_is_connected(bus)) die("D-Bus connection lost");
            for (int k = 0; k < ndev; k++) {
                struct dev *d = &devs[k];
                if (d->busy && now - d->cur_started > 5.0) { /* no answer (or no method return) in 5 s */
                    if (d->await_answer) finish(d, 0, "timeout", "no answer from the camera within 5 s");
                    d->await_answer = d->await_return = 0;
                    next_command(d);
                }
            }
            last_misc = now;
        }
    }

    /* stop: counters, availability offline, MQTT disconnect, the device disconnected */
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    double ut = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6;
    double stt = (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    uint64_t c = n_cmds ? n_cmds : 1;
    fprintf(stderr,
            "floor_bridge: %llu commands (%llu ok, %llu error), %llu loop wake-ups (%.2f per command), %llu events, "
            "%llu commits (%.2f per command); user %.3f s, sys %.3f s (%.1f + %.1f us per command, getrusage); "
            "context switches %ld voluntary, %ld involuntary (%.2f per command)\n",
            (unsigned long long)n_cmds, (unsigned long long)n_ok, (unsigned long long)n_err,
            (unsigned long long)n_wakeups, (double)n_wakeups / c, (unsigned long long)n_events,
            (unsigned long long)n_commits, (double)n_commits / c, ut, stt, ut * 1e6 / c, stt * 1e6 / c,
            ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw,
            (double)(ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw) / c);
    const char *off = "{\"state\":\"offline\"}";
    for (int k = 0; k < ndev; k++) publish(devs[k].avail_topic, off, (int)strlen(off), 1);
    publish(bridge_topic, off, (int)strlen(off), 1);
    for (int i = 0; i < 20 && mosquitto_want_write(mq); i++) mosquitto_loop_write(mq, 1);
    mosquitto_disconnect(mq);
    mosquitto_loop_write(mq, 1);
    dbus_connection_set_watch_functions(bus, NULL, NULL, NULL, NULL, NULL);
    for (int k = 0; k < ndev; k++) {
        close(devs[k].nfd);
        simple_call(devs[k].devpath, "org.bluez.Device1", "Disconnect", 5000, NULL, 0);
    }
    sqlite3_close_v2(db);
    mosquitto_destroy(mq);
    mosquitto_lib_cleanup();
    return 0;
}
