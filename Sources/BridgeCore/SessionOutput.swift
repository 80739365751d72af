import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging

/// What the session tells the rest of the bridge (publishing, persistence).
struct SessionOutput: Sendable {
    let topics: Topics
    let gate: ConnectGate
    let history: (maxEvents: Int, maxAge: Duration)
    /// Publishes through ``batch`` (held while answer writes are staged).
    let mqtt: any MQTTPort
    /// The answers' store writes of this turn and the publishes waiting for them.
    let batch: AnswerBatch
    let store: BridgeStore
    let stateQoS: Int
    let retainState: Bool
    let logger: Logger
    let counters: BridgeCounters
    /// The bridge's one clock: every deadline is read from it, every wait is on it.
    let clock: BridgeClock
    var sleep: Sleep { clock.sleep }
    /// Where each session posts its next deadline for the bridge's one timer (``WakeSchedule``).
    let wake = WakeSchedule()
    /// The device's `hardware` in its state changed (first known, or other): the bridge
    /// republishes its Home Assistant `device` block. Given the device id and its new state.
    var deviceInfoChanged: @Sendable (DeviceConfig, JSONObject) -> Void = { _, _ in }
    /// This bridge's node id when several share the broker (docs/scale-out.md): every lifecycle
    /// response then says which node answered.
    var node: String?
    /// The most commands that may wait per device (`limits.max_queued`).
    var maxQueued = Int.max
    /// The event loop the sessions run on (``DeviceSession/executor``); nil: each its own queue.
    var loop: SessionLoop?

    /// Publishes a bridge event and keeps it in the bounded history.
    func event(_ kind: String, device: String, _ extra: JSONObject = [:]) {
        var o: JSONObject = ["device": .string(device)]
        o.merge(extra)
        let event = BridgeEvent.json(kind, o)
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: event, qos: 0, retain: false))
        try? store.appendEvent(EventRecord(deviceID: device, kind: kind, payload: event.jsonText, at: Date()),
                               maxCount: history.maxEvents, maxAge: history.maxAge)
    }

    /// - Parameter topic: the device's response topic when the caller keeps it (else made here).
    func respond(_ cmd: PendingCommand, device: String, topic: String? = nil, _ status: CommandStatus, data: JSONValue? = nil,
                 error: CommandError? = nil) {
        guard !cmd.isInternal else { return }
        counters.ended(cmd, device: device, status, error: error, at: clock.now())
        // The transaction and the command go in as their texts, made once (``PendingCommand/texts``):
        // not built again as values only to be written over.
        var body = CommandResponse(transaction: nil, status: status, data: data, error: error)
        body.node = node
        let topic = cmd.responseTopic ?? topic ?? topics.response(device)
        mqtt.send(OutboundMessage(topic: topic, payload: body.jsonBytes(texts: cmd.texts), qos: 1, retain: false,
                                  correlationData: cmd.correlationData))
    }
}
