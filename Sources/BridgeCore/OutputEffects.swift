import BinaryCoding
import BridgeStore
import Foundation

/// What a driver's outputs (from a notification, a read, or a failed internal request) come
/// to, worked out without I/O: the store writes, then what is published in output order, then
/// the new state. Made by ``init(_:answering:device:queue:state:at:)``, which also takes the
/// answered command out of the queue, puts the next handshake steps ahead of it and merges
/// the state; the session carries the effects out.
struct OutputEffects {
    /// One thing to publish (or log), in the order of the outputs.
    enum Step {
        /// The command under way got its answer (its outbox entry is removed by ``writes``).
        case answer(PendingCommand, Result<JSONValue?, CommandError>)
        /// An answer nobody awaits (logged).
        case unmatched(key: String)
        /// `<base>/<device>/event`.
        case event(JSONValue)
        /// `<base>/<device>/<topic>`, retained like the state.
        case characteristic(topic: String, JSONValue)
        /// A `device_error` bridge event for bytes the driver could not decode (counted).
        case malformed(String)
        /// A `device_error` bridge event with the error's code.
        case deviceError(CommandError)
    }

    /// Committed together (staged with the turn's other answers) before anything below is
    /// published: the answered command's outbox entry removed, the new state saved.
    var writes: [BridgeStore.Write] = []
    var steps: [Step] = []
    /// The state's new JSON text, published retained after the steps, and whether its
    /// `hardware` changed (nil: the state did not change).
    var state: (json: String, hardwareChanged: Bool)?
    /// What a read's command answers with: the decoded characteristic value, else the state it
    /// changed (nil: neither).
    var readData: JSONValue?

    /// - Parameters:
    ///   - answering: a command these outputs answer (a read's), whose outbox entry is removed in
    ///     the same commit as the new state.
    ///   - date: the wall-clock time of `last_seen` and of the stored state.
    init(_ outputs: [DriverOutput], answering: PendingCommand?, device: String, queue: inout CommandQueue,
         state deviceState: inout DeviceState, at date: Date) {
        var changed = JSONObject()
        var characteristic: JSONValue?
        for o in outputs {
            if case let .state(s) = o { changed.merge(s) }
            if case let .characteristic(_, v) = o { characteristic = v }
        }
        readData = characteristic ?? (changed.isEmpty ? nil : .object(changed))
        var answered = answering?.outboxID
        if answered == nil, let expect = queue.awaitedKey,
           outputs.contains(where: { if case .response(expect, _) = $0 { return true }; return false }) {
            answered = queue.inFlight?.command.outboxID
        }
        if let answered { writes.append(.removeCommand(answered)) }
        // Next handshake steps run before anything queued, in the order given.
        queue.insertSteps(outputs.compactMap { if case let .request(r) = $0 { r } else { nil } })
        if !changed.isEmpty, let merged = deviceState.merge(changed, at: date) {
            state = merged
            writes.append(.saveState(deviceID: device, json: merged.json, at: date.timeIntervalSince1970))
        }
        for o in outputs {
            switch o {
            case .state, .request:
                break  // merged, queued above
            case let .response(key, result):
                if let f = queue.answer(key) { steps.append(.answer(f.command, result)) } else { steps.append(.unmatched(key: key)) }
            case let .event(e): steps.append(.event(e))
            case let .characteristic(topic, value): steps.append(.characteristic(topic: topic, value))
            case let .malformed(reason): steps.append(.malformed(reason))
            case let .deviceError(error): steps.append(.deviceError(error))
            }
        }
    }
}
