import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging

// The core's routing: `/set`, `/get`, `/write` to the devices' sessions (through the extension
// that routes commands, when one does), the refusals, and the outbox resumed at start.

extension Bridge {
    /// Commands left in the outbox by a previous run (or by a session that was replaced):
    /// `sent` ones end `error` (interrupted — at-most-once), queued ones go back to their device
    /// (or expire).
    func resumeOutbox(for device: String? = nil) {
        guard let pending = try? store.pendingCommands(for: device) else { return }
        let (now, wallNow) = (clock.now(), Date())
        for entry in pending {
            guard let cmd = PendingCommand(outboxEntry: entry, now: now, wallNow: wallNow), let session = session(entry.deviceID) else {
                if let id = entry.id { try? store.removeCommand(id) }
                continue
            }
            if CommandQueue.resumption(of: entry.status) == .interrupted {
                if let id = entry.id { try? store.removeCommand(id) }
                output.respond(cmd, device: entry.deviceID, .error,
                               error: CommandError(.interrupted, "the bridge stopped after the command was written (not repeated)"))
            } else {
                routeCommand(cmd, to: session, device: entry.deviceID)
            }
        }
    }

    /// Handles one inbound MQTT message (any thread; returns at once).
    public func handle(_ message: InboundMessage) {
        // Too large, a retained request, a clear: dealt with before anything is parsed (Bridge+Inbound).
        let route = topics.route(message.topic)  // routed once, here
        guard admit(message, route) else { return }
        guard let mark = beginHandling(message, route) else { return }  // the message that crashed the last run, again
        defer { mark.end() }
        for e in extensions.all where e.handle(message) { return }
        guard let route else { return }
        if alreadyHandled(message, route) { return }
        switch route {
        case let .set(device):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let commands: [InboundCommand]
            do throws(CommandError) { commands = try parseSetPayload(message.payload, maxCommands: limits.maxCommands) } catch {
                return reject(device: device, message, transaction: nil, error: error)
            }
            for c in commands { routeCommand(pending(.command(c.body), c.transaction, message, session), to: session, device: device) }
        case let .setAttribute(device, attribute):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            let body: JSONObject = [attribute: parseShortcutValue(message.payload)]
            routeCommand(pending(.command(body), nil, message, session), to: session, device: device)
        case let .get(device):
            if message.retain { return ignoreRetained(message) }  // a read at every start, for nobody
            guard let session = session(device, message) else { return }
            var attributes: [String] = []
            var transaction: JSONValue?
            if var o = (try? JSONValue(parsing: message.payload))?.objectValue {
                // `transaction` is echoed, as for /set, not an attribute to read.
                transaction = o["transaction"]
                o["transaction"] = nil
                attributes = o.keys
            }
            let body: JSONObject = ["get": .array(attributes.map { .string($0) })]
            routeCommand(pending(.command(body), transaction, message, session), to: session, device: device)
        case let .write(device, characteristic):
            if message.retain { return ignoreRetained(message) }
            guard let session = session(device, message) else { return }
            routeCommand(pending(.write(topic: characteristic, payload: message.payload), nil, message, session), to: session, device: device)
        case .bridgeRequest:
            break  // the bridge API's (``BridgeAPIExtension``)
        }
    }

    /// The broker's second delivery of a message already handled (its PUBACK was lost with the
    /// connection): acknowledged by the client, not acted on again (at most once).
    func alreadyHandled(_ message: InboundMessage, _ route: Topics.Route) -> Bool {
        guard isRedelivery(message, route) else { return false }
        logger.warning("ignoring a message the broker delivered again after a reconnect (already handled)",
                       metadata: ["topic": "\(message.topic)", "packet_id": "\(message.packetID ?? 0)"])
        return true
    }

    /// Where a command goes: to its session, or through the extension that routes commands
    /// (several bridges on one broker: only the device's owner runs it).
    func routeCommand(_ command: PendingCommand, to session: DeviceSession, device: String) {
        guard let router = extensions.router else { return session.submit(command) }
        router.route(command, to: session, device: device)
    }

    /// Whether this bridge answers a command for `device` that no session takes (a bad or
    /// unknown one): always alone; with several bridges the device's owner, or the leader.
    func answers(for device: String?) -> Bool { extensions.router?.answers(for: device) ?? true }

    /// The filters on which the bridge must receive its own publishes too (MQTT 5 no-local off).
    public var ownPublishesWanted: Set<String> { extensions.all.reduce(into: []) { $0.formUnion($1.ownPublishesWanted) } }

    /// The broker connection is gone (several bridges: commands are held until it is back).
    public func brokerDisconnected() {
        for e in extensions.all { e.brokerDisconnected() }
    }

    func pending(_ payload: PendingCommand.Payload, _ transaction: JSONValue?, _ m: InboundMessage, _ s: DeviceSession) -> PendingCommand {
        let now = clock.now()
        return PendingCommand(payload: payload, transaction: transaction, responseTopic: m.responseTopic,
                              correlationData: m.correlationData, deadline: now + s.config.offlineDeadline, received: now)
    }

    func session(_ device: String, _ m: InboundMessage) -> DeviceSession? {
        if let s = session(device) { return s }
        reject(device: nil, m, transaction: nil, error: CommandError(.unknownDevice, "no device '\(device)' is configured"))
        return nil
    }

    func reject(device: String?, _ m: InboundMessage, transaction: JSONValue?, error: CommandError) {
        // With several bridges, one answers: the device's owner, or the leader when none.
        guard answers(for: device) else { return }
        counters.rejected(device: device, error)
        var response = CommandResponse(transaction: transaction, status: .error, error: error)
        response.node = output.node
        let body = response.jsonBytes
        if let rt = m.responseTopic {
            mqtt.send(OutboundMessage(topic: rt, payload: body, qos: 1, retain: false, correlationData: m.correlationData))
        } else if let device {
            mqtt.send(OutboundMessage(topic: topics.response(device), payload: body, qos: 1, retain: false))
        }
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: BridgeEvent.json("command_rejected", ["topic": .string(m.topic),
                                                                      "error": .string(error.description)]), qos: 0, retain: false))
    }

    func ignoreRetained(_ m: InboundMessage) {
        logger.info("ignoring a retained command", metadata: ["topic": "\(m.topic)"])
    }
}
