// MQTTClient benchmark: the same two measurements as ../mqtt_bench.c, through the Swift
// wrapper (continuations, copied payloads). Run via ../run.sh.
//   mqtt-bench PORT ROUNDTRIPS MESSAGES
// The clients run on one Reactor.EventLoop and so do the benchmark's tasks
// (withTaskExecutorPreference), as in the bridge. Besides latency and throughput it prints the
// process's CPU time (getrusage: user + system) and context switches per round trip and per
// message.
import Foundation
import Mosquitto
import Reactor

let arguments = CommandLine.arguments
guard arguments.count >= 4, let port = Int(arguments[1]), let rounds = Int(arguments[2]),
    let messages = Int(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: mqtt-bench PORT ROUNDTRIPS MESSAGES\n".utf8))
    exit(2)
}
let loop = EventLoop(name: "mqtt-bench")
let label = "swift".padding(toLength: 13, withPad: " ", startingAt: 0)

func makeClient() throws -> MQTTClient {
    try MQTTClient(options: options(), loop: loop)
}

/// CPU time (user + system) in microseconds and context switches (voluntary + involuntary) of
/// the whole process so far.
func usage() -> (cpu: Double, switches: Int) {
    var u = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u)
    let cpu = Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec)
    return (cpu, u.ru_nvcsw + u.ru_nivcsw)
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
    let latencyClient = try makeClient()
    try await latencyClient.connect()
    let echo = try await latencyClient.subscribe("bench/lat", qos: .atLeastOnce)
    var iterator = echo.makeAsyncIterator()
    var samples: [Double] = []
    samples.reserveCapacity(rounds)
    var before = usage()
    for i in -200..<rounds {  // 200 warm-up round trips
        if i == 0 { before = usage() }
        let start = clock.now
        try await latencyClient.publish(topic: "bench/lat", payload: payload, qos: .atMostOnce)
        guard await iterator.next() != nil else { fatalError("subscription ended") }
        if i >= 0 { samples.append(microseconds(clock.now - start)) }
    }
    let after = usage()
    samples.sort()
    print(label + String(format: "latency  QoS0 round trip  p50 %8.1f us  p99 %8.1f us  (%d)  cpu %6.1f us  %4.1f cs per round trip",
                 samples[rounds / 2], samples[rounds * 99 / 100], rounds,
                 (after.cpu - before.cpu) / Double(rounds), Double(after.switches - before.switches) / Double(rounds)))
    await latencyClient.disconnect()
}

/// Throughput: 100 publishers in flight at QoS 1, one subscriber.
func throughput() async throws {
    let subscriber = try makeClient()
    try await subscriber.connect()
    let publisher = try makeClient()
    try await publisher.connect()
    let stream = try await subscriber.subscribe("bench/tp", qos: .atLeastOnce)
    let before = usage()
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
    let after = usage()
    print(label + String(format: "throughput QoS1 window 100  %10.0f msg/s  (%d in %.2f s)  cpu %6.1f us  %4.2f cs per message",
                 Double(received) / seconds, received, seconds,
                 (after.cpu - before.cpu) / Double(received), Double(after.switches - before.switches) / Double(received)))
    await publisher.disconnect()
    await subscriber.disconnect()
}

try await withTaskExecutorPreference(loop) {
    try await latency()
    try await throughput()
}
loop.shutdown()
