import DBus

/// Every error the BlueZ client throws, with a stable ``code`` (spec/bluez.md behaviours 1, 5,
/// 6, 7, 9: BlueZ error names and bluetoothd 5.66's `Failed` messages folded into one enum).
public enum BlueZError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The device is not connected or its services are not resolved yet
    /// (`NotConnected`, or 5.66's `Failed: Not connected`).
    case notConnected(String)
    /// Another operation is under way (`InProgress`, or 5.66's `Failed: Operation already in progress`).
    case inProgress(String)
    /// `NotPermitted` ("Read not permitted", "Write not permitted", "Not paired",
    /// "Insufficient authentication").
    case notPermitted(String)
    /// `NotAuthorized`.
    case notAuthorized(String)
    /// `NotSupported` (e.g. StartNotify on a characteristic without notify/indicate).
    case notSupported(String)
    /// `InvalidArguments`.
    case invalidArguments(String)
    /// `DoesNotExist` (an object BlueZ no longer has).
    case doesNotExist(String)
    /// `NotReady`: the adapter is powered off.
    case notReady(String)
    /// `AlreadyExists` (already paired, agent already registered).
    case alreadyExists(String)
    /// `Failed: Operation failed with ATT error: 0xNN`.
    case att(UInt8)
    /// The link could not be made or was lost (`le-connection-abort-by-local`,
    /// "Software caused connection abort", link lost while waiting).
    case connectionFailed(String)
    /// A connection attempt was cancelled by a Disconnect (`br-connection-canceled`).
    case cancelled(String)
    /// Any other BlueZ error, name and message kept.
    case failed(name: String, message: String)
    /// Nothing in BlueZ's object tree matches (adapter, device or characteristic UUID).
    case notFound(String)
    /// No answer or no expected state change within the deadline.
    case timeout(String)
    /// BlueZ is not on the bus (`ServiceUnknown`/`NameHasNoOwner`).
    case unavailable(String)
    /// The D-Bus connection failed (closed, lost, invalid argument).
    case bus(DBusError)
    /// A value longer than an AcquireWrite socket carries (MTU − 3 bytes, one ATT Write Command;
    /// bluez doc/org.bluez.GattCharacteristic.rst `AcquireWrite`).
    case valueTooLong(length: Int, maximum: Int)

    /// A stable snake_case code for logs and MQTT error payloads.
    public var code: String {
        switch self {
        case .notConnected: return "not_connected"
        case .inProgress: return "in_progress"
        case .notPermitted: return "not_permitted"
        case .notAuthorized: return "not_authorized"
        case .notSupported: return "not_supported"
        case .invalidArguments: return "invalid_arguments"
        case .doesNotExist: return "does_not_exist"
        case .notReady: return "not_ready"
        case .alreadyExists: return "already_exists"
        case .att: return "att_error"
        case .connectionFailed: return "connection_failed"
        case .cancelled: return "cancelled"
        case .failed: return "failed"
        case .notFound: return "not_found"
        case .timeout: return "timeout"
        case .unavailable: return "unavailable"
        case .bus: return "bus"
        case .valueTooLong: return "value_too_long"
        }
    }

    public var description: String {
        switch self {
        case let .notConnected(m), let .inProgress(m), let .notPermitted(m), let .notAuthorized(m),
             let .notSupported(m), let .invalidArguments(m), let .doesNotExist(m), let .notReady(m),
             let .alreadyExists(m), let .connectionFailed(m), let .cancelled(m), let .notFound(m),
             let .timeout(m), let .unavailable(m):
            return "\(code): \(m)"
        case let .att(c): return "att_error: ATT error 0x" + String(c, radix: 16, uppercase: false)
        case let .failed(name, message): return "failed: \(name): \(message)"
        case let .bus(e): return "bus: \(e)"
        case let .valueTooLong(n, max): return "value_too_long: \(n) bytes, at most \(max) (MTU − 3) per packet"
        }
    }

    /// Maps a D-Bus failure of a BlueZ call.
    public init(_ error: DBusError, context: String = "") {
        let where_ = context.isEmpty ? "" : " (\(context))"
        switch error {
        case let .remote(name, message):
            let short = name.hasPrefix("org.bluez.Error.") ? String(name.dropFirst("org.bluez.Error.".count)) : name
            let m = message + where_
            switch short {
            case "NotConnected": self = .notConnected(m)
            case "InProgress": self = .inProgress(m)
            case "NotPermitted": self = .notPermitted(m)
            case "NotAuthorized", "AuthenticationFailed", "AuthenticationRejected": self = .notAuthorized(m)
            case "NotSupported", "NotAvailable": self = .notSupported(m)
            case "InvalidArguments", DBusErrorName.invalidArgs: self = .invalidArguments(m)
            case "DoesNotExist", DBusErrorName.unknownObject, DBusErrorName.unknownMethod: self = .doesNotExist(m)
            case "NotReady": self = .notReady(m)
            case "AlreadyExists", "AlreadyConnected": self = .alreadyExists(m)
            case "AuthenticationTimeout", DBusErrorName.noReply: self = .timeout(m)
            case DBusErrorName.serviceUnknown, DBusErrorName.nameHasNoOwner: self = .unavailable(m)
            case "Failed":
                let attPrefix = "Operation failed with ATT error: 0x"
                if message == "Not connected" {
                    self = .notConnected(m)
                } else if message == "Operation already in progress" {
                    self = .inProgress(m)
                } else if message.hasPrefix(attPrefix), let code = UInt8(message.dropFirst(attPrefix.count), radix: 16) {
                    self = .att(code)
                } else if message.contains("connection-canceled") {
                    self = .cancelled(m)
                } else if message.hasPrefix("le-connection-abort") || message.contains("connection abort")
                    || message.contains("Page Timeout") || message.contains("Connection refused")
                {
                    self = .connectionFailed(m)
                } else {
                    self = .failed(name: name, message: m)
                }
            default: self = .failed(name: name, message: m)
            }
        case let .timeout(method, ms): self = .timeout("\(method) got no reply in \(ms) ms" + where_)
        default: self = .bus(error)
        }
    }
}
