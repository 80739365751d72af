import DBus
import Reactor

extension PrivateBus {
    /// A client connection to this bus on `loop` (10 s to connect); the caller closes it.
    public func connect(loop: EventLoop) async throws -> DBusConnection {
        try await DBusConnection.connect(.address(address), timeout: .seconds(10), loop: loop)
    }
}
