import Foundation
import Mosquitto
import Reactor
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Loop mode's own behaviour (docs/mqtt.md "Loop mode"), against a real mosquitto. The
/// behaviours both modes share run in both modes in `MQTTBrokerTests`.
@Suite(.serialized) struct MQTTEventLoopTests {
    /// Names of this process's threads.
    private func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.map {
            ((try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) ?? "")
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Tasks that prefer the loop connect, subscribe, publish and await acks without leaving it;
    /// the client starts no thread of its own (the connect helper is gone once connected).
    @Test func everythingRunsOnTheLoopThread() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop(name: "mqtt-loop-only")
        defer { loop.shutdown() }
        let result = try await withTaskExecutorPreference(loop) { () async throws -> ([Bool], [String]) in
            var onLoop: [Bool] = []
            let client = try MQTTClient(options: broker.options(), loop: loop)
            try await client.connect()
            onLoop.append(loop.inLoop)
            let subscription = try await client.subscribe("only/loop", qos: .atLeastOnce)
            onLoop.append(loop.inLoop)
            try await client.publish(topic: "only/loop", payload: [1, 2, 3], qos: .atLeastOnce)
            onLoop.append(loop.inLoop)
            var iterator = subscription.makeAsyncIterator()
            let message = await iterator.next()
            onLoop.append(loop.inLoop)
            #expect(message?.payload == [1, 2, 3])
            let names = threadNames()
            await client.disconnect()
            onLoop.append(loop.inLoop)
            return (onLoop, names)
        }
        #expect(result.0 == [true, true, true, true, true])
        #expect(!result.1.contains("mqtt-net"), "no network thread in loop mode")
        #expect(result.1.filter { $0 == "mqtt-connect" }.count <= 1)
        #expect(await eventually { !threadNames().contains("mqtt-connect") }, "the connect helper exits")
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
    }

    /// `publishDetached` on the loop only queues: within the loop turn that made them, no
    /// message has been written (QoS 0 completions run on the write); the hook writes them all
    /// before the loop sleeps, and they arrive in order.
    @Test func publishesMadeInOneLoopTurnLeaveTogetherAfterIt() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop(name: "mqtt-burst")
        defer { loop.shutdown() }
        let subscriber = try await broker.client()
        let subscription = try await subscriber.subscribe("burst/#", qos: .atMostOnce)
        let publisher = try MQTTClient(options: broker.options(), loop: loop)
        try await publisher.connect()

        let total = 100
        let written = Mutex<[Int]>([])
        let writtenOnLoop = Mutex<Bool>(true)
        let writtenDuringTheTurn = await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
            loop.execute {
                for id in 0..<total {
                    publisher.publishDetached(topic: "burst/\(id % 5)", payload: Array(String(id).utf8)) { result in
                        if (try? result.get()) != nil { written.withLock { $0.append(id) } }
                        if !loop.inLoop { writtenOnLoop.withLock { $0 = false } }
                    }
                }
                c.resume(returning: written.withLock { $0.count })
            }
        }
        #expect(writtenDuringTheTurn == 0, "nothing is written while the loop turn that published runs")
        #expect(await eventually { written.withLock { $0.count } == total })
        #expect(written.withLock { $0 } == Array(0..<total), "written in call order")
        #expect(writtenOnLoop.withLock { $0 }, "completions run on the loop thread")
        let received = await collect(subscription, count: total)
        #expect(received.compactMap { Int($0.payloadString) } == Array(0..<total))
        await publisher.disconnect()
        await subscriber.disconnect()
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
    }

    /// The keep-alive timer runs `mosquitto_loop_misc`: an idle client sends PINGREQ about one
    /// keep-alive interval (5 s) after its last packet, and the broker answers.
    @Test func keepAliveTimerSendsPings() async throws {
        let broker = try MosquittoBroker(fixture: "debug.conf")
        defer { broker.stop() }
        let loop = EventLoop(name: "mqtt-keepalive")
        defer { loop.shutdown() }
        var options = broker.options(clientID: "idle-loop")
        options.keepAlive = 5
        let client = try MQTTClient(options: options, loop: loop)
        let events = client.connectionEvents()
        try await client.connect()
        let subscription = try await client.subscribe("idle/echo", qos: .atLeastOnce)
        #expect(await eventually(timeout: .seconds(9)) { broker.log.contains("Received PINGREQ from idle-loop") })
        #expect(await eventually { broker.log.contains("Sending PINGRESP to idle-loop") })
        #expect(client.statistics.isConnected)
        try await client.publish(topic: "idle/echo", payload: [9], qos: .atLeastOnce)
        #expect(await collect(subscription, count: 1).first?.payload == [9])
        await client.disconnect()
        var seen: [MQTTConnectionEvent] = []
        for await event in events { seen.append(event) }
        #expect(seen == [.connected(sessionPresent: false), .disconnected(reason: nil)], "no reconnect happened")
    }

    /// disconnect() during a reconnect backoff returns at once, fails the queued publish and
    /// cancels the retry timer.
    @Test func disconnectDuringBackoffCancelsTheRetry() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let loop = EventLoop(name: "mqtt-backoff")
        defer { loop.shutdown() }
        var options = broker.options()
        options.reconnect.minimumDelay = .seconds(20)
        options.reconnect.maximumDelay = .seconds(20)
        let client = try MQTTClient(options: options, loop: loop)
        try await client.connect()
        broker.kill(SIGKILL)
        #expect(await eventually { !client.statistics.isConnected })
        let queued = Task { try await client.publish(topic: "q", payload: [1], qos: .atLeastOnce) }
        #expect(await eventually { client.statistics.unacknowledgedPublishes == 1 })
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 1, hooks: 1), "waiting: the retry timer")
        let start = ContinuousClock.now
        await client.disconnect()
        #expect(ContinuousClock.now - start < .seconds(5))
        await #expect(throws: MQTTError.closed) { try await queued.value }
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
    }

    /// A connect that blocks (here: SYNs to a listener whose accept queue is full are dropped,
    /// so the kernel retransmits them for minutes — all on loopback) runs on the helper thread:
    /// meanwhile the loop keeps running jobs and timers, and `disconnect()` returns at once.
    @Test func aBlockedConnectDoesNotStallTheLoop() async throws {
        let loop = EventLoop(name: "mqtt-slow-connect")
        defer { loop.shutdown() }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let port = try #require(bindLoopback(listener))
        #expect(listen(listener, 0) == 0)
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)  // fills the accept queue
        #expect(connectLoopback(filler, port: port))

        let client = try MQTTClient(options: MQTTConnectOptions(host: "127.0.0.1", port: port), loop: loop)
        let connectEnded = Flag()
        let connecting = Task {
            defer { connectEnded.set() }
            try await client.connect()
        }
        #expect(await eventually { threadNames().contains("mqtt-connect") })
        try await Task.sleep(for: .milliseconds(300))  // in the connect, waiting for a SYN-ACK
        let ranDuringTheConnect = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            loop.execute { c.resume(returning: !connectEnded.isSet) }
        }
        #expect(ranDuringTheConnect, "a loop job ran while the connect was blocked")
        try await loop.sleep(for: .milliseconds(20))  // and a loop timer fired
        #expect(!connectEnded.isSet)
        #expect(!client.statistics.isConnected)
        await client.disconnect()  // does not wait for the blocked attempt
        await #expect(throws: MQTTError.closed) { try await connecting.value }
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
        // Closing the listener refuses the next retransmitted SYN: the helper's connect fails,
        // its result is dropped on the loop and the thread exits.
        close(filler)
        close(listener)
        #expect(await eventually(timeout: .seconds(15)) { !threadNames().contains("mqtt-connect") })
        #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0))
    }
}

/// A flag set once, read from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
