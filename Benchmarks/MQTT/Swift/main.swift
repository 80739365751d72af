// MQTTClient benchmark: the same two measurements as ../mqtt_bench.c, through the Swift
// wrapper (its own network thread, continuations, copied payloads). Run via ../run.sh.
//   mqtt-bench PORT ROUNDTRIPS MESSAGES
import Foundation
import Mosquitto

let arguments = CommandLine.arguments
guard arguments.count >= 4, let port = Int(arguments[1]), let rounds = Int(arguments[2]),
    let messages = Int(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: mqtt-bench PORT ROUNDTRIPS MESSAGES\n".utf8))
    exit(2)
}
let payload = Array("0123456789abcdef".utf8)
let clock = ContinuousClock()

func options() -> MQTTConnectOptions {
    var options = MQTTConnectOptions(host: "127.0.0.1", port: port)
    options.maxInflightMessages = 100
    options.inboundBufferLimit = 100_000
    return options
}

func microseconds(_ d: Duration) -> Double {
    Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
}

/// Latency: publish QoS 0 and wait until it comes back through the broker.
func latency() async throws {
    let latencyClient = try MQTTClient(options: options())
    try await latencyClient.connect()
    let echo = try await latencyClient.subscribe("bench/lat", qos: .atLeastOnce)
    var iterator = echo.makeAsyncIterator()
    var samples: [Double] = []
    samples.reserveCapacity(rounds)
    for i in -200..<rounds {  // 200 warm-up round trips
        let start = clock.now
        try await latencyClient.publish(topic: "bench/lat", payload: payload, qos: .atMostOnce)
        guard await iterator.next() != nil else { fatalError("subscription ended") }
        if i >= 0 { samples.append(microseconds(clock.now - start)) }
    }
    samples.sort()
    print(String(format: "swift  latency  QoS0 round trip  p50 %8.1f us  p99 %8.1f us  (%d)",
                 samples[rounds / 2], samples[rounds * 99 / 100], rounds))
    await latencyClient.disconnect()
}

/// Throughput: 100 publishers in flight at QoS 1, one subscriber.
func throughput() async throws {
    let subscriber = try MQTTClient(options: options())
    try await subscriber.connect()
    let publisher = try MQTTClient(options: options())
    try await publisher.connect()
    let stream = try await subscriber.subscribe("bench/tp", qos: .atLeastOnce)
    let start = clock.now
    async let count: Int = {
        var n = 0
        for await _ in stream {
            n += 1
            if n == messages { break }
        }
        return n
    }()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<100 {
            group.addTask {
                for _ in stride(from: worker, to: messages, by: 100) {
                    try await publisher.publish(topic: "bench/tp", payload: payload, qos: .atLeastOnce)
                }
            }
        }
        try await group.waitForAll()
    }
    let received = await count
    let seconds = microseconds(clock.now - start) / 1e6
    print(String(format: "swift  throughput QoS1 window 100  %10.0f msg/s  (%d in %.2f s)",
                 Double(received) / seconds, received, seconds))
    await publisher.disconnect()
    await subscriber.disconnect()
}

try await latency()
try await throughput()
