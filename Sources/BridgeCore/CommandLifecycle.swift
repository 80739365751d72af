import BinaryCoding

/// The lifecycle of a command on `<base>/<device>/response` (`shared/spec/bridge.md`).
public enum CommandStatus: String, Sendable, Equatable {
    case queued, sent, ok, error, expired

    /// `ok`, `error` and `expired` end a command; they are always published.
    public var isTerminal: Bool { self == .ok || self == .error || self == .expired }
}

/// Stable error codes published in `error.code`; hubs can switch on them.
public enum ErrorCode: String, Sendable, Equatable, CaseIterable {
    /// The payload is not JSON.
    case invalidJSON = "invalid_json"
    /// JSON, but not a command this device understands.
    case unknownCommand = "unknown_command"
    /// A known command with a missing, mistyped or out-of-range field.
    case invalidValue = "invalid_value"
    /// The device is away and its policy is `reject`.
    case deviceOffline = "device_offline"
    /// Written, but no answer within the command timeout.
    case timeout
    /// The link or the bridge went away after the command was written: not written again
    /// (delivery is at most once).
    case interrupted
    /// The device answered with a failure status (GoPro status byte, protobuf result, Rokid status).
    case deviceError = "device_error"
    /// The device is busy (GoPro busy/encoding gate) and the command could not wait.
    case deviceBusy = "device_busy"
    /// The device refused the bridge's authentication on this link (Rokid: AUTH_RESP retCode
    /// below 0, no AUTH_RESP in time, or no usable service record in 0x9301; the message says
    /// which). Authentication is tried again on the next connect.
    case authFailed = "auth_failed"
    /// BlueZ refused the operation (its error name is in the message).
    case bluetoothError = "bluetooth_error"
    /// Superseded by a newer command for the same attribute (latest-wins policy).
    case superseded
    /// The configured device does not exist.
    case unknownDevice = "unknown_device"
    /// Something inside the bridge failed.
    case internalError = "internal_error"
    /// The payload is larger than `limits.max_payload`; it was not parsed.
    case payloadTooLarge = "payload_too_large"
    /// A `/set` array holds more than `limits.max_commands` commands; none of them ran.
    case tooManyCommands = "too_many_commands"
    /// The device has `limits.max_queued` commands waiting already.
    case queueFull = "queue_full"
    /// A `bridge/request/…` that was a retained message: never run (it would run at every
    /// start); the bridge clears it from the broker.
    case retainedRequest = "retained_request"
    /// `mqtt.api` does not allow the request.
    case forbidden
    /// The bridge stopped (crashed) while handling this message; it is not handled again, even
    /// when the broker delivers it again (answered by the next run, at its start).
    case crashed
}

/// An error answer for a command: a stable code and a message for people.
public struct CommandError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

/// One lifecycle message: `{"transaction":…,"status":…,"command":…,"data":…,"error":{"code":…,"message":…}}`.
public struct CommandResponse: Sendable, Equatable {
    public var transaction: JSONValue?
    public var status: CommandStatus
    public var command: JSONValue?
    public var data: JSONValue?
    public var error: CommandError?
    /// The node that answered, when several bridges share the broker (docs/scale-out.md).
    public var node: String?

    public init(transaction: JSONValue?, status: CommandStatus, command: JSONValue? = nil, data: JSONValue? = nil, error: CommandError? = nil) {
        self.transaction = transaction
        self.status = status
        self.command = command
        self.data = data
        self.error = error
    }

    public var json: JSONValue {
        var o = JSONObject()
        o.reserveCapacity(6)  // every member it may have: one allocation, not one per growth
        if let transaction { o["transaction"] = transaction }
        o["status"] = .string(status.rawValue)
        if let command { o["command"] = command }
        if let data { o["data"] = data }
        if let error { o["error"] = ["code": .string(error.code.rawValue), "message": .string(error.message)] }
        if let node { o["node"] = .string(node) }
        return .object(o)
    }

    /// `json`'s text, written member by member without building the object (every command's
    /// response).
    public var jsonBytes: [UInt8] { jsonBytes(texts: nil) }

    /// ``jsonBytes`` with `transaction` and `command` copied from their JSON texts when the caller
    /// has them (``PendingCommand/texts``, made once for the outbox), not written again.
    func jsonBytes(texts: PendingCommand.Texts?) -> [UInt8] {
        var w = JSONObjectWriter()
        if let transaction = texts?.transaction { w.member("transaction", json: transaction) } else if let transaction { w.member("transaction", transaction) }
        w.member("status", string: status.rawValue)
        if let command = texts?.command { w.member("command", json: command) } else if let command { w.member("command", command) }
        if let data { w.member("data", data) }
        if let error {
            w.member("error") { e in
                e.member("code", string: error.code.rawValue)
                e.member("message", string: error.message)
            }
        }
        if let node { w.member("node", string: node) }
        return w.finish()
    }
}

/// A command as received on `/set` (one element of an object-or-array payload).
public struct InboundCommand: Sendable, Equatable {
    /// The command without the `transaction` member.
    public var body: JSONObject
    public var transaction: JSONValue?
}

/// Parses a `/set` payload: one JSON object or an array of objects, each with an optional
/// `transaction` (an array's elements inherit a top-level transaction only if they have none —
/// there is none at the top of an array, so each carries its own).
/// An array of more than `maxCommands` elements is refused whole (`too_many_commands`).
public func parseSetPayload(_ payload: [UInt8], maxCommands: Int = .max) throws(CommandError) -> [InboundCommand] {
    var value: JSONValue
    do { value = try JSONValue(parsing: payload) } catch {
        throw CommandError(.invalidJSON, "\(error)")
    }
    // The `transaction` member is taken out of each object in place: the parsed value is the
    // object's only holder, so its storage is not copied for the removal.
    func one(_ v: inout JSONValue, _ where_: String) throws(CommandError) -> InboundCommand {
        guard case .object = v else {
            throw CommandError(.invalidValue, "\(where_) must be a JSON object, not \(v.typeName)")
        }
        let t = v.removeMember("transaction")
        guard case let .object(o) = v, !o.isEmpty else { throw CommandError(.unknownCommand, "\(where_) has no command") }
        return InboundCommand(body: o, transaction: t)
    }
    if case var .array(items) = value {
        value = .null  // `items` holds the elements alone
        if items.isEmpty { throw CommandError(.invalidValue, "empty command array") }
        if items.count > maxCommands {
            throw CommandError(.tooManyCommands, "\(items.count) commands in one message (limits.max_commands is \(maxCommands)); none was run")
        }
        var out: [InboundCommand] = []
        out.reserveCapacity(items.count)
        for i in items.indices { out.append(try one(&items[i], "element \(i)")) }
        return out
    }
    return [try one(&value, "the payload")]
}

/// The plain value of a `/set/<attribute>` shortcut: JSON if it parses (numbers, true/false,
/// quoted strings, objects), `ON`/`OFF` (any case) as booleans, anything else as a string.
public func parseShortcutValue(_ payload: [UInt8]) -> JSONValue {
    let text = String(decoding: payload, as: UTF8.self).trimmedWhitespace()
    switch text.uppercased() {
    case "ON", "TRUE": return .bool(true)
    case "OFF", "FALSE": return .bool(false)
    default: break
    }
    if let v = try? JSONValue(parsing: text) { return v }
    return .string(text)
}

extension String {
    func trimmedWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
