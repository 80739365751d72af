import Mosquitto
import Reactor
import TestSupport

/// The two ways an `MQTTClient` runs: on its own network thread (the default), or on a
/// `Reactor.EventLoop` with no thread of its own (docs/mqtt.md "Loop mode").
enum ClientMode: String, CaseIterable, Sendable, CustomStringConvertible {
    case thread, loop
    var description: String { rawValue }
}

/// Makes the clients of one test in one mode; in loop mode they all share one loop, shut down
/// by `shutdown()` once they are disconnected.
final class ClientFactory: Sendable {
    let mode: ClientMode
    let loop: EventLoop?

    init(_ mode: ClientMode) {
        self.mode = mode
        loop = mode == .loop ? EventLoop(name: "mqtt-test-loop") : nil
    }

    func make(_ options: MQTTConnectOptions) throws(MQTTError) -> MQTTClient {
        if let loop { return try MQTTClient(options: options, loop: loop) }
        return try MQTTClient(options: options)
    }

    /// A connected client of `broker`.
    func client(_ broker: MosquittoBroker, _ configure: (inout MQTTConnectOptions) -> Void = { _ in }) async throws -> MQTTClient {
        var options = broker.options()
        configure(&options)
        let client = try make(options)
        try await client.connect()
        return client
    }

    /// Nothing of the clients is left on the loop (thread mode: trivially true).
    func loopIsEmpty() async -> Bool {
        guard let loop else { return true }
        return await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 0, hooks: 0)
    }

    func shutdown() { loop?.shutdown() }
}
