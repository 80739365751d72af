/// Every error the `DBus` module throws (spec/bluez.md, "BlueZ over D-Bus": callers must never
/// hang and must see BlueZ's error names as they are).
///
/// Remote errors keep the D-Bus error name verbatim, including names this module has never heard
/// of; the well-known ones are listed in ``DBusErrorName`` for comparison.
public enum DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer answered with a D-Bus error reply (D-Bus Specification, "Message Types: ERROR"):
    /// `name` is the error name as sent (e.g. `org.bluez.Error.Failed`), `message` its first
    /// string argument or "" when it had none.
    case remote(name: String, message: String)
    /// No reply arrived within the call's timeout (local timeout, not a peer's error).
    case timeout(method: String, milliseconds: Int)
    /// The connection is closed or was lost (daemon gone, socket closed, `close()` called).
    case disconnected
    /// Opening or registering the connection failed; `name`/`message` come from libdbus.
    case connectionFailed(name: String, message: String)
    /// A signature string is not a valid D-Bus signature (D-Bus Specification, "Type System"):
    /// `offset` is the index of the offending character.
    case invalidSignature(String, offset: Int, reason: String)
    /// A value, name or path is not acceptable to D-Bus (e.g. an object path with `//`,
    /// a string with NUL, array elements that do not match the element type).
    case invalidArgument(String)
    /// Convenience decoding found a different type than asked for (`expected`/`actual` are
    /// D-Bus signatures).
    case typeMismatch(expected: String, actual: String)
    /// The awaiting task was cancelled; the pending call was cancelled too.
    case cancelled
    /// libdbus reported it could not allocate memory.
    case outOfMemory

    public var description: String {
        switch self {
        case let .remote(name, message):
            return message.isEmpty ? "D-Bus error \(name)" : "D-Bus error \(name): \(message)"
        case let .timeout(method, ms): return "D-Bus call \(method) timed out after \(ms) ms"
        case .disconnected: return "D-Bus connection is closed"
        case let .connectionFailed(name, message): return "D-Bus connection failed (\(name)): \(message)"
        case let .invalidSignature(sig, offset, reason):
            return "invalid D-Bus signature \"\(sig)\" at offset \(offset): \(reason)"
        case let .invalidArgument(what): return "invalid D-Bus argument: \(what)"
        case let .typeMismatch(expected, actual):
            return "D-Bus type mismatch: expected \(expected), got \(actual)"
        case .cancelled: return "D-Bus call cancelled"
        case .outOfMemory: return "libdbus is out of memory"
        }
    }

    /// The error name for a remote error, `nil` for local errors.
    public var remoteName: String? {
        if case let .remote(name, _) = self { return name }
        return nil
    }
}

/// Well-known D-Bus error names (D-Bus Specification, "Message Bus Messages" and
/// org.freedesktop.DBus.Error.*), for comparing with ``DBusError/remote(name:message:)``.
public enum DBusErrorName {
    public static let failed = "org.freedesktop.DBus.Error.Failed"
    public static let noReply = "org.freedesktop.DBus.Error.NoReply"
    public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
}
