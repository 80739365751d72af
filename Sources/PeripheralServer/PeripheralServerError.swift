#if canImport(Glibc)
import Glibc
#endif

/// Errors of ``PeripheralServer``'s Swift API. Errors in what a front-end sends are not thrown:
/// they are answered with an `error` line (docs/bluez.md "The radio front-end protocol").
public enum PeripheralServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket path is empty or longer than `sockaddr_un` can hold (107 bytes).
    case invalidPath(String)
    /// Something other than a socket already exists at the path (a stale socket is replaced).
    case pathInUse(String)
    /// A system call failed: its name and `errno`.
    case system(String, Int32)
    /// Two devices with one address.
    case duplicateDevice(String)

    public var description: String {
        switch self {
        case let .invalidPath(p): return "invalid socket path \(p.debugDescription) (1…107 bytes)"
        case let .pathInUse(p): return "\(p) exists and is not a socket"
        case let .system(call, code): return "\(call) failed: \(String(cString: strerror(code)))"
        case let .duplicateDevice(a): return "two devices with the address \(a)"
        }
    }
}
