# gatt2mqtt in a container (shared/spec/bridge.md point 8: least privilege).
#
#   docker build -t gatt2mqtt .
#   docker compose up -d            # see docker-compose.yml and docs/configuration.md "Container"
#
# The bridge only talks D-Bus to the host's bluetoothd and TCP to the broker: it needs the host's
# system bus socket, no privileged mode, no capabilities, no /dev. Not built in CI here (no Docker
# engine on the development machine): see docs/configuration.md.

ARG SWIFT_VERSION=6.3.1

# --- build: the official Swift image on Debian 12 -------------------------------------------
FROM swift:${SWIFT_VERSION}-bookworm AS build
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends libmosquitto-dev libdbus-1-dev libsqlite3-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# scripts/build-release: the Swift runtime and Foundation linked statically, hot functions first
# (lld order file), packed relocations (glibc >= 2.36, as in bookworm); docs/benchmarks.md
# "Memory". The C libraries stay shared and come from Debian in the runtime stage.
RUN scripts/build-release \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/gatt2mqtt" /out/gatt2mqtt

# --- run: Debian 12 slim with the three C libraries ------------------------------------------
FROM debian:bookworm-slim
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends libmosquitto1 libdbus-1-3 libsqlite3-0 libstdc++6 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin gatt2mqtt \
    && mkdir -p /config /data \
    && chown gatt2mqtt:gatt2mqtt /data \
    && chmod 0700 /data
COPY --from=build /out/gatt2mqtt /usr/local/bin/gatt2mqtt
COPY config/gatt2mqtt.yaml /config/gatt2mqtt.yaml
# The host's system bus (mount /run/dbus); state in the /data volume; no crash backtraces to a tty.
ENV DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket \
    GATT2MQTT_DATABASE_PATH=/data/gatt2mqtt.sqlite \
    SWIFT_BACKTRACE=enable=no
USER gatt2mqtt
WORKDIR /data
VOLUME ["/data"]
STOPSIGNAL SIGTERM
# Asks the running bridge over MQTT (bridge/request/health_check, same config and environment as
# run): unhealthy when it does not answer "healthy": true within 10 s (docs/configuration.md
# "Container"). Needs mqtt.api full or read_only.
HEALTHCHECK --interval=60s --timeout=15s --start-period=30s --retries=3 \
    CMD ["gatt2mqtt","health","--config","/config/gatt2mqtt.yaml"]
ENTRYPOINT ["gatt2mqtt","run","--config","/config/gatt2mqtt.yaml"]
