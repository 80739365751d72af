import BinaryCoding
import BridgeStore
import Foundation
import Synchronization

/// A message that can act (a command, a bridge request) is marked in the store before it is
/// handled and unmarked after (a bridge request: when it is answered). A marker found at start
/// names a message the previous run died handling: it is answered `error`/`crashed` and, when the
/// broker delivers it again (the bridge's session is persistent and the message was never
/// acknowledged), it is acknowledged and dropped, so one message cannot crash the bridge in a loop.
struct AfterCrash: Sendable {
    var loaded = false
    /// Not answered yet (`run()` answers them).
    var toAnswer: [InflightMessage] = []
    /// Dropped when delivered again within ``Redeliveries/window`` of `since`.
    var toDrop: [InflightMessage] = []
    var since: BridgeInstant?
}

/// What ``Bridge/beginHandling(_:_:)`` decided for one message.
struct HandlingMark {
    let bridge: Bridge
    let topic: String
    let digest: Int64?
    /// A bridge request's marker is removed by its reply instead.
    let untilReply: Bool

    /// After handling: the marker goes.
    func end() {
        guard let digest, !untilReply else { return }
        try? bridge.store.clearInflight(topic: topic, digest: digest)
    }
}

extension Bridge {
    /// Test only: the process dies (`fatalError`) while handling a message on this topic, after
    /// its marker is written (set by `gatt2mqtt run` from `TEST_GATT2MQTT_CRASH_ON_TOPIC`, for the
    /// end-to-end tests of the crash trace and of the crash-loop guard). Nil: never.
    public static let crashOnTopicForTests = Mutex<String?>(nil)

    /// Before handling `message`: nil when it is the message the previous run died handling,
    /// delivered again (then it is dropped); otherwise its marker, to ``HandlingMark/end()``.
    func beginHandling(_ message: InboundMessage, _ route: Topics.Route?) -> HandlingMark? {
        guard let route else { return HandlingMark(bridge: self, topic: message.topic, digest: nil, untilReply: false) }
        // The marker (its digest computed once, here) before the check that compares with it.
        let marker = InflightMessage(topic: message.topic, payload: message.payload, packetID: message.packetID,
                                     responseTopic: message.responseTopic, correlationData: message.correlationData, at: Date())
        let digest = marker.digest
        let now = clock.now()
        let dropped = afterCrash.withLock { s -> InflightMessage? in
            loadCrashed(&s, at: now)
            guard !s.toDrop.isEmpty else { return nil }
            if let since = s.since, now - since > Redeliveries.window { s.toDrop = []; return nil }
            guard let i = s.toDrop.firstIndex(where: {
                $0.topic == message.topic && $0.digest == digest && $0.packetID != nil && $0.packetID == message.packetID
            }) else { return nil }
            return s.toDrop.remove(at: i)
        }
        if dropped != nil {
            logger.error("dropping the message the bridge stopped while handling, delivered again by the broker (answered crashed)",
                         metadata: ["topic": "\(message.topic)", "packet_id": "\(message.packetID ?? 0)"])
            return nil
        }
        do { try store.markInflight(marker) } catch {
            logger.warning("cannot record the message being handled", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
            return HandlingMark(bridge: self, topic: message.topic, digest: nil, untilReply: false)
        }
        if Bridge.crashOnTopicForTests.withLock({ $0 == message.topic }) {
            fatalError("TEST_GATT2MQTT_CRASH_ON_TOPIC: crashing while handling \(message.topic) (a test of the crash trace and the crash-loop guard)")
        }
        // A request's marker goes with its answer (some are answered later, by a task); a
        // retained one may get no answer: its marker goes at once.
        if case .bridgeRequest = route, !message.retain { return HandlingMark(bridge: self, topic: message.topic, digest: digest, untilReply: true) }
        return HandlingMark(bridge: self, topic: message.topic, digest: digest, untilReply: false)
    }

    /// A bridge request was answered: its marker goes.
    func handledRequest(_ message: InboundMessage) {
        try? store.clearInflight(topic: message.topic, digest: InflightMessage.digest(message.payload))
    }

    /// Takes the markers left by the previous run, once (at the first message or at start).
    private func loadCrashed(_ s: inout AfterCrash, at now: BridgeInstant) {
        guard !s.loaded else { return }
        s.loaded = true
        let left: [InflightMessage]
        do { left = try store.takeInflight() } catch {
            logger.warning("cannot read the messages being handled by the previous run", metadata: ["error": "\(error)"])
            return
        }
        s.toAnswer = left
        s.toDrop = left
        s.since = now
    }

    /// At start: each message the previous run died handling is named in the log and answered
    /// `error` with code `crashed` (on its response topic, echoing its `transaction`).
    func answerCrashed() {
        let now = clock.now()
        let left = afterCrash.withLock { s -> [InflightMessage] in
            loadCrashed(&s, at: now)
            defer { s.toAnswer = [] }
            return s.toAnswer
        }
        for m in left {
            logger.error("the bridge stopped while handling a message (a crash?): it is answered crashed and not handled again",
                         metadata: ["topic": "\(m.topic)", "packet_id": "\(m.packetID ?? 0)",
                                    "payload": "\(String(decoding: m.payload.prefix(120), as: UTF8.self))"])
            let message = InboundMessage(topic: m.topic, payload: m.payload, responseTopic: m.responseTopic,
                                         correlationData: m.correlationData, packetID: m.packetID)
            let transaction = (try? JSONValue(parsing: m.payload))?.objectValue?["transaction"]
            let error = CommandError(.crashed, "the bridge stopped while handling this message (not handled again)")
            switch topics.route(m.topic) {
            case let .set(device), let .setAttribute(device, _), let .get(device), let .write(device, _):
                reject(device: device, message, transaction: transaction, error: error)
            case let .bridgeRequest(action):
                var body: JSONObject = ["status": "error", "error": .string(error.message), "code": .string(ErrorCode.crashed.rawValue)]
                if let transaction { body["transaction"] = transaction }
                Reply(bridge: self, action: action, message: message, transaction: transaction).send(body)
            case nil:
                break
            }
        }
    }
}
