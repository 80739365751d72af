import DBus

/// Errors of the emulator's Swift API (the D-Bus side answers with BlueZ's own error names).
public enum BlueZSimulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `org.bluez` could not be owned on the bus (someone else has it).
    case nameTaken(String)
    /// A D-Bus failure while exporting objects or emitting signals.
    case dbus(DBusError)
    /// No simulated device with this address.
    case unknownDevice(String)
    /// No emulated adapter with this name (``BlueZSimulator/Options/adapters``).
    case unknownAdapter(String)
    /// ``BlueZSimulator/Options/adapters`` cannot be served: why.
    case invalidAdapters(String)
    /// A device with this address is already added.
    case duplicateDevice(String)
    /// A fault name or value ``BlueZSimulator/Faults/set(_:_:)`` does not accept.
    case invalidFault(String)
    /// The private dbus-daemon (``PrivateBus``) did not start: why.
    case privateBus(String)

    public var description: String {
        switch self {
        case let .nameTaken(n): return "cannot own \(n) on this bus"
        case let .dbus(e): return "emulator D-Bus failure: \(e)"
        case let .unknownDevice(a): return "no simulated device \(a)"
        case let .unknownAdapter(n): return "no emulated adapter \(n)"
        case let .invalidAdapters(m): return "adapters: \(m)"
        case let .duplicateDevice(a): return "simulated device \(a) already added"
        case let .invalidFault(m): return "invalid fault: \(m)"
        case let .privateBus(m): return m
        }
    }
}

/// BlueZ error names and the messages bluetoothd 5.66 sends with them (src/error.c;
/// spec/bluez.md behaviours 1, 5, 6, 7).
enum BlueZErrors {
    static let prefix = "org.bluez.Error."
    static func failed(_ m: String) -> DBusError { .remote(name: prefix + "Failed", message: m) }
    static let notConnectedFailed = failed("Not connected")
    static let notConnected = DBusError.remote(name: prefix + "NotConnected", message: "Not Connected")
    static let notReady = DBusError.remote(name: prefix + "NotReady", message: "Resource Not Ready")
    static let inProgress = DBusError.remote(name: prefix + "InProgress", message: "In Progress")
    static let busy = DBusError.remote(name: prefix + "InProgress", message: "Operation already in progress")
    static let notSupported = DBusError.remote(name: prefix + "NotSupported", message: "Operation is not supported")
    static let invalidArguments = DBusError.remote(name: prefix + "InvalidArguments", message: "Invalid arguments in method call")
    static let notAuthorized = DBusError.remote(name: prefix + "NotAuthorized", message: "Operation Not Authorized")
    static let doesNotExist = DBusError.remote(name: prefix + "DoesNotExist", message: "Does Not Exist")
    static func notPermitted(_ m: String) -> DBusError { .remote(name: prefix + "NotPermitted", message: m) }

    /// bluetoothd's `create_gatt_dbus_error` for an ATT error code.
    static func att(_ code: UInt8, read: Bool) -> DBusError {
        switch code {
        case 0x02: return notPermitted("Read not permitted")
        case 0x03: return notPermitted("Write not permitted")
        case 0x05, 0x0F, 0x0C: return notPermitted("Not paired")
        case 0x07, 0x0D: return invalidArguments
        case 0x08: return notAuthorized
        case 0x06: return notSupported
        case 0x00: return failed("Operation failed")
        default:
            let hex = String(code, radix: 16)
            return failed("Operation failed with ATT error: 0x" + (hex.count < 2 ? "0" + hex : hex))
        }
    }
}
