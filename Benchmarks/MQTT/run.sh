#!/usr/bin/env bash
# MQTT wrapper overhead: the same latency and throughput runs through libmosquitto from C and
# through MQTTClient (on a Reactor.EventLoop), against one local mosquitto (started here on a
# free loopback port and stopped by pid). The two run REPEAT times (default 3), interleaved, to
# expose noise. Each prints CPU time and context switches of
# its process per round trip / per message (getrusage).
#   Benchmarks/MQTT/run.sh [ROUNDTRIPS] [MESSAGES]
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5000}
messages=${2:-100000}
work=$(mktemp -d)
broker=""
cleanup() { [ -n "$broker" ] && kill "$broker" 2>/dev/null && wait "$broker" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
user root
persistence false
max_queued_messages 0
max_inflight_messages 100
log_dest none
CONF
mosquitto -c "$work/mosquitto.conf" & broker=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
cc -O2 -o "$work/mqtt_bench" mqtt_bench.c -lmosquitto -lpthread
swift build -c release --package-path .. --product mqtt-bench >/dev/null
bin=$(swift build -c release --package-path .. --show-bin-path)
for _ in $(seq "${REPEAT:-3}"); do
  "$work/mqtt_bench" "$port" "$rounds" "$messages"
  "$bin/mqtt-bench" "$port" "$rounds" "$messages" 2>/dev/null
done
